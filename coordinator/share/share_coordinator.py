"""The share coordinator: the durable state of share partitions in ``__share_group_state``.

Kafka's ShareCoordinatorService over its shards. The state of the share
partition (group, topic id, partition) lives in partition
``abs(javaHashCode("groupId:topicId:partition")) % share.coordinator.state.topic.num.partitions``
of ``__share_group_state``, and the leader of that partition serves it. This
broker keeps a :class:`ShareCoordinatorShard` per partition it leads, loaded
from the log when leadership arrives (start-up included) and dropped when it
leaves; meanwhile requests are answered COORDINATOR_LOAD_IN_PROGRESS, and on
a partition led elsewhere NOT_COORDINATOR.

A change is planned on the shard, appended through the :class:`CoordinatorLog`
(``acks=-1``: in the ISR before it completes), and replayed into the shard
only then; so every answered write is in the log and a reload gives the same
state. Changes of one partition run one at a time, each planned on the state
its predecessor left.

Records before a partition's redundant offset (each key's latest snapshot on;
everything replayed when no key is left) are obsolete: every
``prune_interval_ms`` they are deleted (DeleteRecords), so the topic, which
is never compacted and has no retention time, stays bounded. So that an idle
key does not hold that offset back, a key whose latest snapshot is
``cold_snapshot_interval_ms`` old is written again as a snapshot (Kafka's
cold partition snapshots).

The coordinator is itself a :class:`~coordinator.share.persister.Persister`
for the keys it coordinates: the broker's persister calls it directly for
those, and sends the persister APIs to the coordinator's broker for the rest.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from coordinator.common.coordinator_log import APPEND_ERRORS, CoordinatorLog, KeyValues
from coordinator.common.partitioner import partition_for
from coordinator.common.scheduler import Scheduler, Timer
from coordinator.share.persister import PersisterError, ShareGroupPartitionState
from coordinator.share.share_coordinator_records import SharePartitionKey
from coordinator.share.share_coordinator_shard import ShareCoordinatorShard, ShareError
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    """The share coordinator's configs (Kafka's ShareCoordinatorConfig defaults)."""

    #: share.coordinator.snapshot.update.records.per.snapshot
    snapshot_update_records: int = 500
    #: share.coordinator.state.topic.prune.interval.ms
    prune_interval_ms: int = 300_000
    #: share.coordinator.cold.partition.snapshot.interval.ms
    cold_snapshot_interval_ms: int = 300_000


#: Deletes the records of a partition of ``__share_group_state`` before an offset (DeleteRecords on
#: the leader); answers the error.
RecordDeleter = Callable[[int, int], Awaitable[ErrorCode]]


class ShareCoordinator:
    def __init__(self, broker_id: int, coordinator_log: CoordinatorLog, scheduler: Scheduler,
                 config: ShareCoordinatorConfig, delete_records: RecordDeleter | None = None) -> None:
        self.broker_id = broker_id
        self.coordinator_log = coordinator_log
        self.scheduler = scheduler
        self.config = config
        #: The loaded partitions led here.
        self.shards: dict[int, ShareCoordinatorShard] = {}
        #: Partition being loaded -> the token of its latest load (a resigned one's read is dropped).
        self.loading: dict[int, object] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._load_tasks: set[asyncio.Task[None]] = set()
        #: Prunes obsolete records (None: never); the offset each partition was pruned to.
        self.delete_records = delete_records
        self.pruned: dict[int, int] = {}
        self._prune_timer: Timer | None = None
        self._cold_timer: Timer | None = None
        #: The prunes and cold snapshots running.
        self._jobs: set[asyncio.Task[None]] = set()

    def partition_for(self, key: SharePartitionKey) -> int:
        return partition_for(key.coordinator_key(), self.coordinator_log.num_partitions)

    # -- leadership and loading ---------------------------------------------------------
    def startup(self, partitions: Iterable[int]) -> None:
        """Load the partitions led here now; prune every ``prune_interval_ms`` from then on."""
        for partition in partitions:
            self.on_election(partition)
        if self.delete_records is not None:
            self._prune_timer = self.scheduler.schedule(self.config.prune_interval_ms, self.prune)
        self._cold_timer = self.scheduler.schedule(self.config.cold_snapshot_interval_ms, self.snapshot_cold)

    def on_election(self, partition: int) -> None:
        """Leadership arrived: an empty partition is served at once, another once loaded."""
        if partition in self.shards or partition in self.loading:
            return
        if self.coordinator_log.log_end_offset(partition) == 0:
            self.shards[partition] = self._new_shard()
            return
        token = self.loading[partition] = object()
        task = asyncio.get_running_loop().create_task(self._load(partition, token), name="share-state-load")
        self._load_tasks.add(task)
        task.add_done_callback(self._load_done)

    def on_resignation(self, partition: int) -> None:
        self.shards.pop(partition, None)
        self.loading.pop(partition, None)
        self.pruned.pop(partition, None)

    # -- pruning ------------------------------------------------------------------------
    def prune(self) -> None:
        """Delete, in each loaded partition, the records before its redundant offset (Kafka's
        ShareCoordinatorService prune job); then wait for the next interval."""
        deleter = self.delete_records
        if deleter is None:
            return
        for partition, shard in self.shards.items():
            offset = shard.redundant_offset()
            if offset > self.pruned.get(partition, 0):
                self._start_job(self._prune(deleter, partition, offset), "share-state-prune")
        self._prune_timer = self.scheduler.schedule(self.config.prune_interval_ms, self.prune)

    def snapshot_cold(self) -> None:
        """Write the cold partition snapshots of every loaded partition; then wait for the next interval."""
        for partition in list(self.shards):
            self._start_job(self._snapshot_cold(partition), "share-state-cold-snapshots")
        self._cold_timer = self.scheduler.schedule(self.config.cold_snapshot_interval_ms, self.snapshot_cold)

    async def _snapshot_cold(self, partition: int) -> None:
        async with self._lock(partition):
            shard = self.shards.get(partition)
            if shard is None:
                return
            plan = shard.plan_cold_snapshots(self.scheduler.now_ms(), self.config.cold_snapshot_interval_ms)
            try:
                await self._append(partition, shard, plan)
            except PersisterError as exc:
                log.info("[ShareCoordinator %d]: cold snapshots of partition %d failed: %s", self.broker_id,
                         partition, exc.message)

    def _start_job(self, job: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(job, name=name)
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    async def _prune(self, deleter: RecordDeleter, partition: int, offset: int) -> None:
        error = await deleter(partition, offset)
        if error == ErrorCode.NO_ERROR:
            self.pruned[partition] = offset
            log.debug("[ShareCoordinator %d]: pruned partition %d before offset %d", self.broker_id, partition, offset)
        else:
            # Retried at the next interval (a new leader's high watermark may not have caught up yet).
            log.info("[ShareCoordinator %d]: pruning partition %d before offset %d failed: %s", self.broker_id,
                     partition, offset, error.name)

    def load_partition(self, partition: int) -> None:
        """Synchronous load (tests): replay the partition from its start."""
        self.shards[partition] = self._replayed(self.coordinator_log.read_records(partition))

    async def _load(self, partition: int, token: object) -> None:
        records = await asyncio.to_thread(lambda: list(self.coordinator_log.read_records(partition)))
        if self.loading.get(partition) is not token:
            log.info("[ShareCoordinator %d]: dropping a stale load of partition %d", self.broker_id, partition)
            return
        shard = self._replayed(records)
        del self.loading[partition]
        self.shards[partition] = shard
        log.info("[ShareCoordinator %d]: loaded %d share partition state(s) from partition %d",
                 self.broker_id, len(shard.states), partition)

    def _load_done(self, task: asyncio.Task[None]) -> None:
        self._load_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("[ShareCoordinator %d]: loading failed", self.broker_id, exc_info=task.exception())

    def _new_shard(self) -> ShareCoordinatorShard:
        return ShareCoordinatorShard(self.config.snapshot_update_records)

    def _replayed(self, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> ShareCoordinatorShard:
        shard = self._new_shard()
        for offset, key, value in records:
            if key is not None:
                shard.replay(key, value, offset)
        return shard

    async def shutdown(self) -> None:
        for timer in (self._prune_timer, self._cold_timer):
            if timer is not None:
                timer.cancel()
        tasks = [*self._load_tasks, *self._jobs]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.shards.clear()
        self.loading.clear()

    # -- the persister operations -------------------------------------------------------
    def _shard(self, key: SharePartitionKey) -> tuple[int, ShareCoordinatorShard]:
        partition = self.partition_for(key)
        if partition in self.loading:
            raise PersisterError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                 "The coordinator is loading and hence can't process requests.")
        shard = self.shards.get(partition)
        if shard is None or not self.coordinator_log.is_local_leader(partition):
            raise PersisterError(ErrorCode.NOT_COORDINATOR, "This is not the correct coordinator.")
        return partition, shard

    async def _change(self, key: SharePartitionKey, plan: KeyValues | ShareError) -> None:
        """Append the planned records, then replay them; a refusal raises."""
        if isinstance(plan, ShareError):
            raise PersisterError(plan.error_code, plan.message)
        partition, shard = self._shard(key)
        await self._append(partition, shard, plan)

    async def _append(self, partition: int, shard: ShareCoordinatorShard, plan: KeyValues) -> None:
        """Append the records to the partition, then replay them into its shard."""
        if not plan:
            return
        future: asyncio.Future[tuple[ErrorCode, int | None]] = asyncio.get_running_loop().create_future()

        def appended(error: ErrorCode, first: int | None) -> None:
            if not future.done():
                future.set_result((error, first))

        self.coordinator_log.append(partition, plan, self.scheduler.now_ms(), appended)
        error, first = await future
        if error != ErrorCode.NO_ERROR or first is None:
            code = APPEND_ERRORS.get(error, error) if error != ErrorCode.NO_ERROR else ErrorCode.UNKNOWN_SERVER_ERROR
            raise PersisterError(code, f"Writing the share partition state failed: {code.name}.")
        for i, (record_key, value) in enumerate(plan):
            shard.replay(record_key, value, first + i)

    def _lock(self, partition: int) -> asyncio.Lock:
        lock = self._locks.get(partition)
        if lock is None:
            lock = self._locks[partition] = asyncio.Lock()
        return lock

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> None:
        key = SharePartitionKey(group_id, topic_id, partition)
        async with self._lock(self._shard(key)[0]):
            _, shard = self._shard(key)
            await self._change(key, shard.plan_initialize(key, state_epoch, start_offset, self.scheduler.now_ms()))

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> ShareGroupPartitionState | None:
        key = SharePartitionKey(group_id, topic_id, partition)
        async with self._lock(self._shard(key)[0]):
            _, shard = self._shard(key)
            await self._change(key, shard.plan_leader_epoch(key, leader_epoch))
            stored = shard.get(key)
            return None if stored is None else stored.partition_state()

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state: ShareGroupPartitionState) -> None:
        key = SharePartitionKey(group_id, topic_id, partition)
        async with self._lock(self._shard(key)[0]):
            _, shard = self._shard(key)
            await self._change(key, shard.plan_write(key, state, self.scheduler.now_ms()))

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        key = SharePartitionKey(group_id, topic_id, partition)
        async with self._lock(self._shard(key)[0]):
            _, shard = self._shard(key)
            await self._change(key, shard.plan_delete(key))

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                 leader_epoch: int) -> tuple[int, int, int] | None:
        key = SharePartitionKey(group_id, topic_id, partition)
        _, shard = self._shard(key)
        refused = shard.check_leader_epoch(key, leader_epoch)
        if refused is not None:
            raise PersisterError(refused.error_code, refused.message)
        stored = shard.get(key)
        return None if stored is None else (stored.state_epoch, stored.start_offset, stored.leader_epoch)


def share_group_state_topic_configs(min_isr: int, segment_bytes: int) -> dict[str, str]:
    """The configs ``__share_group_state`` is created with (Kafka's shareGroupStateTopicConfigs): deleted,
    never compacted, and kept without a time limit, as the coordinator itself decides what is obsolete."""
    return {
        "cleanup.policy": "delete",
        "retention.ms": "-1",
        "compression.type": "producer",
        "min.insync.replicas": str(min_isr),
        "segment.bytes": str(segment_bytes),
    }
