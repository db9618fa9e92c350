"""Moving a replica between this broker's log dirs (KIP-113): AlterReplicaLogDirs and the copy.

Kafka's ReplicaManager.alterReplicaLogDirs with its ReplicaAlterLogDirsManager and
thread, as one collaborator of the replica manager. For each partition asked to move:

* the target must be one of ``log.dirs`` (LOG_DIR_NOT_FOUND) and online, with no log
  dir offline at all (KAFKA_STORAGE_ERROR: a future log is never created while one is,
  so no partition can end up with future logs in two dirs);
* the target is remembered for a replica not created yet (REPLICA_NOT_AVAILABLE; the
  log manager creates it there later);
* a replica already there answers NONE; a move to another target replaces the move
  under way;
* otherwise the future log ``<topic>-<partition>.<uniqueId>-future`` is created in the
  target and a copy task started (NONE).

The copy reads the current log from the future log's end (local reads, no network),
appends what it read to the future log as a follower would (offsets, epochs and
producer state kept) and counts the bytes against the alter-log-dirs quota
(``replica.alter.log.dirs.io.max.bytes.per.second``), waiting while it is exceeded.
Once the future log has reached the current log end, the swap runs on the append
thread under the current log's lock: what arrived since is copied (a few chunks at
most, else the lock is let go and the copy goes on), then the log manager swaps the
logs and the partition serves from the new one.

The log cleaner leaves a moving partition alone (Kafka's abortAndPauseCleaning): its
cleaning is paused when the copy task starts, a pass running on it stopped and waited
for, and resumed when the task ends (swapped, given up or cancelled); the swap moves
the partition's cleaner checkpoint to the new log dir with the log.

Threads: requests and tasks on the event loop; the copy on this manager's own thread
(a log's reads take no lock, its appends are this copy's alone); the future log's
creation, removal and the swap on the append thread, in order with appends. The
manager owns the tasks and its thread: ``close`` cancels the one and waits for the other.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Mapping

from protocol.errors import ErrorCode
from replication.append_thread import AppendThread
from replication.hosted_partitions import HostedPartitions
from replication.partition import Partition
from replication.replication_quota_manager import ReplicationQuotaManager
from storage.errors import KafkaStorageError, OffsetOutOfRangeError
from storage.log import FetchIsolation, Log
from storage.log_cleaner import LogCleaner
from storage.log_manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: What one copy step reads (Kafka's ReplicaAlterLogDirsThread fetches replica.fetch.max.bytes).
DEFAULT_COPY_CHUNK_BYTES = 1_048_576
#: How long the copy waits before asking the quota again while it is exceeded.
THROTTLE_BACKOFF_S = 0.05
#: Chunks the swap may still copy under the current log's lock before it lets go and retries.
MAX_CHUNKS_UNDER_LOCK = 4


class ReplicaAlterLogDirsManager:
    def __init__(self, broker_id: int, hosted: HostedPartitions, log_manager: LogManager,
                 append_thread: AppendThread, quota: ReplicationQuotaManager,
                 cleaner: LogCleaner | None = None, chunk_bytes: int = DEFAULT_COPY_CHUNK_BYTES) -> None:
        self.broker_id = broker_id
        self._hosted = hosted
        self._log_manager = log_manager
        self._append_thread = append_thread
        self._quota = quota
        self._cleaner = cleaner
        self.chunk_bytes = chunk_bytes
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    # -- AlterReplicaLogDirs --------------------------------------------------------------------
    async def alter_replica_log_dirs(self, partition_dirs: Mapping[TopicPartition, str]) -> dict[TopicPartition, int]:
        """An error code per partition (see the module's docstring); event loop."""
        return {tp: await self._alter(tp, path) for tp, path in partition_dirs.items()}

    async def _alter(self, tp: TopicPartition, path: str) -> int:
        log_manager = self._log_manager
        dir = log_manager.log_dir_by_path(path)
        if dir is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if log_manager.failure_channel.has_offline_log_dir(dir):
            return ErrorCode.KAFKA_STORAGE_ERROR
        partition = self._hosted.get(tp)
        if partition is not None and partition.log.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        future = log_manager.get_future_log(*tp)
        if partition is not None and future is not None and future.dir.parent != dir:
            await self._stop(tp)
            await self._append_thread.run(log_manager.remove_future_log, *tp)
        log_manager.maybe_update_preferred_log_dir(*tp, dir)
        if partition is None:
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if partition.log.dir.parent == dir:
            return ErrorCode.NO_ERROR
        if len(log_manager.online_log_dirs) < len(log_manager.log_dirs):
            return ErrorCode.KAFKA_STORAGE_ERROR
        try:
            await self._append_thread.run(log_manager.create_future_log, *tp, dir)
        except KafkaStorageError as exc:
            log.error("[ReplicaAlterLogDirs broker=%d] %s", self.broker_id, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR
        self._start(tp)
        return ErrorCode.NO_ERROR

    def resume(self) -> None:
        """Start copying for every future log loaded at start-up whose partition is hosted."""
        for tp in list(self._log_manager.future_logs):
            if tp in self._hosted and tp not in self._tasks:
                log.info("[ReplicaAlterLogDirs broker=%d] resuming the move of %s-%d", self.broker_id, *tp)
                self._start(tp)

    def is_moving(self, tp: TopicPartition) -> bool:
        return tp in self._tasks

    # -- the copy task ----------------------------------------------------------------------------
    def _start(self, tp: TopicPartition) -> None:
        if tp not in self._tasks:
            self._tasks[tp] = asyncio.create_task(self._move(tp), name=f"alter-log-dirs-{tp[0]}-{tp[1]}")

    async def _stop(self, tp: TopicPartition) -> None:
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await self._copy_thread_idle()

    async def _move(self, tp: TopicPartition) -> None:
        cleaner = self._cleaner
        if cleaner is not None:
            cleaner.pause_cleaning(tp)
        try:
            if cleaner is not None:
                await asyncio.to_thread(cleaner.await_pause, tp)
            await self._copy_until_swapped(tp)
        finally:
            if cleaner is not None:
                cleaner.resume_paused_cleaning(tp)

    async def _copy_until_swapped(self, tp: TopicPartition) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                partition, future = self._hosted.get(tp), self._log_manager.get_future_log(*tp)
                if partition is None or future is None or partition.log.offline or future.offline:
                    return  # gone, or its disk failed: the move ends (a restart resumes what is left)
                if self._quota.is_quota_exceeded():
                    await asyncio.sleep(THROTTLE_BACKOFF_S)
                    continue
                copied = await loop.run_in_executor(self._copy_thread(), self._copy_chunk, partition.log, future)
                if copied:
                    self._quota.record(copied)
                elif await self._append_thread.run(self._swap_if_caught_up, tp):
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._log_manager.get_future_log(*tp) is None:
                # The move was given up (the partition deleted) while a copy step was writing its future log.
                log.info("[ReplicaAlterLogDirs broker=%d] the move of %s-%d ended with its future log: %s",
                         self.broker_id, *tp, exc)
            else:
                log.exception("[ReplicaAlterLogDirs broker=%d] moving %s-%d failed", self.broker_id, *tp)
        finally:
            if self._tasks.get(tp) is asyncio.current_task():
                del self._tasks[tp]

    def _copy_chunk(self, current: Log, future: Log) -> int:
        """Copy the batches after the future log's end (up to a chunk); bytes copied, 0 when caught up.

        The copy thread, or the append thread under the current log's lock."""
        if future.log_end_offset < current.log_start_offset:
            # Retention (or DeleteRecords) moved past what was copied: start again from the log start.
            future.truncate_fully_and_start_at(current.log_start_offset)
        try:
            info = current.read(future.log_end_offset, self.chunk_bytes, isolation=FetchIsolation.LOG_END)
        except OffsetOutOfRangeError:
            future.truncate_fully_and_start_at(current.log_start_offset)
            return 1  # not caught up: copy again from the new start
        if info.records is None or info.records.size == 0:
            return 0
        data = info.records.read_bytes()
        future.append_as_follower(data)
        return len(data)

    def _swap_if_caught_up(self, tp: TopicPartition) -> bool:
        """Append thread: swap the future log in once it holds everything; True when the move is over."""
        partition, future = self._hosted.get(tp), self._log_manager.get_future_log(*tp)
        if partition is None or future is None:
            return True
        current = partition.log
        with current.lock:
            for _ in range(MAX_CHUNKS_UNDER_LOCK):
                if not self._copy_chunk(current, future):
                    self._replace(partition)
                    return True
        return False

    def _replace(self, partition: Partition) -> None:
        tp, source_dir = (partition.topic, partition.partition_index), partition.log.dir.parent
        partition.log = self._log_manager.replace_current_with_future_log(*tp)
        if self._cleaner is not None:
            self._cleaner.alter_checkpoint_dir(tp, source_dir, partition.log.dir.parent)

    # -- the copy thread and shutdown ------------------------------------------------------------------
    def _copy_thread(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pafka-alter-log-dirs")
        return self._executor

    async def _copy_thread_idle(self) -> None:
        """A copy step whose task was cancelled still runs to its end: wait for it."""
        if self._executor is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, _nothing)

    async def close(self) -> None:
        """Cancel every move (the future logs stay: a restart resumes them) and stop the copy thread."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._executor is not None:
            executor, self._executor = self._executor, None
            await asyncio.to_thread(executor.shutdown, True)


def _nothing() -> None:
    return None

