"""The controller's orders to the replica manager: LeaderAndIsr and StopReplica.

Kafka's ReplicaManager.becomeLeaderOrFollower and stopReplicas, in ZooKeeper
mode. Both are fenced by the controller epoch (an older one than the last seen
is STALE_CONTROLLER_EPOCH, for the whole request) and, per partition, by the
leader epoch: LeaderAndIsr applies a state only with a newer leader epoch than
the partition's (else STALE_CONTROLLER_EPOCH for that partition, as Kafka
answers), StopReplica only with a newer one or a sentinel (else
FENCED_LEADER_EPOCH).

Becoming leader or follower runs in steps, because creating a log and
truncating one block and must run on the append thread, in order with the
appends:

1. logs of newly hosted partitions are created (append thread);
2. on the event loop, with no await, every partition's fetcher is stopped and
   its new state applied: ``Partition.make_leader`` / ``make_follower``; the
   leadership listeners hear of elections and resignations; produces waiting
   on a partition that is now a follower are answered NOT_LEADER_OR_FOLLOWER.
   From here an append queued as leader finds the partition a follower and is
   refused;
3. new leaders record their epoch's start offset (their log end at the
   election) in the leader epoch cache, as Kafka's makeLeader does (append
   thread). Followers are not truncated here: each fetcher truncates its
   partition where the leader's epochs say the logs diverge (KIP-101, KIP-279,
   KIP-320; ``ReplicaFetcherThread``);
4. the followers' fetchers start from their log end offsets (event loop).

Requests are handled one at a time (``ReplicaManager.state_change_lock``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
)
from protocol.messages.stop_replica import StopReplicaPartitionError, StopReplicaRequest, StopReplicaResponse
from replication.partition import NO_EPOCH, NO_LEADER, Partition
from replication.replica_host import BrokerEndpoint, ReplicaHost
from storage.log import now_ms

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ZERO_UUID = uuid.UUID(int=0)
#: StopReplica's leader epoch sentinels that skip the epoch check (Kafka's LeaderAndIsr).
EPOCH_DURING_DELETE = -2


@dataclass(slots=True)
class _Accepted:
    topic: str
    topic_id: uuid.UUID
    state: LeaderAndIsrPartitionState


def _partition_states(request: LeaderAndIsrRequest
                      ) -> Iterator[tuple[str, uuid.UUID, LeaderAndIsrPartitionState]]:
    """Every partition state of the request: v0-v1 list them ungrouped, v2+ by topic."""
    for state in request.ungrouped_partition_states:
        yield state.topic_name, ZERO_UUID, state
    for topic in request.topic_states:
        for state in topic.partition_states:
            yield topic.topic_name, topic.topic_id, state


#: The first LeaderAndIsr version whose response groups partitions by topic id (KIP-516).
TOPIC_IDS_MIN_VERSION = 5


def _by_topic_id(request: LeaderAndIsrRequest, version: int | None) -> bool:
    """Whether the answer groups partitions by topic id (v5+). Without the version, a request
    naming topic ids is taken for v5+ (earlier versions cannot carry them)."""
    if version is not None:
        return version >= TOPIC_IDS_MIN_VERSION
    return any(topic.topic_id != ZERO_UUID for topic in request.topic_states)


def _leader_and_isr_response(by_topic_id: bool, errors: dict[TopicPartition, int],
                             topic_ids: dict[str, uuid.UUID], error_code: int = ErrorCode.NO_ERROR
                             ) -> LeaderAndIsrResponse:
    """Per-partition errors as v0-v4 carry them (a flat list) or v5+ (by topic id)."""
    if not by_topic_id:
        return LeaderAndIsrResponse(error_code=error_code, partition_errors=[
            LeaderAndIsrPartitionError(topic_name=t, partition_index=p, error_code=e) for (t, p), e in errors.items()])
    by_topic: dict[str, LeaderAndIsrTopicError] = {}
    for (t, p), e in errors.items():
        entry = by_topic.get(t)
        if entry is None:
            entry = by_topic[t] = LeaderAndIsrTopicError(topic_id=topic_ids.get(t, ZERO_UUID), partition_errors=[])
        entry.partition_errors.append(LeaderAndIsrPartitionError(partition_index=p, error_code=e))
    return LeaderAndIsrResponse(error_code=error_code, topics=list(by_topic.values()))


async def become_leader_or_follower(manager: ReplicaHost, request: LeaderAndIsrRequest,
                                    version: int | None = None) -> LeaderAndIsrResponse:
    """``version``: the request's, which decides the answer's shape (see ``_by_topic_id``)."""
    async with manager.state_change_lock:
        return await _become_leader_or_follower(manager, request, _by_topic_id(request, version))


async def _become_leader_or_follower(manager: ReplicaHost, request: LeaderAndIsrRequest,
                                     by_topic_id: bool) -> LeaderAndIsrResponse:
    broker_id = manager.broker_id
    errors: dict[TopicPartition, int] = {}
    topic_ids: dict[str, uuid.UUID] = {}
    states = list(_partition_states(request))
    for topic, topic_id, _ in states:
        topic_ids.setdefault(topic, topic_id)
    if request.controller_epoch < manager.controller_epoch:
        log.warning("[ReplicaManager broker=%d] Ignoring LeaderAndIsr from controller %d with epoch %d: the "
                    "latest known controller epoch is %d", broker_id, request.controller_id,
                    request.controller_epoch, manager.controller_epoch)
        for topic, _, state in states:
            errors[(topic, state.partition_index)] = ErrorCode.STALE_CONTROLLER_EPOCH
        return _leader_and_isr_response(by_topic_id, errors, topic_ids, ErrorCode.STALE_CONTROLLER_EPOCH)
    manager.controller_epoch = request.controller_epoch

    accepted: dict[TopicPartition, _Accepted] = {}
    for topic, topic_id, state in states:
        tp = (topic, state.partition_index)
        partition = manager.partitions.get(tp)
        current_epoch = partition.leader_epoch if partition is not None else NO_EPOCH
        if partition is not None and topic_id != ZERO_UUID and partition.topic_id != ZERO_UUID \
                and partition.topic_id != topic_id:
            errors[tp] = ErrorCode.INCONSISTENT_TOPIC_ID
        elif state.leader_epoch > current_epoch:
            if broker_id in state.replicas:
                accepted[tp] = _Accepted(topic, topic_id, state)
                errors[tp] = ErrorCode.NO_ERROR
            else:
                log.warning("[ReplicaManager broker=%d] Ignoring LeaderAndIsr for %s-%d: not in its replicas %s",
                            broker_id, *tp, state.replicas)
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            log.info("[ReplicaManager broker=%d] Ignoring LeaderAndIsr for %s-%d: leader epoch %d is not newer "
                     "than %d", broker_id, *tp, state.leader_epoch, current_epoch)
            errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
    if not accepted:
        return _leader_and_isr_response(by_topic_id, errors, topic_ids)

    # 1. Logs of newly hosted partitions (blocking: creates directories and files).
    missing = [tp for tp in accepted if tp not in manager.partitions]
    if missing:
        try:
            logs = await manager.append_thread.run(
                lambda: [manager.log_manager.get_or_create_log(t, p) for t, p in missing])
        except Exception as exc:
            log.error("[ReplicaManager broker=%d] cannot create logs for LeaderAndIsr: %s", broker_id, exc)
            for tp in missing:
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                del accepted[tp]
            logs = []
        for tp, log_ in zip(missing, logs, strict=False):
            item = accepted[tp]
            partition = Partition(item.topic, tp[1], item.topic_id, log_, broker_id, list(item.state.replicas),
                                  NO_EPOCH)
            partition.leader_id = NO_LEADER
            partition.leader_epoch_start_offset = None
            partition.replica_isr_eligible = manager.replica_isr_eligible
            manager.add_partition(partition)

    # 2. Apply the states (event loop, no await).
    live_leaders = {leader.broker_id: BrokerEndpoint(leader.broker_id, leader.host_name, leader.port)
                    for leader in request.live_leaders}
    fetchers = manager.fetcher_control
    if fetchers is None and any(item.state.leader != broker_id for item in accepted.values()):
        manager.start_replication()
        fetchers = manager.fetcher_control
    lag = manager.replication_config.replica_lag_time_max_ms
    now = now_ms()
    new_followers: list[tuple[Partition, BrokerEndpoint]] = []
    new_leaders: list[tuple[Partition, int, int]] = []
    for tp, item in accepted.items():
        partition = manager.partitions[tp]
        partition.replica_lag_time_max_ms = lag
        if partition.topic_id == ZERO_UUID and item.topic_id != ZERO_UUID:
            partition.topic_id = item.topic_id
        was_leader = partition.is_leader
        state = item.state
        if state.leader == broker_id:
            if fetchers is not None:
                fetchers.remove_fetcher_for_partitions([tp])
            partition.make_leader(state, now)
            if partition.leader_epoch_start_offset is not None:
                new_leaders.append((partition, state.leader_epoch, partition.leader_epoch_start_offset))
            log.info("[ReplicaManager broker=%d] %s-%d: leader at epoch %d, ISR %s, partition epoch %d",
                     broker_id, *tp, state.leader_epoch, list(state.isr), state.partition_epoch)
            if not was_leader:
                manager.fire_leadership_change(tp[0], tp[1], True)
            manager.on_high_watermark_advanced(tp)
            manager.fetch_purgatory.notify(tp)  # a new epoch: every parked fetch reads again
        else:
            if fetchers is not None:
                fetchers.remove_fetcher_for_partitions([tp])
            partition.make_follower(state)
            log.info("[ReplicaManager broker=%d] %s-%d: follower of %d at epoch %d", broker_id, *tp, state.leader,
                     state.leader_epoch)
            if was_leader:
                manager.fire_leadership_change(tp[0], tp[1], False)
            # Waiting produces end (NOT_LEADER_OR_FOLLOWER), consumers' long polls wake to find out.
            manager.produce_purgatory.check_and_complete(tp)
            manager.fetch_purgatory.notify(tp)
            leader = live_leaders.get(state.leader)
            if leader is None or leader.broker_id == NO_LEADER:
                # No live leader (the controller took a dead leader out of the ISR before electing):
                # as Kafka's makeFollowers, neither truncate nor fetch. Truncating to the high
                # watermark here would drop acknowledged records that this replica, perhaps the
                # next leader, is the one to keep.
                log.warning("[ReplicaManager broker=%d] %s-%d: leader %d is not among the live leaders; not "
                            "truncating or fetching", broker_id, *tp, state.leader)
                continue
            new_followers.append((partition, leader))

    # 3. Record where the leaders' epochs start (append thread, after any append queued before
    # step 2). Followers are not truncated here: their fetchers truncate by leader epoch, at the
    # point the leader names (KIP-101, KIP-320), which a high watermark cannot know; truncating to
    # it loses acknowledged records or forks the log (tests/replication/test_leader_epochs.py).
    to_truncate = [p for p, _ in new_followers] if manager.replication_config.truncate_to_high_watermark_only else []
    if to_truncate or new_leaders:
        try:
            await manager.append_thread.run(_truncate_and_assign_epochs, to_truncate, new_leaders)
        except Exception as exc:
            log.error("[ReplicaManager broker=%d] follower truncation failed: %s", broker_id, exc)
            for partition, _ in new_followers:
                errors[(partition.topic, partition.partition_index)] = ErrorCode.KAFKA_STORAGE_ERROR
            new_followers = []

    # 4. Start fetching from the leaders (their partitions may have moved on meanwhile: checked).
    if fetchers is not None:
        to_fetch: dict[TopicPartition, BrokerEndpoint] = {}
        for partition, leader in new_followers:
            tp = (partition.topic, partition.partition_index)
            if manager.partitions.get(tp) is not partition or partition.is_leader:
                continue
            to_fetch[tp] = leader
        if to_fetch:
            fetchers.add_fetcher_for_partitions(to_fetch)
        fetchers.shutdown_idle_fetcher_threads()
    return _leader_and_isr_response(by_topic_id, errors, topic_ids)


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


# -- StopReplica ---------------------------------------------------------------------------------


def _stop_replica_partitions(request: StopReplicaRequest) -> Iterator[tuple[TopicPartition, int, bool]]:
    """(partition, leader epoch, delete) for every partition of the request, whatever its version."""
    for p in request.ungrouped_partitions:
        yield (p.topic_name, p.partition_index), NO_EPOCH, request.delete_partitions
    for topic in request.topics:
        for index in topic.partition_indexes:
            yield (topic.name, index), NO_EPOCH, request.delete_partitions
    for state in request.topic_states:
        for ps in state.partition_states:
            yield (state.topic_name, ps.partition_index), ps.leader_epoch, ps.delete_partition


async def stop_replicas(manager: ReplicaHost, request: StopReplicaRequest) -> StopReplicaResponse:
    async with manager.state_change_lock:
        return await _stop_replicas(manager, request)


async def _stop_replicas(manager: ReplicaHost, request: StopReplicaRequest) -> StopReplicaResponse:
    broker_id = manager.broker_id
    wanted = list(_stop_replica_partitions(request))
    errors: dict[TopicPartition, int] = {}
    if request.controller_epoch < manager.controller_epoch:
        log.warning("[ReplicaManager broker=%d] Ignoring StopReplica from controller %d with epoch %d: the latest "
                    "known controller epoch is %d", broker_id, request.controller_id, request.controller_epoch,
                    manager.controller_epoch)
        partition_errors = [StopReplicaPartitionError(topic_name=t, partition_index=p,
                                                      error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
                            for (t, p), _, _ in wanted]
        return StopReplicaResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH, partition_errors=partition_errors)
    manager.controller_epoch = request.controller_epoch

    stopped: dict[TopicPartition, bool] = {}
    for tp, leader_epoch, delete in wanted:
        partition = manager.partitions.get(tp)
        current = partition.leader_epoch if partition is not None else NO_EPOCH
        # The epoch the controller knew when it decided (Kafka's check is >=: a replica is stopped at its
        # current epoch, as when a reassignment removes it or a follower shuts down).
        if partition is None or leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or leader_epoch >= current:
            stopped[tp] = delete
            errors[tp] = ErrorCode.NO_ERROR
        else:
            log.info("[ReplicaManager broker=%d] Ignoring StopReplica (delete=%s) for %s-%d: leader epoch %d is "
                     "older than %d", broker_id, delete, *tp, leader_epoch, current)
            errors[tp] = ErrorCode.FENCED_LEADER_EPOCH

    fetchers = manager.fetcher_control
    if fetchers is not None and stopped:
        fetchers.remove_fetcher_for_partitions(list(stopped))
        fetchers.shutdown_idle_fetcher_threads()
    to_delete: list[TopicPartition] = []
    for tp, delete in stopped.items():
        if delete:
            partition = manager.remove_partition(*tp)
            if partition is not None:
                was_leader = partition.is_leader
                partition.stop_replica()
                if was_leader:
                    manager.fire_leadership_change(tp[0], tp[1], False)
            to_delete.append(tp)
        # A leader's waiting produces and fetches end now rather than time out.
        manager.produce_purgatory.check_and_complete(tp)
        manager.fetch_purgatory.notify(tp)
    if to_delete:
        try:
            await manager.append_thread.run(_delete_logs, manager, to_delete)
        except Exception as exc:
            log.error("[ReplicaManager broker=%d] deleting stopped replicas failed: %s", broker_id, exc)
            for tp in to_delete:
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
    return StopReplicaResponse(error_code=ErrorCode.NO_ERROR, partition_errors=[
        StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=e) for (t, p), e in errors.items()])


def _delete_logs(manager: ReplicaHost, tps: list[TopicPartition]) -> None:
    for topic, index in tps:
        if (topic, index) not in manager.partitions:  # not hosted again meanwhile
            manager.log_manager.delete_log(topic, index)


# -- ISR expiration ----------------------------------------------------------------------------


def maybe_shrink_isrs(manager: ReplicaHost, now: int | None = None) -> None:
    """One pass of Kafka's isr-expiration: every led partition drops followers that fell behind
    (proposed to the controller); a high watermark held only by them moves on."""
    now = now_ms() if now is None else now
    for tp, partition in list(manager.partitions.items()):
        if not partition.is_leader or len(partition.replicas) <= 1:
            continue
        manager.submit_isr_change(partition, partition.maybe_shrink_isr(now))
        if partition.maybe_increment_high_watermark(now):
            manager.on_high_watermark_advanced(tp)


async def isr_expiration_loop(manager: ReplicaHost) -> None:
    interval = manager.replication_config.replica_lag_time_max_ms / 2 / 1000
    while True:
        await asyncio.sleep(interval)
        try:
            maybe_shrink_isrs(manager)
        except Exception:
            log.exception("[ReplicaManager broker=%d] ISR expiration failed", manager.broker_id)
