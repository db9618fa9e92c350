"""GroupMetadataManager: the groups this coordinator owns, persisted in ``__consumer_offsets``.

A group lives in partition ``partition_for(group_id)`` of ``__consumer_offsets``.
Its assignment (after each completed rebalance) and every committed offset are
appended there as records in Kafka's formats (``record_formats``), so the
coordinator's whole state can be rebuilt by reading the partition from the
start: later records win, and a null value (tombstone) deletes the key. The
log cleaner compacts the topic down to the latest value per key.

Writes complete asynchronously (``CoordinatorLog.append`` calls back); a
commit becomes visible to OffsetFetch only once it is in the log. Offsets
committed inside a producer's transaction (TxnOffsetCommit) are written as a
transactional batch of that producer and stay pending until the transaction's
marker is written to the same partition: COMMIT makes them visible, ABORT drops
them (``handle_txn_completion``); a load replays both the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from coordinator.common.coordinator_log import APPEND_ERRORS, CoordinatorLog, KeyValues, LogEntry
from coordinator.common.partitioner import partition_for
from coordinator.common.scheduler import Scheduler
from coordinator.group.group_metadata import (
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
    TopicPartition,
)
from coordinator.group.group_metadata_loader import LoadedConsumerGroup, replay
from coordinator.group.record_formats import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from coordinator.group.share_group_record_formats import LoadedShareGroup
from protocol.errors import ErrorCode
from protocol.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

log = logging.getLogger(__name__)

INVALID_OFFSET = -1
NO_METADATA = ""


# Append errors → what a classic group's join and offset commits answer (Kafka's storeGroup/storeOffsets).
_STORE_GROUP_ERRORS = {**APPEND_ERRORS, ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS}
_STORE_OFFSETS_ERRORS = {
    **_STORE_GROUP_ERRORS,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


class GroupMetadataManager:
    def __init__(self, broker_id: int, log_: CoordinatorLog, scheduler: Scheduler, *,
                 offset_metadata_max_bytes: int = 4096, offsets_retention_ms: int = 7 * 24 * 3600 * 1000) -> None:
        self.broker_id = broker_id
        self.coordinator_log = log_
        self.scheduler = scheduler
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.offsets_retention_ms = offsets_retention_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        #: Producer id → the groups holding offsets of its open transaction (Kafka's openGroupsForProducer).
        self.open_groups_for_producer: dict[int, set[str]] = {}
        #: Partition being loaded → (producer id, committed) of markers written meanwhile: the
        #: load's read may have ended before them, so they are settled again once it is applied.
        self._completions_while_loading: dict[int, list[tuple[int, bool]]] = {}
        #: Asked to load a partition found non-empty after start-up (set by the coordinator).
        self.request_load: Callable[[list[int]], None] | None = None
        #: Given the consumer-protocol groups each load replayed (set by the coordinator).
        self.consumer_groups_loaded: Callable[[dict[str, LoadedConsumerGroup]], None] | None = None
        #: Likewise for the share groups' records.
        self.share_groups_loaded: Callable[[dict[str, LoadedShareGroup]], None] | None = None

    # -- ownership ---------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.coordinator_log.num_partitions)

    def _check_partition(self, partition: int) -> None:
        """Adopt a partition that became local after start-up (created by first use)."""
        if partition in self.owned_partitions or partition in self.loading_partitions:
            return
        if not self.coordinator_log.is_local_leader(partition):
            return
        if self.coordinator_log.log_end_offset(partition) == 0 or self.request_load is None:
            self.owned_partitions.add(partition)
        else:
            self.begin_loading([partition])
            self.request_load([partition])

    def is_group_local(self, group_id: str) -> bool:
        partition = self.partition_for(group_id)
        self._check_partition(partition)
        return partition in self.owned_partitions or partition in self.loading_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    # -- the cache ----------------------------------------------------------------
    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def current_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    def remove_group(self, group: GroupMetadata) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # -- group metadata --------------------------------------------------------------
    def group_metadata_value(self, group: GroupMetadata, assignment: dict[str, bytes]) -> GroupMetadataValue:
        members = []
        protocol = group.protocol_name
        for member in group.members.values():
            subscription = member.metadata(protocol) if protocol is not None else b""
            members.append(MemberMetadataValue(
                member.member_id, member.group_instance_id, member.client_id, member.client_host,
                member.rebalance_timeout_ms, member.session_timeout_ms, subscription,
                assignment.get(member.member_id, b"")))
        ts = group.current_state_timestamp if group.current_state_timestamp is not None else -1
        return GroupMetadataValue(group.protocol_type or "", group.generation_id, protocol, group.leader_id, ts, members)

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes],
                    callback: Callable[[ErrorCode], None]) -> None:
        key = encode_group_metadata_key(GroupMetadataKey(group.group_id))
        value = encode_group_metadata_value(self.group_metadata_value(group, assignment))

        def done(error: ErrorCode, _offset: int | None) -> None:
            if error != ErrorCode.NO_ERROR:
                log.warning("[GroupMetadataManager brokerId=%d] failed to write the metadata of group %s "
                            "(generation %d): %s", self.broker_id, group.group_id, group.generation_id, error.name)
            callback(_STORE_GROUP_ERRORS.get(error, error))

        self.coordinator_log.append(self.partition_for(group.group_id), [(key, value)], self.scheduler.now_ms(), done)

    # -- offsets --------------------------------------------------------------------
    def valid_metadata(self, metadata: str | None) -> bool:
        return metadata is None or len(metadata.encode("utf-8")) <= self.offset_metadata_max_bytes

    def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata],
                      callback: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        """Append the valid commits as one batch; they become visible once appended."""
        self._store_offsets(group, offsets, callback, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

    def store_transactional_offsets(self, group: GroupMetadata, producer_id: int, producer_epoch: int,
                                    offsets: dict[TopicPartition, OffsetAndMetadata],
                                    callback: Callable[[dict[TopicPartition, ErrorCode]], None],
                                    transactional_id: str | None = None, add_to_transaction: bool = False) -> None:
        """TxnOffsetCommit's write: the valid commits as one transactional batch of the producer
        (its id and epoch, so the partition's producer state fences an older epoch); they stay
        pending, invisible to OffsetFetch, until the transaction's marker ends them. With the
        ``transactional_id``, the partition first verifies the transaction is ongoing (or, with
        ``add_to_transaction``, adds itself to it: TxnOffsetCommit v5, transaction version 2)."""
        self._store_offsets(group, offsets, callback, producer_id, producer_epoch, transactional_id,
                            add_to_transaction)

    def _store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata],
                       callback: Callable[[dict[TopicPartition, ErrorCode]], None], producer_id: int,
                       producer_epoch: int, transactional_id: str | None = None,
                       add_to_transaction: bool = False) -> None:
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if self.valid_metadata(om.metadata):
                valid[tp] = om
            else:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        if not valid:
            callback(errors)
            return
        records: KeyValues = [
            (encode_offset_commit_key(OffsetCommitKey(group.group_id, tp[0], tp[1])),
             encode_offset_commit_value(OffsetCommitValue(om.offset, om.metadata or "", om.commit_timestamp,
                                                          om.leader_epoch, om.expire_timestamp)))
            for tp, om in valid.items()]
        transactional = producer_id != NO_PRODUCER_ID
        if transactional:
            self.open_groups_for_producer.setdefault(producer_id, set()).add(group.group_id)
            group.prepare_txn_offset_commit(producer_id, valid)
        else:
            group.prepare_offset_commit(valid)

        def done(error: ErrorCode, first_offset: int | None) -> None:
            mapped = _STORE_OFFSETS_ERRORS.get(error, error)
            if group.is_(GroupState.DEAD):
                # Deleted while the append was in flight: its tombstones follow in the log.
                errors.update((tp, mapped) for tp in valid)
                callback(errors)
                return
            for i, (tp, om) in enumerate(valid.items()):
                batch_offset = None if first_offset is None else first_offset + i
                committed = CommitRecordMetadataAndOffset(batch_offset, om)
                if transactional and error == ErrorCode.NO_ERROR:
                    group.on_txn_offset_commit_append(producer_id, tp, committed)
                elif transactional:
                    group.fail_pending_txn_offset_commit(producer_id, tp)
                elif error == ErrorCode.NO_ERROR:
                    group.on_offset_commit_append(tp, committed)
                else:
                    group.fail_pending_offset_write(tp)
                errors[tp] = mapped
            if transactional and not group.has_pending_offset_commits_from(producer_id):
                self._remove_producer_group(producer_id, group.group_id)
            callback(errors)

        self.coordinator_log.append(self.partition_for(group.group_id), records, self.scheduler.now_ms(), done,
                                    producer_id=producer_id, producer_epoch=producer_epoch,
                                    transactional_id=transactional_id, add_to_transaction=add_to_transaction)

    def handle_txn_completion(self, producer_id: int, completed_partitions: set[int], is_commit: bool) -> None:
        """The producer's transaction marker is in these partitions of ``__consumer_offsets``:
        settle the pending offsets of its groups there (Kafka's handleTxnCompletion)."""
        for partition in completed_partitions & self.loading_partitions:
            self._completions_while_loading.setdefault(partition, []).append((producer_id, is_commit))
        for group_id in list(self.open_groups_for_producer.get(producer_id, ())):
            if self.partition_for(group_id) not in completed_partitions:
                continue
            group = self.groups.get(group_id)
            if group is not None and not group.is_(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, is_commit)
            # Gone (moved away or deleted): its new owner replays the marker when it loads.
            self._remove_producer_group(producer_id, group_id)

    def _remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self.open_groups_for_producer.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self.open_groups_for_producer[producer_id]

    def unstable_offsets(self, group_id: str, partitions: list[TopicPartition]) -> set[TopicPartition]:
        """Of ``partitions``, those with a commit not yet settled (in flight, or in an open
        transaction): OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return set()
        return {tp for tp in partitions if group.has_pending_offset_commits_for(tp)}

    def get_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets (None for a partition without one); all of them when ``partitions`` is None."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return dict.fromkeys(partitions or ())
        if partitions is None:
            return {tp: e.offset_and_metadata for tp, e in group.offsets.items()}
        out: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for tp in partitions:
            entry = group.offsets.get(tp)
            out[tp] = None if entry is None else entry.offset_and_metadata
        return out

    # -- deletion and expiry -----------------------------------------------------------
    def tombstones(self, group: GroupMetadata, partitions: Iterable[TopicPartition],
                   with_group: bool) -> KeyValues:
        records: KeyValues = [(encode_offset_commit_key(OffsetCommitKey(group.group_id, t, p)), None)
                              for t, p in partitions]
        if with_group:
            records.append((encode_group_metadata_key(GroupMetadataKey(group.group_id)), None))
        return records

    def cleanup_group_metadata(self, groups: Iterable[GroupMetadata],
                               selector: Callable[[GroupMetadata], list[TopicPartition]],
                               callback: Callable[[int], None] | None = None) -> None:
        """Remove what ``selector`` picks from each group; groups left Empty without offsets die.

        Tombstones for the removed offsets (and for dead groups' metadata) are
        appended per ``__consumer_offsets`` partition; ``callback`` gets the
        number of offsets removed once every append finished.
        """
        by_partition: dict[int, KeyValues] = {}
        removed_total = 0
        for group in list(groups):
            removed = selector(group)
            removed_total += len(removed)
            dead = False
            if group.is_(GroupState.EMPTY) and not group.has_offsets():
                group.transition_to(GroupState.DEAD, self.scheduler.now_ms())
                dead = True
            if group.is_(GroupState.DEAD):
                self.remove_group(group)
                dead = True
            if removed or dead:
                by_partition.setdefault(self.partition_for(group.group_id), []).extend(
                    self.tombstones(group, removed, with_group=dead))
        pending = len(by_partition)
        if pending == 0:
            if callback is not None:
                callback(removed_total)
            return

        def one_done(error: ErrorCode, _offset: int | None) -> None:
            nonlocal pending
            if error != ErrorCode.NO_ERROR:
                log.warning("[GroupMetadataManager brokerId=%d] failed to write tombstones: %s",
                            self.broker_id, error.name)
            pending -= 1
            if pending == 0 and callback is not None:
                callback(removed_total)

        for partition, records in by_partition.items():
            self.coordinator_log.append(partition, records, self.scheduler.now_ms(), one_done)

    def expire_offsets(self, callback: Callable[[int], None] | None = None) -> None:
        now = self.scheduler.now_ms()
        retention = self.offsets_retention_ms
        groups = [g for g in self.groups.values() if self.partition_for(g.group_id) in self.owned_partitions]
        self.cleanup_group_metadata(groups, lambda g: g.remove_expired_offsets(now, retention), callback)

    # -- loading -----------------------------------------------------------------------
    def remove_groups_for_partition(self, partition: int) -> list[GroupMetadata]:
        """Leadership of ``partition`` left: forget it and its groups (Kafka's removeGroupsForPartition)."""
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        self._completions_while_loading.pop(partition, None)
        removed = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        for group in removed:
            del self.groups[group.group_id]
            for producer_id in list(group.pending_txn_offset_commits):
                self._remove_producer_group(producer_id, group.group_id)
        return removed

    def begin_loading(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            self.owned_partitions.discard(p)
            self.loading_partitions.add(p)

    def complete_loading(self, partition: int, entries: Iterable[LogEntry]) -> list[GroupMetadata]:
        """Rebuild the groups of one partition from its records and markers; returns the groups loaded.

        Offsets of transactions still open in the log come back pending, and their
        producers' markers settle them as if the coordinator had never stopped.
        """
        loaded_partition = replay(entries, partition, self.broker_id)
        loaded = []
        now = self.scheduler.now_ms()
        for group_id in loaded_partition.group_ids():
            value = loaded_partition.metadata.get(group_id)
            group_offsets = loaded_partition.offsets.get(group_id, {})
            pending = loaded_partition.pending_of(group_id)
            if value is None and not group_offsets and not pending:
                continue
            group = self._group_from_value(group_id, value, now)
            group.offsets = group_offsets
            group.pending_txn_offset_commits = pending
            for producer_id in pending:
                self.open_groups_for_producer.setdefault(producer_id, set()).add(group_id)
            self.groups[group_id] = group
            loaded.append(group)
        if self.consumer_groups_loaded is not None and loaded_partition.consumer_groups:
            self.consumer_groups_loaded(loaded_partition.consumer_groups)
        if self.share_groups_loaded is not None and loaded_partition.share_groups:
            self.share_groups_loaded(loaded_partition.share_groups)
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)
        # No transactional commit is accepted while loading, so a marker written meanwhile can
        # only end a transaction the load saw: settling it again is a no-op if the read had it.
        for producer_id, is_commit in self._completions_while_loading.pop(partition, []):
            self.handle_txn_completion(producer_id, {partition}, is_commit)
        log.info("[GroupMetadataManager brokerId=%d] loaded %d group(s) from __consumer_offsets-%d",
                 self.broker_id, len(loaded), partition)
        return loaded

    @staticmethod
    def _group_from_value(group_id: str, value: GroupMetadataValue | None, now: int) -> GroupMetadata:
        if value is None:
            return GroupMetadata(group_id, GroupState.EMPTY, now)
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        group = GroupMetadata(group_id, state, now)
        group.current_state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        for m in value.members:
            member = MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                    m.rebalance_timeout, m.session_timeout, value.protocol_type,
                                    [(value.protocol or "", m.subscription)])
            member.assignment = m.assignment
            group.add(member, None)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.subscribed_topics = group._compute_subscribed_topics()
        return group
