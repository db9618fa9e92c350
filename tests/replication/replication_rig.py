"""The replica side of a cluster, in process: replica managers on one event loop, each behind a
small real Kafka socket server, under a controller the test drives by hand.

A follower's fetcher must talk to a leader over a real socket, through the
broker's own Fetch, ListOffsets and OffsetForLeaderEpoch handlers (``broker.handlers``): this server
decodes requests with ``protocol.api``, runs those handlers over the leader's
ReplicaManager and writes their responses (file ranges read with pread). It
also plays a ZooKeeper-mode controller for AlterPartition: a change is applied
only at the partition epoch it names (INVALID_UPDATE_VERSION otherwise) and the
leader epoch (FENCED_LEADER_EPOCH), and bumps the partition epoch, as
the state znode's version moves. Loopback only; everything is closed by
``Node.close``.
"""

from __future__ import annotations

import concurrent.futures
import types
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config.broker_config import BrokerConfig
from broker.fetch_session import FetchSessionCache
from broker.handlers import api_versions as api_versions_handler
from broker.handlers import fetch as fetch_handler
from broker.handlers import list_offsets as list_offsets_handler
from broker.handlers import offset_for_leader_epoch as offset_for_leader_epoch_handler
from protocol.api import DecodedRequest
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResponsePartitionData,
    AlterPartitionResponseTopicData,
)
from protocol.messages.api_versions import ApiVersion
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionState,
)
from protocol.primitives import Message
from replication.alter_partition_manager import AlterPartitionManager
from replication.append_thread import AppendThread
from replication.partition_state import LeaderAndIsr
from replication.replica_manager import PartitionAppendResult, ReplicaManager
from replication.replication_config import ReplicationConfig
from replication.state_change_requests import BrokerEndpoint, LeaderAndIsrStates, PartitionState
from storage.log import Log
from storage.log_manager import LogManager
from tests.in_process import KafkaFrameServer, run
from tests.storage.helpers import make_batch

TopicPartition = tuple[str, int]


@dataclass
class _Topic:
    name: str
    topic_id: uuid.UUID


class _Metadata:
    """The two lookups the Fetch handler makes of the broker's metadata."""

    def __init__(self, topics: dict[str, uuid.UUID]) -> None:
        self.topics = {name: _Topic(name, topic_id) for name, topic_id in topics.items()}

    def get(self, name: str) -> _Topic | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> _Topic | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)


@dataclass
class Controller:
    """The partition states as ZooKeeper holds them; answers AlterPartition."""

    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    ids: dict[uuid.UUID, str] = field(default_factory=dict)
    requests: int = 0
    #: Answer the next N AlterPartition requests with this top-level error.
    fail_next: list[int] = field(default_factory=list)

    def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        self.requests += 1
        if self.fail_next:
            return AlterPartitionResponse(error_code=self.fail_next.pop(0))
        topics = []
        for topic in request.topics:
            answers = []
            for p in topic.partitions:
                tp = (self.ids.get(topic.topic_id, ""), p.partition_index)
                current = self.states.get(tp)
                isr = [b.broker_id for b in p.new_isr_with_epochs] or list(p.new_isr)
                if current is None:
                    answers.append(AlterPartitionResponsePartitionData(
                        partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                if p.leader_epoch != current.leader_epoch:
                    error = ErrorCode.FENCED_LEADER_EPOCH
                elif p.partition_epoch != current.partition_epoch:
                    error = ErrorCode.INVALID_UPDATE_VERSION
                else:
                    error = ErrorCode.NO_ERROR
                    current = self.states[tp] = LeaderAndIsr(current.leader, current.leader_epoch, tuple(isr),
                                                             current.partition_epoch + 1)
                answers.append(AlterPartitionResponsePartitionData(
                    partition_index=p.partition_index, error_code=error, leader_id=current.leader,
                    leader_epoch=current.leader_epoch, isr=list(current.isr), partition_epoch=current.partition_epoch))
            topics.append(AlterPartitionResponseTopicData(topic_id=topic.topic_id, partitions=answers))
        return AlterPartitionResponse(topics=topics)

    def leader_and_isr(self, controller_epoch: int, topic: str, topic_id: uuid.UUID, partition: int,
                       replicas: list[int], live: dict[int, int], *, leader: int | None = None,
                       leader_epoch: int | None = None, isr: list[int] | None = None) -> LeaderAndIsrStates:
        """Record a new state (a leader election bumps the leader epoch) and the request telling it."""
        tp = (topic, partition)
        self.ids[topic_id] = topic
        current = self.states.get(tp)
        state = LeaderAndIsr(
            leader if leader is not None else (current.leader if current else replicas[0]),
            leader_epoch if leader_epoch is not None else (current.leader_epoch + 1 if current else 0),
            tuple(isr if isr is not None else (current.isr if current else replicas)),
            current.partition_epoch + 1 if current else 0)
        self.states[tp] = state
        return self.request_for(controller_epoch, topic, topic_id, partition, replicas, live)

    def request_for(self, controller_epoch: int, topic: str, topic_id: uuid.UUID, partition: int,
                    replicas: list[int], live: dict[int, int]) -> LeaderAndIsrStates:
        state = self.states[(topic, partition)]
        ps = LeaderAndIsrPartitionState(
            topic_name=topic, partition_index=partition, controller_epoch=controller_epoch, leader=state.leader,
            leader_epoch=state.leader_epoch, isr=list(state.isr), partition_epoch=state.partition_epoch,
            replicas=list(replicas))
        return LeaderAndIsrStates(0, controller_epoch, [PartitionState(topic, topic_id, ps)],
                                  {b: BrokerEndpoint(b, "127.0.0.1", port) for b, port in live.items()})


class KafkaServer:
    """ApiVersions, Fetch, ListOffsets and OffsetForLeaderEpoch through the broker's handlers;
    AlterPartition to a Controller."""

    def __init__(self, replica_manager: ReplicaManager | None, topics: dict[str, uuid.UUID],
                 controller: Controller | None = None) -> None:
        self.services = types.SimpleNamespace(metadata=_Metadata(topics), fetch_sessions=FetchSessionCache(100),
                                              cluster_view=types.SimpleNamespace(
                                                  unhosted_error=lambda *_: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                              replica_manager=replica_manager,
                                              # Kafka's defaults (the Fetch handler caps by fetch.max.bytes).
                                              config=BrokerConfig(),
                                              # A broker without an authorizer: every request is allowed.
                                              authorizer=None)
        self.controller = controller
        self._frames = KafkaFrameServer(self._serve)
        self.requests: dict[int, int] = {}
        #: (API key, version) of every request served.
        self.versions: set[tuple[int, int]] = set()
        #: API key → the highest version advertised (an older broker).
        self.max_versions: dict[int, int] = {}
        #: Every Fetch request served, decoded, in order.
        self.fetch_requests: list[Any] = []

    @property
    def port(self) -> int:
        return self._frames.port

    async def start(self) -> int:
        return await self._frames.start()

    def _serve(self, decoded: DecodedRequest) -> Message | Awaitable[Message]:
        self.requests[decoded.api_key] = self.requests.get(decoded.api_key, 0) + 1
        self.versions.add((decoded.api_key, decoded.api_version))
        return self._handle(decoded.api_key, decoded.api_version, decoded.body)

    def _handle(self, api_key: int, version: int, body: Any) -> Message | Awaitable[Message]:
        ctx = types.SimpleNamespace(api_version=version)
        if api_key == 18:
            response = api_versions_handler.build_response()
            response.api_keys.append(ApiVersion(api_key=56, min_version=2, max_version=3))
            for key in response.api_keys:
                key.max_version = min(key.max_version, self.max_versions.get(key.api_key, key.max_version))
            return response
        if api_key == 1:
            self.fetch_requests.append(body)
            return fetch_handler.handle(ctx, self.services, body)  # type: ignore[arg-type]
        if api_key == 2:
            return list_offsets_handler.handle(ctx, self.services, body)  # type: ignore[arg-type]
        if api_key == 23:
            return offset_for_leader_epoch_handler.handle(ctx, self.services, body)  # type: ignore[arg-type]
        if api_key == 56 and self.controller is not None:
            return self.controller.alter_partition(body)
        raise AssertionError(f"unexpected API {api_key}")

    async def close(self) -> None:
        await self._frames.close()


class Node:
    """One broker's replication stack: log manager, append thread, replica manager, server."""

    def __init__(self, broker_id: int, log_dir: Path, config: ReplicationConfig, topics: dict[str, uuid.UUID],
                 controller: Controller) -> None:
        self.broker_id = broker_id
        self.log_manager = LogManager([log_dir], broker_id=broker_id)
        self.log_manager.startup()
        self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"append-{broker_id}")
        self.rm = ReplicaManager(broker_id, self.log_manager, AppendThread(self.executor), config)
        self.server = KafkaServer(self.rm, topics, controller)
        self.controller_port = 0
        self.alter_partition: AlterPartitionManager | None = None

    async def start(self, controller_port_fn: Any) -> int:
        port = await self.server.start()
        self.alter_partition = AlterPartitionManager(self.broker_id, lambda: 1, controller_port_fn,
                                                     retry_backoff_ms=20)
        self.rm.set_alter_partition_manager(self.alter_partition)
        self.rm.start_replication()
        return port

    async def close(self) -> None:
        self.rm.shutdown()
        await self.rm.shutdown_replication()
        if self.alter_partition is not None:
            await self.alter_partition.shutdown()
        await self.server.close()
        self.executor.shutdown(wait=True)
        self.log_manager.shutdown()


# -- two or three brokers replicating one partition ---------------------------------------------------
TOPIC = "t"
TP = (TOPIC, 0)


def batches(log: Log) -> list[tuple[int, int, int]]:
    """(base offset, partition leader epoch, CRC) of every batch, in order."""
    return [(h.base_offset, h.partition_leader_epoch, h.crc)
            for segment in log.log_segments() for _, h in segment.batches()]


async def produce(rm: ReplicaManager, count: int, acks: int = -1, timeout_ms: int = 5000,
                  batch: bytearray | None = None) -> PartitionAppendResult:
    outcome = rm.append_records([(TOPIC, 0, batch if batch is not None else make_batch(count))], acks, timeout_ms)
    results = outcome if isinstance(outcome, list) else await outcome
    return results[0]


class ReplicationRig:
    """Brokers replicating partition ``TP`` under a hand-driven controller: each step (start,
    stop, election, a state resent) happens when the test says, so a scenario is exact."""

    def __init__(self, tmp_path: Path, topic_id: uuid.UUID, config: ReplicationConfig) -> None:
        self.tmp_path = tmp_path
        self.topic_id = topic_id
        self.config = config
        self.controller = Controller()
        self.controller_epoch = 1
        self.nodes: dict[int, Node] = {}
        self.ports: dict[int, int] = {}

    async def start(self, broker_id: int) -> Node:
        node = Node(broker_id, self.tmp_path / f"broker-{broker_id}", self.config, {TOPIC: self.topic_id},
                    self.controller)
        # Broker 0's server answers AlterPartition for the whole cluster.
        self.ports[broker_id] = await node.start(lambda: (0, "127.0.0.1", self.ports[0]))
        self.nodes[broker_id] = node
        return node

    async def stop(self, broker_id: int) -> None:
        node = self.nodes.pop(broker_id)
        del self.ports[broker_id]
        await node.close()

    async def elect(self, replicas: list[int], **change: object) -> None:
        """Record a new state with the controller and send LeaderAndIsr to every live replica."""
        request = self.controller.leader_and_isr(self.controller_epoch, TOPIC, self.topic_id, 0, replicas,
                                                 self.ports, **change)  # type: ignore[arg-type]
        for broker_id in replicas:
            if broker_id in self.nodes:
                response = await self.nodes[broker_id].rm.become_leader_or_follower(request)
                assert list(response.errors.values()) == [0]

    async def resend(self, broker_id: int, replicas: list[int], live: dict[int, int] | None = None) -> None:
        """The current state to one broker (a restarted broker learns it so); ``live`` overrides
        the live brokers' ports the request names (a leader the controller still thinks alive)."""
        request = self.controller.request_for(self.controller_epoch, TOPIC, self.topic_id, 0, replicas,
                                              self.ports if live is None else live)
        await self.nodes[broker_id].rm.become_leader_or_follower(request)

    async def close(self) -> None:
        for broker_id in list(self.nodes):
            await self.stop(broker_id)


def run_rig(tmp_path: Path, config: ReplicationConfig, scenario: Callable[[ReplicationRig], Awaitable[None]],
            timeout: float = 60) -> None:
    """Run ``scenario`` on a fresh rig (a new topic id) and close every node after it, failed or not."""
    async def main() -> None:
        rig = ReplicationRig(tmp_path, uuid.uuid4(), config)
        try:
            await scenario(rig)
        finally:
            await rig.close()

    run(main(), timeout)
