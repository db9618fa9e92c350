"""The controller's orders to the replica manager: LeaderAndIsr and StopReplica.

Kafka's ReplicaManager.becomeLeaderOrFollower (``make_leaders``,
``make_followers``, then the fetchers) and stopReplicas, in ZooKeeper mode.
Both are fenced by the controller epoch (an older one than the last seen is
STALE_CONTROLLER_EPOCH, for the whole request) and, per partition, by the leader
epoch: LeaderAndIsr applies a state only with a newer leader epoch than the
partition's (else STALE_CONTROLLER_EPOCH for that partition, as Kafka answers),
StopReplica only with a newer one or a sentinel (else FENCED_LEADER_EPOCH).

Becoming leader or follower runs in steps, because creating a log and
truncating one block and must run on the append thread, in order with the
appends:

1. logs of newly hosted partitions are created (append thread);
2. on the event loop, with no await, ``make_leaders`` then ``make_followers``:
   each partition's fetcher is stopped and its new state applied
   (``Partition.make_leader`` / ``make_follower``); the leadership listeners hear
   of elections and resignations; produces waiting on a partition that is now a
   follower are answered NOT_LEADER_OR_FOLLOWER. From here an append queued as
   leader finds the partition a follower and is refused;
3. new leaders record their epoch's start offset (their log end at the
   election) in the leader epoch cache, as Kafka's makeLeader does (append
   thread). Followers are not truncated here: each fetcher truncates its
   partition where the leader's epochs say the logs diverge (KIP-101, KIP-279,
   KIP-320; ``ReplicaFetcherThread``);
4. ``start_fetchers``: the followers' fetchers start from their log end offsets
   (event loop).

Requests are handled one at a time (``state_change_lock``). Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from protocol.errors import ErrorCode
from replication.append_thread import AppendThread
from replication.hosted_partitions import HostedPartitions
from replication.isr_manager import IsrManager
from replication.partition import NO_EPOCH, NO_LEADER, Partition
from replication.purgatories import Purgatories
from replication.replica_fetcher_manager import ReplicaFetcherManager
from replication.replication_config import ReplicationConfig
from replication.state_change_requests import (
    ZERO_UUID,
    BrokerEndpoint,
    LeaderAndIsrResult,
    LeaderAndIsrStates,
    PartitionState,
    StopReplicaPartition,
    StopReplicaResult,
    StopReplicaStates,
)
from storage.log import now_ms
from storage.log_manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: StopReplica's leader epoch sentinel that skips the epoch check (Kafka's LeaderAndIsr.EpochDuringDelete).
EPOCH_DURING_DELETE = -2
#: Told (topic, partition index, elected?) when this broker starts or stops leading a partition.
LeadershipChange = Callable[[str, int, bool], None]


class ReplicaStateChanges:
    """Owns the last controller epoch seen, the lock that serializes the controller's orders, and
    the follower fetchers (created on the first partition followed)."""

    def __init__(self, broker_id: int, hosted: HostedPartitions, log_manager: LogManager,
                 append_thread: AppendThread, purgatories: Purgatories, isr: IsrManager,
                 on_leadership_change: LeadershipChange,
                 new_fetcher_manager: Callable[[], ReplicaFetcherManager], config: ReplicationConfig) -> None:
        self.broker_id = broker_id
        self._hosted = hosted
        self._log_manager = log_manager
        self._append_thread = append_thread
        self._purgatories = purgatories
        self._isr = isr
        self._on_leadership_change = on_leadership_change
        self._new_fetcher_manager = new_fetcher_manager
        self.config = config
        self.controller_epoch = 0
        self.fetcher_manager: ReplicaFetcherManager | None = None
        #: Serializes LeaderAndIsr and StopReplica: each changes many partitions over several awaits.
        self.state_change_lock = asyncio.Lock()

    def start_replication(self, fetcher_manager: ReplicaFetcherManager | None = None) -> None:
        """Start the ISR expiration task and the fetcher manager followers need (once each)."""
        if self.fetcher_manager is None:
            self.fetcher_manager = fetcher_manager or self._new_fetcher_manager()
        self._isr.start_expiration(self.config.replica_lag_time_max_ms)

    async def shutdown_replication(self) -> None:
        """Stop the fetchers and the ISR expiration task and wait until they are gone."""
        await self._isr.stop_expiration()
        if self.fetcher_manager is not None:
            await self.fetcher_manager.shutdown()

    def _accept_controller_epoch(self, api: str, controller_id: int, controller_epoch: int) -> bool:
        """Kafka's fencing of a controller's request: one from an older controller epoch is refused;
        otherwise its epoch becomes the latest known."""
        if controller_epoch < self.controller_epoch:
            log.warning("[ReplicaManager broker=%d] Ignoring %s from controller %d with epoch %d: the "
                        "latest known controller epoch is %d", self.broker_id, api, controller_id,
                        controller_epoch, self.controller_epoch)
            return False
        self.controller_epoch = controller_epoch
        return True

    # -- LeaderAndIsr ------------------------------------------------------------------------
    async def become_leader_or_follower(self, request: LeaderAndIsrStates) -> LeaderAndIsrResult:
        async with self.state_change_lock:
            return await self._become_leader_or_follower(request)

    async def _become_leader_or_follower(self, request: LeaderAndIsrStates) -> LeaderAndIsrResult:
        if not self._accept_controller_epoch("LeaderAndIsr", request.controller_id, request.controller_epoch):
            stale = ErrorCode.STALE_CONTROLLER_EPOCH
            return LeaderAndIsrResult(stale, {s.tp: stale for s in request.partition_states})
        errors, accepted = self._accept_states(request.partition_states)
        if not accepted:
            return LeaderAndIsrResult(ErrorCode.NO_ERROR, errors)
        await self._host_new_partitions(accepted, errors)
        leaders = [s for s in accepted.values() if s.state.leader == self.broker_id]
        followers = [s for s in accepted.values() if s.state.leader != self.broker_id]
        if followers and self.fetcher_manager is None:
            self.start_replication()
        now = now_ms()
        new_leaders = self.make_leaders(leaders, now)
        new_followers = self.make_followers(followers, request.live_leaders)
        if not await self._record_epochs_and_truncate(new_leaders, new_followers):
            for partition, _ in new_followers:
                errors[(partition.topic, partition.partition_index)] = ErrorCode.KAFKA_STORAGE_ERROR
            new_followers = []
        self.start_fetchers(new_followers)
        return LeaderAndIsrResult(ErrorCode.NO_ERROR, errors)

    def _accept_states(self, states: list[PartitionState]
                       ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, PartitionState]]:
        """Each partition's error, and the states to apply: a newer leader epoch than the
        partition's, the same topic id, and this broker among the replicas."""
        errors: dict[TopicPartition, int] = {}
        accepted: dict[TopicPartition, PartitionState] = {}
        for item in states:
            tp, state = item.tp, item.state
            partition = self._hosted.get(tp)
            current_epoch = partition.leader_epoch if partition is not None else NO_EPOCH
            if partition is not None and partition.log.offline:
                # Its log directory failed: the controller learns that this replica is offline.
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            elif partition is not None and item.topic_id != ZERO_UUID and partition.topic_id != ZERO_UUID \
                    and partition.topic_id != item.topic_id:
                errors[tp] = ErrorCode.INCONSISTENT_TOPIC_ID
            elif state.leader_epoch <= current_epoch:
                log.info("[ReplicaManager broker=%d] Ignoring LeaderAndIsr for %s-%d: leader epoch %d is not "
                         "newer than %d", self.broker_id, *tp, state.leader_epoch, current_epoch)
                errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
            elif self.broker_id not in state.replicas:
                log.warning("[ReplicaManager broker=%d] Ignoring LeaderAndIsr for %s-%d: not in its replicas %s",
                            self.broker_id, *tp, state.replicas)
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                accepted[tp] = item
                errors[tp] = ErrorCode.NO_ERROR
        return errors, accepted

    async def _host_new_partitions(self, accepted: dict[TopicPartition, PartitionState],
                                   errors: dict[TopicPartition, int]) -> None:
        """Step 1: the logs of partitions not hosted yet (append thread: creates directories and
        files); on failure they answer KAFKA_STORAGE_ERROR and are not applied."""
        missing = [tp for tp in accepted if tp not in self._hosted]
        if not missing:
            return
        log_manager = self._log_manager
        try:
            logs = await self._append_thread.run(lambda: [log_manager.get_or_create_log(t, p) for t, p in missing])
        except Exception as exc:
            log.error("[ReplicaManager broker=%d] cannot create logs for LeaderAndIsr: %s", self.broker_id, exc)
            for tp in missing:
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                del accepted[tp]
            return
        for tp, log_ in zip(missing, logs, strict=True):
            item = accepted[tp]
            partition = Partition(item.topic, tp[1], item.topic_id, log_, self.broker_id, list(item.state.replicas),
                                  NO_EPOCH)
            partition.leader_id = NO_LEADER
            partition.leader_epoch_start_offset = None
            partition.replica_isr_eligible = self._isr.replica_isr_eligible
            self._hosted.add(partition)

    def _prepare(self, item: PartitionState) -> Partition:
        """The hosted partition of an accepted state, its fetcher stopped, its topic id learned."""
        partition = self._hosted.by_tp[item.tp]
        partition.replica_lag_time_max_ms = self.config.replica_lag_time_max_ms
        if partition.topic_id == ZERO_UUID and item.topic_id != ZERO_UUID:
            partition.topic_id = item.topic_id
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove_fetcher_for_partitions([item.tp])
        return partition

    def make_leaders(self, states: list[PartitionState], now: int) -> list[tuple[Partition, int, int]]:
        """Step 2, leaders (Kafka's makeLeaders; event loop, no await): each partition leads at its
        new epoch; returns (partition, leader epoch, epoch start offset) for step 3."""
        new_leaders: list[tuple[Partition, int, int]] = []
        for item in states:
            partition, state, tp = self._prepare(item), item.state, item.tp
            was_leader = partition.is_leader
            partition.make_leader(state, now)
            if partition.leader_epoch_start_offset is not None:
                new_leaders.append((partition, state.leader_epoch, partition.leader_epoch_start_offset))
            log.info("[ReplicaManager broker=%d] %s-%d: leader at epoch %d, ISR %s, partition epoch %d",
                     self.broker_id, *tp, state.leader_epoch, list(state.isr), state.partition_epoch)
            if not was_leader:
                self._on_leadership_change(tp[0], tp[1], True)
            self._purgatories.high_watermark_advanced(tp)
            self._purgatories.fetch.notify(tp)  # a new epoch: every parked fetch reads again
        return new_leaders

    def make_followers(self, states: list[PartitionState], live_leaders: dict[int, BrokerEndpoint]
                       ) -> list[tuple[Partition, BrokerEndpoint]]:
        """Step 2, followers (Kafka's makeFollowers; event loop, no await): each partition follows
        its new leader; returns those whose leader is live, with its endpoint, for the fetchers."""
        new_followers: list[tuple[Partition, BrokerEndpoint]] = []
        for item in states:
            partition, state, tp = self._prepare(item), item.state, item.tp
            was_leader = partition.is_leader
            partition.make_follower(state)
            log.info("[ReplicaManager broker=%d] %s-%d: follower of %d at epoch %d", self.broker_id, *tp,
                     state.leader, state.leader_epoch)
            if was_leader:
                self._on_leadership_change(tp[0], tp[1], False)
            self._purgatories.leadership_moved(tp)
            leader = live_leaders.get(state.leader)
            if leader is None or leader.broker_id == NO_LEADER:
                # No live leader (the controller took a dead leader out of the ISR before electing):
                # as Kafka's makeFollowers, neither truncate nor fetch. Truncating to the high
                # watermark here would drop acknowledged records that this replica, perhaps the
                # next leader, is the one to keep.
                log.warning("[ReplicaManager broker=%d] %s-%d: leader %d is not among the live leaders; not "
                            "truncating or fetching", self.broker_id, *tp, state.leader)
                continue
            new_followers.append((partition, leader))
        return new_followers

    async def _record_epochs_and_truncate(self, new_leaders: list[tuple[Partition, int, int]],
                                          new_followers: list[tuple[Partition, BrokerEndpoint]]) -> bool:
        """Step 3 (append thread, after any append queued before step 2): where the leaders' epochs
        start. Followers are not truncated here: their fetchers truncate by leader epoch, at the
        point the leader names (KIP-101, KIP-320), which a high watermark cannot know; truncating
        to it loses acknowledged records or forks the log (tests/replication/test_leader_epochs.py).
        False when the append thread failed."""
        to_truncate = [p for p, _ in new_followers] if self.config.truncate_to_high_watermark_only else []
        if not to_truncate and not new_leaders:
            return True
        try:
            await self._append_thread.run(_truncate_and_assign_epochs, to_truncate, new_leaders)
        except Exception as exc:
            log.error("[ReplicaManager broker=%d] follower truncation failed: %s", self.broker_id, exc)
            return False
        return True

    def start_fetchers(self, new_followers: list[tuple[Partition, BrokerEndpoint]]) -> None:
        """Step 4: fetch from the leaders (a partition may have moved on since step 2: checked);
        fetchers left with nothing to fetch stop."""
        fetchers = self.fetcher_manager
        if fetchers is None:
            return
        to_fetch: dict[TopicPartition, BrokerEndpoint] = {}
        for partition, leader in new_followers:
            tp = (partition.topic, partition.partition_index)
            if self._hosted.get(tp) is partition and not partition.is_leader:
                to_fetch[tp] = leader
        if to_fetch:
            fetchers.add_fetcher_for_partitions(to_fetch)
        fetchers.shutdown_idle_fetcher_threads()

    # -- StopReplica -------------------------------------------------------------------------
    async def stop_replicas(self, request: StopReplicaStates) -> StopReplicaResult:
        async with self.state_change_lock:
            return await self._stop_replicas(request)

    async def _stop_replicas(self, request: StopReplicaStates) -> StopReplicaResult:
        if not self._accept_controller_epoch("StopReplica", request.controller_id, request.controller_epoch):
            stale = ErrorCode.STALE_CONTROLLER_EPOCH
            return StopReplicaResult(stale, {p.tp: stale for p in request.partitions})
        errors, stopped = self._accept_stops(request.partitions)
        fetchers = self.fetcher_manager
        if fetchers is not None and stopped:
            fetchers.remove_fetcher_for_partitions(list(stopped))
            fetchers.shutdown_idle_fetcher_threads()
        to_delete = self._stop_partitions(stopped)
        if to_delete:
            try:
                await self._append_thread.run(self._delete_logs, to_delete)
            except Exception as exc:
                log.error("[ReplicaManager broker=%d] deleting stopped replicas failed: %s", self.broker_id, exc)
                for tp in to_delete:
                    errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
        return StopReplicaResult(ErrorCode.NO_ERROR, errors)

    def _accept_stops(self, wanted: list[StopReplicaPartition]
                      ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, bool]]:
        """Each partition's error, and the partitions to stop (with whether to delete them)."""
        errors: dict[TopicPartition, int] = {}
        stopped: dict[TopicPartition, bool] = {}
        for item in wanted:
            tp, leader_epoch, delete = item.tp, item.leader_epoch, item.delete
            partition = self._hosted.get(tp)
            current = partition.leader_epoch if partition is not None else NO_EPOCH
            # The epoch the controller knew when it decided (Kafka's check is >=: a replica is stopped at
            # its current epoch, as when a reassignment removes it or a follower shuts down).
            if partition is None or leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or leader_epoch >= current:
                stopped[tp] = delete
                errors[tp] = ErrorCode.NO_ERROR
            else:
                log.info("[ReplicaManager broker=%d] Ignoring StopReplica (delete=%s) for %s-%d: leader epoch %d "
                         "is older than %d", self.broker_id, delete, *tp, leader_epoch, current)
                errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
        return errors, stopped

    def _stop_partitions(self, stopped: dict[TopicPartition, bool]) -> list[TopicPartition]:
        """Stop hosting the partitions to delete (their listeners told); wake what waits on every
        stopped partition. The partitions whose logs to delete."""
        to_delete: list[TopicPartition] = []
        for tp, delete in stopped.items():
            if delete:
                partition = self._hosted.remove(*tp)
                if partition is not None:
                    was_leader = partition.is_leader
                    partition.stop_replica()
                    if was_leader:
                        self._on_leadership_change(tp[0], tp[1], False)
                to_delete.append(tp)
            # A leader's waiting produces and fetches end now rather than time out.
            self._purgatories.leadership_moved(tp)
        return to_delete

    def _delete_logs(self, tps: list[TopicPartition]) -> None:
        """Append thread."""
        for topic, index in tps:
            if (topic, index) not in self._hosted:  # not hosted again meanwhile
                self._log_manager.delete_log(topic, index)


def _truncate_and_assign_epochs(partitions: list[Partition], leaders: list[tuple[Partition, int, int]]) -> None:
    for partition, epoch, start_offset in leaders:
        log_ = partition.log
        with log_.lock:  # appends assign epochs too
            log_.leader_epoch_cache.assign(epoch, start_offset)
    for partition in partitions:
        if partition.is_leader:
            continue
        offset = partition.log.high_watermark  # only with truncate_to_high_watermark_only
        if partition.log.truncate_to(offset):
            log.info("Truncated %s to offset %d on becoming a follower", partition, offset)
