"""The controller side of a cluster, in process: real ZooKeeper, real KafkaControllers, fake broker endpoints.

Each :class:`Node` is what a broker contributes to the controller side of a cluster: its
own ZooKeeper session (registration under /brokers/ids and the controller election),
a :class:`~controller.kafka_controller.KafkaController`, and a
:class:`~tests.controller.fake_broker.FakeBroker` at its inter-broker endpoint that
records what the controller sent it. No replica exists: what a controller decides is
read from the requests it sent and from ZooKeeper. Scenarios run with ``tests.in_process.run``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from controller.controller_config import ControllerConfig
from controller.kafka_controller import KafkaController
from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import KafkaZkClient
from tests.controller.fake_broker import FakeBroker
from tests.in_process import wait_for

SESSION_MS = 4000
LISTENER = "PLAINTEXT"


@dataclass
class Node:
    broker_id: int
    connect: str
    config: ControllerConfig
    rack: str | None = None
    fake: FakeBroker = field(init=False)
    zk: KafkaZkClient = field(init=False)
    controller: KafkaController = field(init=False)
    broker_epoch: int = -1
    running: bool = False

    async def start(self, start_controller: bool = True) -> Node:
        self.fake = await FakeBroker(self.broker_id).start()
        self.zk = KafkaZkClient(self.connect, SESSION_MS, 10_000)
        await self.zk.start()
        self.broker_epoch = await self.zk.register_broker(self.info())
        self.controller = KafkaController(self.config, self.broker_id, self.zk, lambda: self.broker_epoch)
        self.running = True
        if start_controller:
            await self.controller.startup()
        return self

    def info(self) -> zd.BrokerInfo:
        return zd.BrokerInfo(self.broker_id, [zd.EndPoint(self.fake.host, self.fake.port, LISTENER, "PLAINTEXT")],
                             self.rack)

    async def stop(self) -> None:
        """The broker dies: its controller stops, its session (and registration) goes."""
        if not self.running:
            return
        self.running = False
        try:
            await self.controller.shutdown()
        finally:
            try:
                await self.zk.close()
            finally:
                await self.fake.stop()


@dataclass
class ControllerRig:
    """Brokers' controller sides (:class:`Node`) on one ZooKeeper chroot; at most one controller is active."""

    connect: str
    config: ControllerConfig = field(default_factory=lambda: ControllerConfig(inter_broker_listener_name=LISTENER))
    nodes: dict[int, Node] = field(default_factory=dict)

    async def start(self, broker_ids: list[int], racks: dict[int, str] | None = None) -> ControllerRig:
        for broker_id in broker_ids:
            await self.add(broker_id, (racks or {}).get(broker_id))
        await wait_for(lambda: self.active() is not None, what="a controller")
        return self

    async def add(self, broker_id: int, rack: str | None = None) -> Node:
        node = Node(broker_id, self.connect, self.config, rack)
        self.nodes[broker_id] = node
        await node.start()
        return node

    def active(self) -> Node | None:
        active = [n for n in self.nodes.values() if n.running and n.controller.is_active]
        assert len(active) <= 1, f"more than one active controller: {[n.broker_id for n in active]}"
        return active[0] if active else None

    def controller(self) -> KafkaController:
        node = self.active()
        assert node is not None, "no active controller"
        return node.controller

    async def wait_idle(self, timeout: float = 15.0) -> None:
        """Until the active controller's queue is empty and no event runs (twice in a row)."""
        quiet = 0
        deadline = time.monotonic() + timeout
        while quiet < 3:
            node = self.active()
            if node is not None and node.controller.event_manager.queue_size() == 0 and node.controller.event_manager.current is None:
                quiet += 1
            else:
                quiet = 0
            if time.monotonic() > deadline:
                raise AssertionError("controller did not become idle")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        for node in list(self.nodes.values()):
            await node.stop()
