"""The records of ``__share_group_state``: ShareSnapshot and ShareUpdate, in Kafka's formats.

Kafka's ShareSnapshotKey/Value and ShareUpdateKey/Value schemas, framed as
every coordinator record is: the key starts with its record type as an int16
(ShareSnapshot 0, ShareUpdate 1), then the key's fields in the non-flexible
encoding (group id string, topic id uuid, partition int32); the value starts
with its version as an int16 (0 for both), then the value's fields in the
flexible encoding (compact arrays, tagged fields). The snapshot epoch is an
int32, as Kafka 4.1 made it.

* ShareSnapshot: the whole state of one share partition (snapshot epoch,
  state epoch, leader epoch, start offset, creation and write times, every
  state batch).
* ShareUpdate: a delta on the latest snapshot (leader epoch, start offset or
  -1 when unchanged, the batches written).

A null value (tombstone) deletes the key. Tagged fields a later Kafka adds to
a value are skipped on read.
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass

from coordinator.share.persister import PersisterStateBatch
from protocol.errors import CorruptRecordError
from protocol.readable import Readable

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1
#: The version of both values.
SHARE_VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """A share partition: its group, topic and partition (Kafka's SharePartitionKey)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """``groupId:topicId:partition``: FindCoordinator's SHARE key, and what places the state in
        ``__share_group_state`` (the topic id in Kafka's base64 form)."""
        return f"{self.group_id}:{kafka_uuid_string(self.topic_id)}:{self.partition}"


def kafka_uuid_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


@dataclass(frozen=True, slots=True)
class ShareRecordKey:
    record_type: int
    key: SharePartitionKey


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[PersisterStateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    #: -1: the start offset is not changed by this update.
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]


ShareValue = ShareSnapshotValue | ShareUpdateValue


# ----------------------------------------------------------------- writing

def _uvarint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def encode_key(record_type: int, key: SharePartitionKey) -> bytes:
    group = key.group_id.encode("utf-8")
    if len(group) > 0x7FFF:
        raise ValueError("group id longer than 32767 bytes")
    return (_I16.pack(record_type) + _I16.pack(len(group)) + group + key.topic_id.bytes
            + _I32.pack(key.partition))


def _write_batches(out: bytearray, batches: tuple[PersisterStateBatch, ...]) -> None:
    _uvarint(out, len(batches) + 1)
    for b in batches:
        out += _I64.pack(b.first_offset) + _I64.pack(b.last_offset)
        out += _I8.pack(b.delivery_state) + _I16.pack(b.delivery_count)
        _uvarint(out, 0)


def encode_value(value: ShareValue) -> bytes:
    out = bytearray(_I16.pack(SHARE_VALUE_VERSION))
    out += _I32.pack(value.snapshot_epoch)
    if isinstance(value, ShareSnapshotValue):
        out += _I32.pack(value.state_epoch) + _I32.pack(value.leader_epoch) + _I64.pack(value.start_offset)
        out += _I64.pack(value.create_timestamp) + _I64.pack(value.write_timestamp)
    else:
        out += _I32.pack(value.leader_epoch) + _I64.pack(value.start_offset)
    _write_batches(out, value.state_batches)
    _uvarint(out, 0)
    return bytes(out)


def share_record(record_type: int, key: SharePartitionKey, value: ShareValue | None) -> tuple[bytes, bytes | None]:
    """A (key, value) pair for the log; a None value is the key's tombstone."""
    return encode_key(record_type, key), None if value is None else encode_value(value)


# ----------------------------------------------------------------- reading

def decode_key(data: bytes) -> ShareRecordKey:
    r = Readable(data, CorruptRecordError, "__share_group_state record key")
    record_type = r.int16()
    if record_type not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        raise CorruptRecordError(f"unknown __share_group_state record type {record_type}")
    group = r.string()
    topic_id = uuid.UUID(bytes=r.take(16))
    return ShareRecordKey(record_type, SharePartitionKey(group, topic_id, r.int32()))


def _read_batches(r: Readable) -> tuple[PersisterStateBatch, ...]:
    batches = []
    for _ in range(r.array_length()):
        first, last = r.int64(), r.int64()
        state = _I8.unpack(r.take(1))[0]
        batches.append(PersisterStateBatch(first, last, state, r.int16()))
        r.skip_tagged_fields()
    return tuple(batches)


def decode_value(record_type: int, data: bytes) -> ShareValue:
    r = Readable(data, CorruptRecordError, "__share_group_state record value", flexible=True)
    version = r.int16()
    if version != SHARE_VALUE_VERSION:
        raise CorruptRecordError(f"unknown __share_group_state value version {version} (type {record_type})")
    snapshot_epoch = r.int32()
    value: ShareValue
    if record_type == SHARE_SNAPSHOT:
        state_epoch, leader_epoch, start_offset = r.int32(), r.int32(), r.int64()
        created, written = r.int64(), r.int64()
        value = ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start_offset, created, written,
                                   _read_batches(r))
    else:
        leader_epoch, start_offset = r.int32(), r.int64()
        value = ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, _read_batches(r))
    r.skip_tagged_fields()
    return value
