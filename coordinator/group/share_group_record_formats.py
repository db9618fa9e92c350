"""The ``__consumer_offsets`` records of share groups (KIP-932), in Kafka's formats.

Like the consumer groups' records (``record_formats``), each key starts with
its record type (Kafka's coordinator-key ``apiKey``) as an int16, then the group
and, for a member's record, the member (non-flexible strings); every value is
version 0 in the flexible encoding (compact strings and arrays, tagged fields
after each struct):

- 9 ``ShareGroupPartitionMetadata`` (group): the subscribed topics' ids, names
  and partition counts (the consumer groups' format);
- 10 ``ShareGroupMemberMetadata`` (group, member): rack, client id and host,
  subscribed topic names;
- 11 ``ShareGroupMetadata`` (group): the group epoch;
- 12 ``ShareGroupTargetAssignmentMetadata`` (group): the assignment epoch;
- 13 ``ShareGroupTargetAssignmentMember`` (group, member): its target;
- 14 ``ShareGroupCurrentMemberAssignment`` (group, member): member epoch,
  previous epoch, state, assigned partitions;
- 15 ``ShareGroupStatePartitionMetadata`` (group): the share partitions whose
  state is being initialized, those initialized (topic id, name, partitions)
  and the topics whose state is being deleted (id, name).

:class:`LoadedShareGroup` is what a group's records leave of it on a load.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from coordinator.group.record_formats import (
    ConsumerGroupPartitionMetadataValue,
    TopicPartitions,
    _read_topic_metadata,
    _read_topic_partitions,
    _reader,
    _write_partition_metadata,
    _Writer,
)
from protocol.errors import CorruptRecordError
from protocol.readable import Readable

SHARE_GROUP_PARTITION_METADATA = 9
SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15
SHARE_GROUP_TYPES = range(SHARE_GROUP_PARTITION_METADATA, SHARE_GROUP_STATE_PARTITION_METADATA + 1)
#: The types keyed by group and member (the others by group only).
_MEMBER_TYPES = (SHARE_GROUP_MEMBER_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                 SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT)
SHARE_GROUP_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class ShareGroupRecordKey:
    record_type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    partitions: TopicPartitions


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    #: Kafka's MemberState byte (a share group member is always 0, stable).
    state: int
    assigned: TopicPartitions


#: Topic id → (name, partitions).
StateTopics = tuple[tuple[uuid.UUID, str, frozenset[int]], ...]


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    initializing: StateTopics = ()
    initialized: StateTopics = ()
    #: (topic id, name) of each topic whose share state is being deleted.
    deleting: tuple[tuple[uuid.UUID, str], ...] = ()


ShareGroupValue = (ConsumerGroupPartitionMetadataValue | ShareGroupMemberMetadataValue | ShareGroupMetadataValue
                   | ShareGroupTargetAssignmentMetadataValue | ShareGroupTargetAssignmentMemberValue
                   | ShareGroupCurrentMemberAssignmentValue | ShareGroupStatePartitionMetadataValue)


def encode_share_group_key(key: ShareGroupRecordKey) -> bytes:
    w = _Writer(key.record_type)
    w.string(key.group)
    if key.record_type in _MEMBER_TYPES:
        w.string(key.member_id or "")
    return bytes(w.out)


def decode_share_group_key(data: bytes) -> ShareGroupRecordKey | None:
    """The key of a share group's record; None for a key of another record type."""
    if len(data) < 2 or int.from_bytes(data[:2], "big", signed=True) not in SHARE_GROUP_TYPES:
        return None
    r = _reader(data)
    record_type = r.int16()
    group = r.string()
    return ShareGroupRecordKey(record_type, group, r.string() if record_type in _MEMBER_TYPES else None)


def encode_share_group_value(value: ShareGroupValue) -> bytes:
    """Version 0, flexible: the fields in schema order, then an empty tagged-field section."""
    w = _Writer(SHARE_GROUP_VALUE_VERSION)
    if isinstance(value, ConsumerGroupPartitionMetadataValue):
        _write_partition_metadata(w, value)
    elif isinstance(value, ShareGroupMemberMetadataValue):
        w.compact_string(value.rack_id)
        w.compact_string(value.client_id)
        w.compact_string(value.client_host)
        w.compact_array(len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            w.compact_string(name)
    elif isinstance(value, ShareGroupMetadataValue):
        w.int32(value.epoch)
    elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
    elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
        w.topic_partitions(value.partitions)
    elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.out.append(value.state & 0xFF)
        w.topic_partitions(value.assigned)
    else:
        _write_state_metadata(w, value)
    w.no_tagged_fields()
    return bytes(w.out)


def _write_state_topics(w: _Writer, topics: StateTopics) -> None:
    w.compact_array(len(topics))
    for topic_id, name, partitions in sorted(topics, key=lambda t: str(t[0])):
        w.uuid(topic_id)
        w.compact_string(name)
        w.compact_array(len(partitions))
        for p in sorted(partitions):
            w.int32(p)
        w.no_tagged_fields()


def _write_state_metadata(w: _Writer, value: ShareGroupStatePartitionMetadataValue) -> None:
    _write_state_topics(w, value.initializing)
    _write_state_topics(w, value.initialized)
    w.compact_array(len(value.deleting))
    for topic_id, name in sorted(value.deleting, key=lambda t: str(t[0])):
        w.uuid(topic_id)
        w.compact_string(name)
        w.no_tagged_fields()


def decode_share_group_value(record_type: int, data: bytes) -> ShareGroupValue:
    """The value of a share group's record of ``record_type`` (version 0; later fields are tagged, skipped)."""
    r = _reader(data, flexible=True)
    version = r.int16()
    if version != SHARE_GROUP_VALUE_VERSION:
        raise CorruptRecordError(f"unknown share group record value version {version} (type {record_type})")
    value: ShareGroupValue
    if record_type == SHARE_GROUP_PARTITION_METADATA:
        value = ConsumerGroupPartitionMetadataValue(tuple(_read_topic_metadata(r) for _ in range(r.array_length())))
    elif record_type == SHARE_GROUP_MEMBER_METADATA:
        rack, client_id, client_host = r.nullable_string(), r.string(), r.string()
        value = ShareGroupMemberMetadataValue(rack, client_id, client_host,
                                              tuple(r.string() for _ in range(r.array_length())))
    elif record_type == SHARE_GROUP_METADATA:
        value = ShareGroupMetadataValue(r.int32())
    elif record_type == SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
        value = ShareGroupTargetAssignmentMetadataValue(r.int32())
    elif record_type == SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
        value = ShareGroupTargetAssignmentMemberValue(_read_topic_partitions(r))
    elif record_type == SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        member_epoch, previous = r.int32(), r.int32()
        state = r.take(1)[0]
        value = ShareGroupCurrentMemberAssignmentValue(member_epoch, previous, state - 256 if state > 127 else state,
                                                       _read_topic_partitions(r))
    else:
        value = _read_state_metadata(r)
    r.skip_tagged_fields()
    return value


def _read_state_topics(r: Readable) -> StateTopics:
    topics = []
    for _ in range(r.array_length()):
        topic_id, name = uuid.UUID(bytes=r.take(16)), r.string()
        partitions = frozenset(r.int32() for _ in range(r.array_length()))
        r.skip_tagged_fields()
        topics.append((topic_id, name, partitions))
    return tuple(topics)


def _read_state_metadata(r: Readable) -> ShareGroupStatePartitionMetadataValue:
    initializing, initialized = _read_state_topics(r), _read_state_topics(r)
    deleting = []
    for _ in range(r.array_length()):
        topic_id, name = uuid.UUID(bytes=r.take(16)), r.string()
        r.skip_tagged_fields()
        deleting.append((topic_id, name))
    return ShareGroupStatePartitionMetadataValue(initializing, initialized, tuple(deleting))


@dataclass
class LoadedShareGroup:
    """What a share group's records leave of it: the latest value of each of its keys."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    partition_metadata: ConsumerGroupPartitionMetadataValue | None = None
    state_metadata: ShareGroupStatePartitionMetadataValue | None = None
    members: dict[str, ShareGroupMemberMetadataValue] = field(default_factory=dict)
    targets: dict[str, TopicPartitions] = field(default_factory=dict)
    current: dict[str, ShareGroupCurrentMemberAssignmentValue] = field(default_factory=dict)

    def apply(self, key: ShareGroupRecordKey, value: bytes | None) -> None:
        """One record of the group (a tombstone when ``value`` is None)."""
        member_id = key.member_id or ""
        if value is None:
            self._remove(key.record_type, member_id)
            return
        decoded = decode_share_group_value(key.record_type, value)
        if isinstance(decoded, ShareGroupMetadataValue):
            self.group_epoch = decoded.epoch
        elif isinstance(decoded, ShareGroupTargetAssignmentMetadataValue):
            self.assignment_epoch = decoded.assignment_epoch
        elif isinstance(decoded, ConsumerGroupPartitionMetadataValue):
            self.partition_metadata = decoded
        elif isinstance(decoded, ShareGroupStatePartitionMetadataValue):
            self.state_metadata = decoded
        elif isinstance(decoded, ShareGroupMemberMetadataValue):
            self.members[member_id] = decoded
        elif isinstance(decoded, ShareGroupTargetAssignmentMemberValue):
            self.targets[member_id] = decoded.partitions
        else:
            self.current[member_id] = decoded

    def _remove(self, record_type: int, member_id: str) -> None:
        if record_type == SHARE_GROUP_MEMBER_METADATA:
            self.members.pop(member_id, None)
        elif record_type == SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
            self.targets.pop(member_id, None)
        elif record_type == SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            self.current.pop(member_id, None)
        elif record_type == SHARE_GROUP_PARTITION_METADATA:
            self.partition_metadata = None
        elif record_type == SHARE_GROUP_STATE_PARTITION_METADATA:
            self.state_metadata = None
