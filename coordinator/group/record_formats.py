"""Keys and values of the records in ``__consumer_offsets``, in Kafka's formats.

Each key and value starts with an int16 version; the fields follow Kafka's
coordinator record schemas (group-coordinator/.../common/message):

- ``OffsetCommitKey`` (key versions 0 and 1): group, topic, partition.
- ``GroupMetadataKey`` (key version 2): group.
- ``OffsetCommitValue`` v0-v4: offset, leaderEpoch (3+), metadata,
  commitTimestamp, expireTimestamp (v1 only); v4 is the flexible encoding.
- ``GroupMetadataValue`` v0-v4: protocolType, generation, protocol, leader,
  currentStateTimestamp (2+), members (memberId, groupInstanceId 3+, clientId,
  clientHost, rebalanceTimeout 1+, sessionTimeout, subscription, assignment).

Kafka 4 writes offset key version 1, offset value version 3 (version 1 when
a v2-v4 OffsetCommit carried a retention time, the only way to get an
explicit expire timestamp), group key version 2 and group value version 3;
so do we, and we read every version. A tombstone is a key with a null value.

The groups of the consumer protocol (KIP-848) have six more record types; the
key's leading int16 is the record type (Kafka's coordinator-key ``apiKey``),
its fields are not flexible; every value is version 0 in the flexible encoding
(compact strings and arrays, tagged fields after each struct):

- 3 ``ConsumerGroupMetadata`` (group): the group epoch;
- 4 ``ConsumerGroupPartitionMetadata`` (group): the subscribed topics' ids,
  names and partition counts (with per-partition racks, left empty here);
- 5 ``ConsumerGroupMemberMetadata`` (group, member): instance id, rack,
  client, subscription, rebalance timeout, server assignor, and for a member
  of the classic protocol its ``ClassicMemberMetadata`` (session timeout and
  supported protocols) as the tagged field 0, a nullable struct;
- 6 ``ConsumerGroupTargetAssignmentMetadata`` (group): the assignment epoch;
- 7 ``ConsumerGroupTargetAssignmentMember`` (group, member): its target;
- 8 ``ConsumerGroupCurrentMemberAssignment`` (group, member): member epoch,
  previous epoch, state, assigned partitions and those pending revocation;
- 16 ``ConsumerGroupRegularExpression`` (group, regular expression): the
  topics the expression resolved to, the version of the topic image it was
  resolved against and when.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from protocol.errors import CorruptRecordError
from protocol.readable import Readable

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

# The consumer group's record types (the key's leading int16).
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
_CONSUMER_GROUP_TYPES = (*range(CONSUMER_GROUP_METADATA, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT + 1),
                         CONSUMER_GROUP_REGULAR_EXPRESSION)
#: The types keyed by group and member (the others by group only).
_MEMBER_TYPES = (CONSUMER_GROUP_MEMBER_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                 CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT)
CONSUMER_GROUP_VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecordKey:
    """The key of a consumer group's record: its type, the group and (for a member's record) the member."""

    record_type: int
    group: str
    member_id: str | None = None
    #: The regular expression of a ConsumerGroupRegularExpression record.
    regex: str | None = None


#: Topic id → partitions, as a consumer group's assignments are written.
TopicPartitions = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    #: Partition → its replicas' racks (empty when no broker has a rack).
    partition_racks: tuple[tuple[int, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadataValue:
    """A classic-protocol member's JoinGroup: its session timeout and its protocols (name, metadata)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    #: Tagged field 0; None for a member of the consumer protocol.
    classic_member_metadata: ClassicMemberMetadataValue | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    partitions: TopicPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    #: Kafka's MemberState byte: 0 stable, 1 unrevoked partitions, 2 unreleased partitions.
    state: int
    assigned: TopicPartitions
    revoking: TopicPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    #: The version of the topic image the expression was resolved against.
    version: int
    #: When it was resolved (ms since the epoch).
    timestamp: int


ConsumerGroupValue = (ConsumerGroupMetadataValue | ConsumerGroupPartitionMetadataValue
                      | ConsumerGroupMemberMetadataValue | ConsumerGroupTargetAssignmentMetadataValue
                      | ConsumerGroupTargetAssignmentMemberValue | ConsumerGroupCurrentMemberAssignmentValue
                      | ConsumerGroupRegularExpressionValue)


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadataValue] = field(default_factory=list)


# ----------------------------------------------------------------- writing

class _Writer:
    def __init__(self, version: int | None) -> None:
        """``version``: the leading int16 (None: a nested struct, without one)."""
        self.out = bytearray() if version is None else bytearray(_I16.pack(version))

    def int16(self, v: int) -> None:
        self.out += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        self.int16(len(data))
        self.out += data

    def bytes_(self, v: bytes) -> None:
        self.int32(len(v))
        self.out += v

    # The flexible encoding's compact forms (lengths as an unsigned varint of length + 1).
    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def compact_string(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        self.uvarint(len(data) + 1)
        self.out += data

    def compact_array(self, n: int) -> None:
        self.uvarint(n + 1)

    def compact_bytes(self, v: bytes) -> None:
        self.uvarint(len(v) + 1)
        self.out += v

    def uuid(self, v: uuid.UUID) -> None:
        self.out += v.bytes

    def no_tagged_fields(self) -> None:
        self.uvarint(0)

    def topic_partitions(self, assignment: TopicPartitions) -> None:
        """Kafka's []TopicPartitions: topic id, its partitions (int32s), tagged fields; sorted, as
        the same assignment must always give the same bytes."""
        self.compact_array(len(assignment))
        for topic_id in sorted(assignment):
            partitions = sorted(assignment[topic_id])
            self.uuid(topic_id)
            self.compact_array(len(partitions))
            for p in partitions:
                self.int32(p)
            self.no_tagged_fields()


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = _Writer(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.int32(key.partition)
    return bytes(w.out)


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = _Writer(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return bytes(w.out)


def encode_consumer_group_key(key: ConsumerGroupRecordKey) -> bytes:
    w = _Writer(key.record_type)
    w.string(key.group)
    if key.record_type in _MEMBER_TYPES:
        w.string(key.member_id or "")
    elif key.record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        w.string(key.regex or "")
    return bytes(w.out)


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    """Version 0, flexible: the fields in schema order, then an empty tagged-field section."""
    w = _Writer(CONSUMER_GROUP_VALUE_VERSION)
    if isinstance(value, ConsumerGroupMetadataValue):
        w.int32(value.epoch)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        _write_partition_metadata(w, value)
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        _write_member_metadata(w, value)  # with its own tagged fields
        return bytes(w.out)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        w.topic_partitions(value.partitions)
    elif isinstance(value, ConsumerGroupRegularExpressionValue):
        w.compact_array(len(value.topics))
        for topic in value.topics:
            w.compact_string(topic)
        w.int64(value.version)
        w.int64(value.timestamp)
    else:
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.out.append(value.state & 0xFF)
        w.topic_partitions(value.assigned)
        w.topic_partitions(value.revoking)
    w.no_tagged_fields()
    return bytes(w.out)


def _write_partition_metadata(w: _Writer, value: ConsumerGroupPartitionMetadataValue) -> None:
    w.compact_array(len(value.topics))
    for topic in value.topics:
        w.uuid(topic.topic_id)
        w.compact_string(topic.topic_name)
        w.int32(topic.num_partitions)
        w.compact_array(len(topic.partition_racks))
        for partition, racks in topic.partition_racks:
            w.int32(partition)
            w.compact_array(len(racks))
            for rack in racks:
                w.compact_string(rack)
            w.no_tagged_fields()
        w.no_tagged_fields()


def _write_member_metadata(w: _Writer, value: ConsumerGroupMemberMetadataValue) -> None:
    w.compact_string(value.instance_id)
    w.compact_string(value.rack_id)
    w.compact_string(value.client_id)
    w.compact_string(value.client_host)
    w.compact_array(len(value.subscribed_topic_names))
    for name in value.subscribed_topic_names:
        w.compact_string(name)
    w.compact_string(value.subscribed_topic_regex)
    w.int32(value.rebalance_timeout_ms)
    w.compact_string(value.server_assignor)
    classic = value.classic_member_metadata
    if classic is None:
        w.no_tagged_fields()
        return
    struct_ = _Writer(None)
    struct_.int32(classic.session_timeout_ms)
    struct_.compact_array(len(classic.supported_protocols))
    for name, metadata in classic.supported_protocols:
        struct_.compact_string(name)
        struct_.compact_bytes(metadata)
        struct_.no_tagged_fields()
    struct_.no_tagged_fields()
    # One tagged field: tag 0, its size, then the nullable struct's presence marker (as an unsigned varint in a
    # tagged field) and the struct; the size counts the marker.
    w.uvarint(1)
    w.uvarint(0)
    w.uvarint(len(struct_.out) + 1)
    w.uvarint(1)
    w.out += struct_.out


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Version 3, or version 1 when the commit carries an explicit expire timestamp."""
    if value.expire_timestamp >= 0:
        w = _Writer(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE)
        w.int64(value.offset)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
        w.int64(value.expire_timestamp)
        return bytes(w.out)
    w = _Writer(OFFSET_COMMIT_VALUE_VERSION)
    w.int64(value.offset)
    w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    return bytes(w.out)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = _Writer(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.out)


# ----------------------------------------------------------------- reading

def _reader(data: bytes, flexible: bool = False) -> Readable:
    return Readable(data, CorruptRecordError, "__consumer_offsets record", flexible)


RecordKey = OffsetCommitKey | GroupMetadataKey | ConsumerGroupRecordKey


def decode_key(data: bytes) -> RecordKey:
    r = _reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupMetadataKey(r.string())
    if version in _CONSUMER_GROUP_TYPES:
        group = r.string()
        if version == CONSUMER_GROUP_REGULAR_EXPRESSION:
            return ConsumerGroupRecordKey(version, group, regex=r.string())
        return ConsumerGroupRecordKey(version, group, r.string() if version in _MEMBER_TYPES else None)
    raise CorruptRecordError(f"unknown __consumer_offsets key version {version}")


def decode_consumer_group_value(record_type: int, data: bytes) -> ConsumerGroupValue:
    """The value of a consumer group's record of ``record_type`` (version 0; a later version's
    fields are tagged ones, skipped)."""
    r = _reader(data, flexible=True)
    version = r.int16()
    if version != CONSUMER_GROUP_VALUE_VERSION:
        raise CorruptRecordError(f"unknown consumer group record value version {version} (type {record_type})")
    value: ConsumerGroupValue
    if record_type == CONSUMER_GROUP_METADATA:
        value = ConsumerGroupMetadataValue(r.int32())
    elif record_type == CONSUMER_GROUP_PARTITION_METADATA:
        value = ConsumerGroupPartitionMetadataValue(tuple(_read_topic_metadata(r) for _ in range(r.array_length())))
    elif record_type == CONSUMER_GROUP_MEMBER_METADATA:
        return _read_member_metadata(r)  # with its own tagged fields
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        value = ConsumerGroupTargetAssignmentMetadataValue(r.int32())
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        value = ConsumerGroupTargetAssignmentMemberValue(_read_topic_partitions(r))
    elif record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        topics = tuple(r.string() for _ in range(r.array_length()))
        value = ConsumerGroupRegularExpressionValue(topics, r.int64(), r.int64())
    else:
        member_epoch, previous = r.int32(), r.int32()
        state = r.take(1)[0]
        value = ConsumerGroupCurrentMemberAssignmentValue(member_epoch, previous, state - 256 if state > 127 else state,
                                                          _read_topic_partitions(r), _read_topic_partitions(r))
    r.skip_tagged_fields()
    return value


def _read_uuid(r: Readable) -> uuid.UUID:
    return uuid.UUID(bytes=r.take(16))


def _read_topic_metadata(r: Readable) -> TopicMetadata:
    topic_id, name, num_partitions = _read_uuid(r), r.string(), r.int32()
    racks = []
    for _ in range(r.array_length()):
        partition = r.int32()
        racks.append((partition, tuple(r.string() for _ in range(r.array_length()))))
        r.skip_tagged_fields()
    r.skip_tagged_fields()
    return TopicMetadata(topic_id, name, num_partitions, tuple(racks))


def _read_member_metadata(r: Readable) -> ConsumerGroupMemberMetadataValue:
    instance_id, rack_id = r.nullable_string(), r.nullable_string()
    client_id, client_host = r.string(), r.string()
    names = tuple(r.string() for _ in range(r.array_length()))
    regex = r.nullable_string()
    rebalance_timeout_ms, server_assignor = r.int32(), r.nullable_string()
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag != 0:
            r.take(size)
            continue
        end = r.pos + size
        if r.uvarint() > 0:  # the nullable struct's presence marker
            classic = _read_classic_member_metadata(r)
        if r.pos != end:
            raise CorruptRecordError("ClassicMemberMetadata: its size does not match its fields")
    return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, names, regex,
                                            rebalance_timeout_ms, server_assignor, classic)


def _read_classic_member_metadata(r: Readable) -> ClassicMemberMetadataValue:
    session_timeout_ms = r.int32()
    protocols = []
    for _ in range(r.array_length()):
        name, metadata = r.string(), r.bytes_()
        r.skip_tagged_fields()
        protocols.append((name, metadata))
    r.skip_tagged_fields()
    return ClassicMemberMetadataValue(session_timeout_ms, tuple(protocols))


def _read_topic_partitions(r: Readable) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(r.array_length()):
        topic_id = _read_uuid(r)
        out[topic_id] = frozenset(r.int32() for _ in range(r.array_length()))
        r.skip_tagged_fields()
    return out


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    version = _I16.unpack_from(data)[0] if len(data) >= 2 else -1
    if not 0 <= version <= 4:
        raise CorruptRecordError(f"unknown OffsetCommitValue version {version}")
    r = _reader(data, flexible=version >= 4)
    r.pos = 2
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.skip_tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    version = _I16.unpack_from(data)[0] if len(data) >= 2 else -1
    if not 0 <= version <= 4:
        raise CorruptRecordError(f"unknown GroupMetadataValue version {version}")
    r = _reader(data, flexible=version >= 4)
    r.pos = 2
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tagged_fields()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout  # v0 had one timeout for both
        members.append(MemberMetadataValue(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                           session_timeout, subscription, assignment))
    r.skip_tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp, members)
