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
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from protocol.errors import CorruptRecordError
from protocol.readable import Readable

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

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
    def __init__(self, version: int) -> None:
        self.out = bytearray(_I16.pack(version))

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


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    r = _reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupMetadataKey(r.string())
    raise CorruptRecordError(f"unknown __consumer_offsets key version {version}")


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
