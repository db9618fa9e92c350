"""Kafka's ZkNodeChangeNotificationListener: act on sequential notification znodes, once each.

Config changes reach every broker this way: the writer of /config/topics/T adds
/config/changes/config_change_<seq> naming the entity (``{"version":2,"entity_path":"topics/T"}``);
every broker watches /config/changes, hands each notification newer than the last one it
processed to its handler, and deletes notifications older than ``change_expiration_ms``
(15 minutes in Kafka) so the directory does not grow without bound.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import KafkaZkClient
from controller.zk.zk_watches import ZkWatch

log = logging.getLogger(__name__)

#: Kafka's ZkNodeChangeNotificationListener default.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def sequence_number(name: str, prefix: str) -> int:
    return int(name[len(prefix):])


class ZkNodeChangeNotificationListener:
    """Hands ``handler(data)`` each notification under ``root`` (children named ``prefix<seq>``), in order."""

    def __init__(self, zk: KafkaZkClient, root: str, prefix: str, handler: Callable[[bytes], Awaitable[None] | None],
                 change_expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        self.zk = zk
        self.root = root
        self.prefix = prefix
        self.handler = handler
        self.change_expiration_ms = change_expiration_ms
        #: The sequence number of the last notification processed (-1: none yet).
        self.last_executed_change = -1
        self._watch: ZkWatch | None = None
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Process the notifications already there, then every new one (the caller owns this task: ``close``)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"zk-notifications {self.root}")
        self._watch = await self.zk.watch_children(self.root, lambda _children: self._wakeup.set())

    async def close(self) -> None:
        if self._watch is not None:
            self.zk.unwatch(self._watch)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self.process_notifications()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("processing the notifications under %s failed; retrying on the next change", self.root)

    async def process_notifications(self) -> None:
        children = [c for c in await self.zk.get_children(self.root) if c.startswith(self.prefix)]
        children.sort(key=lambda c: sequence_number(c, self.prefix))
        new = [c for c in children if sequence_number(c, self.prefix) > self.last_executed_change]
        found = await self.zk.get_data_and_ctime([f"{self.root}/{c}" for c in children])
        for child in new:
            entry = found.get(f"{self.root}/{child}")
            if entry is not None:
                outcome = self.handler(entry[0])
                if outcome is not None:
                    await outcome
            self.last_executed_change = sequence_number(child, self.prefix)
        now_ms = time.time_ns() // 1_000_000
        obsolete = [path for path, (_, ctime) in found.items() if ctime + self.change_expiration_ms < now_ms
                    and sequence_number(path.rsplit("/", 1)[1], self.prefix) <= self.last_executed_change]
        if obsolete:
            await self.zk.delete_paths(obsolete)


def config_change_listener(zk: KafkaZkClient, on_entity_change: Callable[[str, str], Awaitable[None] | None],
                           change_expiration_ms: int = CHANGE_EXPIRATION_MS) -> ZkNodeChangeNotificationListener:
    """The /config/changes listener: ``on_entity_change(entity_type, entity_name)``, e.g. ("topics", "T")."""
    def handle(data: bytes) -> Awaitable[None] | None:
        entity_type, _, entity_name = zd.decode_config_change_notification(data).partition("/")
        return on_entity_change(entity_type, entity_name)
    return ZkNodeChangeNotificationListener(zk, zd.CONFIG_CHANGES_PATH, zd.CONFIG_CHANGE_PREFIX, handle, change_expiration_ms)
