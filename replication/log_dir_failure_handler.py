"""What a broker does when one of its log directories goes offline (Kafka's handleLogDirFailure).

The log manager's LogDirFailureChannel has already marked the directory's logs
offline on the thread that met the error (every call on them answers
KAFKA_STORAGE_ERROR from then on). This handler does the rest on the event
loop: the followers of those partitions stop fetching, the controller is told
(``on_offline``: in a cluster, a ``/log_dir_event_notification`` znode), and
when no directory is left the broker halts, as Kafka's does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from replication.hosted_partitions import HostedPartitions
from replication.replica_fetcher_manager import ReplicaFetcherManager
from storage.log_manager import LogManager

__all__ = ["LogDirFailureHandler"]

log = logging.getLogger(__name__)

#: Told of a directory that went offline, on the event loop (e.g. to tell the controller).
OfflineDirCallback = Callable[[Path], Awaitable[None]]


class LogDirFailureHandler:
    """Reacts, on the event loop, to each log directory the failure channel takes offline."""

    def __init__(self, broker_id: int, hosted: HostedPartitions, log_manager: LogManager,
                 fetcher_manager: Callable[[], ReplicaFetcherManager | None]) -> None:
        self.broker_id = broker_id
        self._hosted = hosted
        self._log_manager = log_manager
        self._fetcher_manager = fetcher_manager
        self._loop: asyncio.AbstractEventLoop | None = None
        self._callbacks: list[OfflineDirCallback] = []
        #: What stops the broker when no log directory is left (the broker sets it).
        self.halt: Callable[[], Awaitable[None]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Listen to the channel (once): its reports come from any thread, the work runs on ``loop``."""
        if self._loop is not None:
            return
        self._loop = loop
        self._log_manager.failure_channel.add_listener(
            lambda dir: loop.call_soon_threadsafe(self.handle_log_dir_failure, dir))

    def add_callback(self, callback: OfflineDirCallback) -> None:
        self._callbacks.append(callback)

    def partitions_in(self, dir: Path) -> list[tuple[str, int]]:
        return [tp for tp in list(self._hosted.by_tp) if self._log_manager.log_dir_of(*tp) == dir]

    def handle_log_dir_failure(self, dir: Path) -> None:
        offline = self.partitions_in(dir)
        fetchers = self._fetcher_manager()
        if fetchers is not None and offline:
            fetchers.remove_fetcher_for_partitions(offline)
        log.warning("[ReplicaManager broker=%d] Stopped serving replicas in dir %s: %s", self.broker_id, dir,
                    ", ".join(f"{t}-{p}" for t, p in sorted(offline)) or "none")
        if not self._log_manager.online_log_dirs:
            log.critical("[ReplicaManager broker=%d] Shutdown broker because all log dirs in %s have failed",
                         self.broker_id, ", ".join(str(d) for d in self._log_manager.log_dirs))
            if self.halt is not None:
                self._spawn(self.halt(), "halt")
            return
        for callback in self._callbacks:
            self._spawn(callback(dir), f"log dir {dir} offline")

    def _spawn(self, work: Awaitable[None], name: str) -> None:
        async def run() -> None:
            await work

        task = asyncio.get_running_loop().create_task(run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("[ReplicaManager broker=%d] %s failed: %s", self.broker_id, task.get_name(), task.exception())

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
