"""The leader's side of its followers: their fetch positions, ISR expansion and shrinking.

Kafka keeps this in ReplicaManager (updateFollowerFetchState, the isr-expiration
task) and Partition; here it is one collaborator of the
:class:`~replication.replica_manager.ReplicaManager`, in cluster mode only.
Proposed ISR changes go to the controller through the AlterPartitionManager and
its answers come back to the partition. It owns: the AlterPartitionManager
reference, the ISR eligibility check (which brokers are alive) and the ISR
expiration task. Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from protocol.errors import ErrorCode
from replication.alter_partition_manager import AlterPartitionError, AlterPartitionManager
from replication.fetch_params import FetchParams, FetchPartition
from replication.hosted_partitions import HostedPartitions
from replication.partition import LogReadResult, Partition
from replication.partition_state import LeaderAndIsr
from replication.purgatories import Purgatories
from storage.log import now_ms

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class IsrManager:
    def __init__(self, broker_id: int, hosted: HostedPartitions, purgatories: Purgatories) -> None:
        self.broker_id = broker_id
        self._hosted = hosted
        self._purgatories = purgatories
        self.alter_partition_manager: AlterPartitionManager | None = None
        #: Which brokers are alive (the metadata cache's view); None: all are.
        self._isr_eligibility: Callable[[int], bool] | None = None
        self._isr_expiration: asyncio.Task[None] | None = None
        #: ISR changes proposed to the controller (the broker's metrics read them).
        self.isr_shrinks = 0
        self.isr_expands = 0

    def replica_isr_eligible(self, replica_id: int) -> bool:
        """Whether a follower may join an ISR (and, caught up outside it, hold a high watermark
        back): Kafka's isReplicaIsrEligible, in ZooKeeper mode its broker being alive."""
        check = self._isr_eligibility
        return check is None or check(replica_id)

    def set_isr_eligibility(self, is_alive: Callable[[int], bool]) -> None:
        self._isr_eligibility = is_alive

    # -- the isr-expiration task ------------------------------------------------------------
    def start_expiration(self, replica_lag_time_max_ms: int) -> None:
        """Kafka's isr-expiration, every half ``replica.lag.time.max.ms`` (once)."""
        if self._isr_expiration is None:
            self._isr_expiration = asyncio.get_running_loop().create_task(
                self._expiration_loop(replica_lag_time_max_ms / 2 / 1000), name=f"isr-expiration-{self.broker_id}")

    def cancel_expiration(self) -> None:
        if self._isr_expiration is not None:
            self._isr_expiration.cancel()

    async def stop_expiration(self) -> None:
        task, self._isr_expiration = self._isr_expiration, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _expiration_loop(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.maybe_shrink_isrs()
            except Exception:
                log.exception("[ReplicaManager broker=%d] ISR expiration failed", self.broker_id)

    def maybe_shrink_isrs(self, now: int | None = None) -> None:
        """One pass of isr-expiration: every led partition drops followers that fell behind
        (proposed to the controller); a high watermark held only by them moves on."""
        now = now_ms() if now is None else now
        for tp, partition in list(self._hosted.by_tp.items()):
            if not partition.is_leader or len(partition.replicas) <= 1:
                continue
            self.submit_isr_change(partition, partition.maybe_shrink_isr(now))
            if partition.maybe_increment_high_watermark(now):
                self._purgatories.high_watermark_advanced(tp)

    # -- follower fetches ------------------------------------------------------------------
    def update_follower_fetch_state(self, params: FetchParams, partitions: Sequence[FetchPartition],
                                    results: list[LogReadResult]) -> None:
        """A follower's fetch tells the leader its log end offset: the high watermark may move
        (acks=all produces complete, consumers' long polls wake) and the follower may rejoin
        the ISR (Kafka's updateFollowerFetchState)."""
        now = now_ms()
        replica_id = params.replica_id
        for wanted, result in zip(partitions, results, strict=True):
            if result.info is None or result.diverging_epoch is not None:
                continue  # a diverged follower's fetch offset is not in this log: it truncates first
            tp = (wanted.topic, wanted.partition)
            partition = self._hosted.get(tp)
            if partition is None:
                continue
            follower_start = getattr(wanted, "log_start_offset", -1)
            if partition.update_follower_fetch_state(replica_id, wanted.fetch_offset, follower_start,
                                                     result.log_end_offset, now, params.replica_epoch):
                self._purgatories.high_watermark_advanced(tp)
            if replica_id not in partition.isr:
                self.submit_isr_change(partition, partition.maybe_expand_isr(replica_id))

    # -- AlterPartition ----------------------------------------------------------------------
    def submit_isr_change(self, partition: Partition, proposal: LeaderAndIsr | None) -> None:
        """Send a proposed ISR change to the controller; apply its answer when it comes."""
        if proposal is None:
            return
        # Kafka's IsrShrinksPerSec / IsrExpandsPerSec, counted as the change is proposed.
        if len(proposal.isr) < len(partition.isr):
            self.isr_shrinks += 1
        else:
            self.isr_expands += 1
        manager = self.alter_partition_manager
        if manager is None:
            log.warning("[ReplicaManager broker=%d] no AlterPartition manager: ISR change of %s to %s not sent",
                        self.broker_id, partition, list(proposal.isr))
            partition.pending_isr = None
            return
        future = manager.submit(partition.topic, partition.topic_id, partition.partition_index, proposal)
        future.add_done_callback(lambda done: self._isr_change_answered(partition, proposal, done))

    def _isr_change_answered(self, partition: Partition, proposal: LeaderAndIsr,
                             done: asyncio.Future[LeaderAndIsr]) -> None:
        if done.cancelled():
            return
        exc = done.exception()
        if exc is None:
            moved = partition.handle_alter_partition_result(proposal, done.result())
        else:
            error = exc.error_code if isinstance(exc, AlterPartitionError) else ErrorCode.UNKNOWN_SERVER_ERROR
            moved = partition.handle_alter_partition_result(proposal, None, error)
        tp = (partition.topic, partition.partition_index)
        if self._hosted.get(tp) is partition:
            if moved:
                self._purgatories.high_watermark_advanced(tp)
            else:
                self._purgatories.produce.check_and_complete(tp)  # the ISR size may now fail waiting produces
