"""Replaying one ``__consumer_offsets`` partition into the state its groups had (Kafka's
doLoadGroupsAndOffsets), transactions included.

Records are read in offset order; later ones win and a null value (tombstone)
deletes its key. An offset commit in a transactional batch is held pending under
its producer id until that producer's marker: COMMIT moves each pending offset
into the committed ones unless one appended later is already there (the same rule
as the live path, so a reload gives what the coordinator had), ABORT drops them.
Offsets of a transaction without a marker yet stay pending: the group coordinator
keeps them so, for the marker that will end them.

The records of consumer-protocol groups (types 3-8 and 16) are replayed into a
``LoadedConsumerGroup`` per group, as Kafka's replay methods apply them: any of
them creates the group, a member's tombstones remove what they key, and the
tombstone of the group's metadata removes the group. Those of share groups
(types 9-15) likewise into a ``LoadedShareGroup`` per group.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from coordinator.common.coordinator_log import LogEntry, TxnMarkerEntry
from coordinator.group.group_metadata import CommitRecordMetadataAndOffset, OffsetAndMetadata, TopicPartition
from coordinator.group.record_formats import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    TopicPartitions,
    decode_consumer_group_value,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from coordinator.group.share_group_record_formats import (
    SHARE_GROUP_METADATA,
    LoadedShareGroup,
    ShareGroupRecordKey,
    decode_share_group_key,
)
from protocol.errors import CorruptRecordError
from protocol.record_batch import NO_PRODUCER_ID

log = logging.getLogger(__name__)

GroupOffsets = dict[TopicPartition, CommitRecordMetadataAndOffset]


@dataclass
class LoadedConsumerGroup:
    """What a consumer group's records leave of it: the latest value of each of its keys."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    partition_metadata: ConsumerGroupPartitionMetadataValue | None = None
    #: Member id → its metadata (the member exists while this record does).
    members: dict[str, ConsumerGroupMemberMetadataValue] = field(default_factory=dict)
    #: Member id → its target assignment.
    targets: dict[str, TopicPartitions] = field(default_factory=dict)
    #: Member id → its epochs, state and current assignment.
    current: dict[str, ConsumerGroupCurrentMemberAssignmentValue] = field(default_factory=dict)
    #: Regular expression → the topics it resolved to, and when.
    resolved_regexes: dict[str, ConsumerGroupRegularExpressionValue] = field(default_factory=dict)

    def apply(self, key: ConsumerGroupRecordKey, value: bytes | None) -> None:
        """One record of the group (a tombstone when ``value`` is None)."""
        if key.record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
            self._apply_regex(key.regex or "", value)
            return
        member_id = key.member_id or ""
        if value is None:
            self._remove(key.record_type, member_id)
            return
        decoded = decode_consumer_group_value(key.record_type, value)
        if isinstance(decoded, ConsumerGroupMetadataValue):
            self.group_epoch = decoded.epoch
        elif isinstance(decoded, ConsumerGroupTargetAssignmentMetadataValue):
            self.assignment_epoch = decoded.assignment_epoch
        elif isinstance(decoded, ConsumerGroupPartitionMetadataValue):
            self.partition_metadata = decoded
        elif isinstance(decoded, ConsumerGroupMemberMetadataValue):
            self.members[member_id] = decoded
        elif isinstance(decoded, ConsumerGroupTargetAssignmentMemberValue):
            self.targets[member_id] = decoded.partitions
        elif isinstance(decoded, ConsumerGroupCurrentMemberAssignmentValue):
            self.current[member_id] = decoded

    def _apply_regex(self, regex: str, value: bytes | None) -> None:
        if value is None:
            self.resolved_regexes.pop(regex, None)
            return
        decoded = decode_consumer_group_value(CONSUMER_GROUP_REGULAR_EXPRESSION, value)
        if isinstance(decoded, ConsumerGroupRegularExpressionValue):
            self.resolved_regexes[regex] = decoded

    def _remove(self, record_type: int, member_id: str) -> None:
        if record_type == CONSUMER_GROUP_MEMBER_METADATA:
            self.members.pop(member_id, None)
        elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            self.targets.pop(member_id, None)
        elif record_type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            self.current.pop(member_id, None)
        elif record_type == CONSUMER_GROUP_PARTITION_METADATA:
            self.partition_metadata = None


@dataclass
class LoadedPartition:
    """What one partition's records leave of its groups."""

    #: Group → its committed offsets.
    offsets: dict[str, GroupOffsets] = field(default_factory=dict)
    #: Producer id → group → offsets of the producer's transaction that has no marker yet.
    pending: dict[int, dict[str, GroupOffsets]] = field(default_factory=dict)
    #: Group → its latest metadata record (None: a tombstone).
    metadata: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    #: Consumer-protocol group → what its records leave of it.
    consumer_groups: dict[str, LoadedConsumerGroup] = field(default_factory=dict)
    #: Share group → what its records leave of it.
    share_groups: dict[str, LoadedShareGroup] = field(default_factory=dict)

    def group_ids(self) -> set[str]:
        ids = set(self.offsets) | set(self.metadata)
        for groups in self.pending.values():
            ids.update(groups)
        return ids

    def pending_of(self, group_id: str) -> dict[int, GroupOffsets]:
        """The group's pending transactional offsets, by producer id."""
        return {pid: groups[group_id] for pid, groups in self.pending.items() if groups.get(group_id)}


def replay(entries: Iterable[LogEntry], partition: int, broker_id: int) -> LoadedPartition:
    loaded = LoadedPartition()
    for entry in entries:
        if isinstance(entry, TxnMarkerEntry):
            _end_transaction(loaded, entry)
            continue
        try:
            share_key = decode_share_group_key(entry.key or b"")
            if share_key is not None:
                _share_group_record(loaded, share_key, entry.value)
                continue
            key = decode_key(entry.key or b"")
            if isinstance(key, OffsetCommitKey):
                _offset_record(loaded, key, entry.offset, entry.value, entry.transactional_producer_id)
            elif isinstance(key, GroupMetadataKey):
                loaded.metadata[key.group] = None if entry.value is None else decode_group_metadata_value(entry.value)
            else:
                _consumer_group_record(loaded, key, entry.value)
        except CorruptRecordError as exc:
            log.error("[GroupMetadataManager brokerId=%d] skipping unreadable record at offset %d of "
                      "__consumer_offsets-%d: %s", broker_id, entry.offset, partition, exc)
    return loaded


def _consumer_group_record(loaded: LoadedPartition, key: ConsumerGroupRecordKey, value: bytes | None) -> None:
    if key.record_type == CONSUMER_GROUP_METADATA and value is None:
        loaded.consumer_groups.pop(key.group, None)  # the group is deleted
        return
    loaded.consumer_groups.setdefault(key.group, LoadedConsumerGroup()).apply(key, value)


def _share_group_record(loaded: LoadedPartition, key: ShareGroupRecordKey, value: bytes | None) -> None:
    if key.record_type == SHARE_GROUP_METADATA and value is None:
        loaded.share_groups.pop(key.group, None)  # the group is deleted
        return
    loaded.share_groups.setdefault(key.group, LoadedShareGroup()).apply(key, value)


def _offset_record(loaded: LoadedPartition, key: OffsetCommitKey, offset: int, value: bytes | None,
                   producer_id: int) -> None:
    if producer_id == NO_PRODUCER_ID:
        target = loaded.offsets.setdefault(key.group, {})
    else:
        target = loaded.pending.setdefault(producer_id, {}).setdefault(key.group, {})
    tp = (key.topic, key.partition)
    if value is None:
        target.pop(tp, None)
        return
    v = decode_offset_commit_value(value)
    target[tp] = CommitRecordMetadataAndOffset(offset, OffsetAndMetadata(
        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp))


def _end_transaction(loaded: LoadedPartition, marker: TxnMarkerEntry) -> None:
    groups = loaded.pending.pop(marker.producer_id, {})
    if not marker.committed:
        return
    for group_id, pending in groups.items():
        committed = loaded.offsets.setdefault(group_id, {})
        for tp, entry in pending.items():
            current = committed.get(tp)
            if current is None or _older(current, entry):
                committed[tp] = entry


def _older(current: CommitRecordMetadataAndOffset, other: CommitRecordMetadataAndOffset) -> bool:
    """Kafka's olderThan: appended before ``other``."""
    if current.appended_batch_offset is None or other.appended_batch_offset is None:
        return True
    return current.appended_batch_offset < other.appended_batch_offset
