"""The replica manager's cluster-mode part: fetchers, ISR changes, follower fetches.

A mixin of :class:`~replication.replica_manager.ReplicaManager` (which it is
never used without): the controller's orders arrive here
(``replica_state_changes`` does the work), follower fetches update the leader's
view of its followers, and proposed ISR changes go to the controller through
the AlterPartitionManager. A broker without ZooKeeper never starts any of it:
no fetcher, no ISR expiration task, no AlterPartition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from replication import replica_state_changes
from replication.alter_partition_manager import AlterPartitionError, AlterPartitionManager
from replication.append_thread import AppendThread
from replication.delayed_fetch import FetchPurgatory
from replication.delayed_produce import ProducePurgatory
from replication.fetch_params import FetchParams, FetchPartition
from replication.partition import LogReadResult, Partition
from replication.partition_state import LeaderAndIsr
from replication.replica_fetcher_manager import ReplicaFetcherManager
from replication.replica_host import FetcherControl, LeadershipCallback
from replication.replication_config import ReplicationConfig
from replication.replication_quota_manager import ReplicationQuotas
from storage.log import now_ms
from storage.log_manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class ClusterReplication:
    # Set by ReplicaManager.__init__.
    broker_id: int
    log_manager: LogManager
    append_thread: AppendThread
    replication_config: ReplicationConfig
    quotas: ReplicationQuotas
    partitions: dict[TopicPartition, Partition]
    _by_topic: dict[str, dict[int, Partition]]
    fetch_purgatory: FetchPurgatory
    produce_purgatory: ProducePurgatory
    _leadership_listeners: dict[str, tuple[LeadershipCallback, LeadershipCallback]]
    controller_epoch: int
    replica_fetcher_manager: ReplicaFetcherManager | None
    alter_partition_manager: AlterPartitionManager | None
    _isr_expiration: asyncio.Task[None] | None
    state_change_lock: asyncio.Lock
    _isr_eligibility: Callable[[int], bool] | None

    def on_high_watermark_advanced(self, tp: TopicPartition) -> None:
        raise NotImplementedError  # ReplicaManager's

    @property
    def fetcher_control(self) -> FetcherControl | None:
        return self.replica_fetcher_manager

    def set_alter_partition_manager(self, manager: AlterPartitionManager) -> None:
        """ISR changes go to the controller through ``manager`` (cluster mode)."""
        self.alter_partition_manager = manager

    def replica_isr_eligible(self, replica_id: int) -> bool:
        """Whether a follower may join an ISR (and, caught up outside it, hold a high watermark
        back): Kafka's isReplicaIsrEligible, in ZooKeeper mode its broker being alive."""
        check = self._isr_eligibility
        return check is None or check(replica_id)

    def set_isr_eligibility(self, is_alive: Callable[[int], bool]) -> None:
        """Cluster mode: ``is_alive`` (the metadata cache's) decides ISR eligibility."""
        self._isr_eligibility = is_alive

    def start_replication(self, fetcher_manager: ReplicaFetcherManager | None = None) -> None:
        """Cluster mode: start the ISR expiration task (Kafka's isr-expiration, every half
        ``replica.lag.time.max.ms``) and the fetcher manager followers need. Event loop."""
        if self.replica_fetcher_manager is None:
            self.replica_fetcher_manager = fetcher_manager or ReplicaFetcherManager(self)
        if self._isr_expiration is None:
            self._isr_expiration = asyncio.get_running_loop().create_task(
                replica_state_changes.isr_expiration_loop(self), name=f"isr-expiration-{self.broker_id}")

    async def shutdown_replication(self) -> None:
        """Stop the fetchers and the ISR expiration task and wait until they are gone."""
        task, self._isr_expiration = self._isr_expiration, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.replica_fetcher_manager is not None:
            await self.replica_fetcher_manager.shutdown()

    def become_leader_or_follower(self, request: LeaderAndIsrRequest,
                                  version: int | None = None) -> Awaitable[LeaderAndIsrResponse]:
        """LeaderAndIsr from the controller (see ``replica_state_changes.become_leader_or_follower``).
        ``version``: the request's (its answer lists partitions flat below v5, by topic id from v5);
        without it, a request naming topic ids is answered as v5+."""
        return replica_state_changes.become_leader_or_follower(self, request, version)

    def stop_replicas(self, request: StopReplicaRequest) -> Awaitable[StopReplicaResponse]:
        """StopReplica from the controller (see ``replica_state_changes.stop_replicas``)."""
        return replica_state_changes.stop_replicas(self, request)

    def add_partition(self, partition: Partition) -> None:
        """Host ``partition`` (its log exists); index it by topic."""
        topic, partition_index = partition.topic, partition.partition_index
        self.partitions[(topic, partition_index)] = partition
        by_index = self._by_topic.setdefault(topic, {})
        out_of_order = bool(by_index) and partition_index < next(reversed(by_index))
        by_index[partition_index] = partition
        if out_of_order:
            self._by_topic[topic] = dict(sorted(by_index.items()))

    def remove_partition(self, topic: str, partition_index: int) -> Partition | None:
        """Stop hosting a partition (its log stays unless the caller deletes it)."""
        partition = self.partitions.pop((topic, partition_index), None)
        by_index = self._by_topic.get(topic)
        if by_index is not None:
            by_index.pop(partition_index, None)
            if not by_index:
                del self._by_topic[topic]
        return partition

    def fire_leadership_change(self, topic: str, partition_index: int, elected: bool) -> None:
        listener = self._leadership_listeners.get(topic)
        if listener is None:
            return
        try:
            listener[0 if elected else 1](partition_index)
        except Exception:
            log.exception("[ReplicaManager broker=%d] leadership listener of %s failed", self.broker_id, topic)

    def submit_isr_change(self, partition: Partition, proposal: LeaderAndIsr | None) -> None:
        """Send a proposed ISR change to the controller; apply its answer when it comes."""
        if proposal is None:
            return
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
        if self.partitions.get(tp) is partition:
            if moved:
                self.on_high_watermark_advanced(tp)
            else:
                self.produce_purgatory.check_and_complete(tp)  # the ISR size may now fail waiting produces

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
            partition = self.partitions.get(tp)
            if partition is None:
                continue
            follower_start = getattr(wanted, "log_start_offset", -1)
            if partition.update_follower_fetch_state(replica_id, wanted.fetch_offset, follower_start,
                                                     result.log_end_offset, now, params.replica_epoch):
                self.on_high_watermark_advanced(tp)
            if replica_id not in partition.isr:
                self.submit_isr_change(partition, partition.maybe_expand_isr(replica_id))

