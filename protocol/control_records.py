"""Control records: the COMMIT/ABORT markers the transaction coordinator writes.

A control batch (attributes bit 5) holds records whose key is::

    version  int16  (0)
    type     int16  ABORT = 0, COMMIT = 1, then Kafka's KRaft types

and, for ABORT/COMMIT, whose value is an EndTransactionMarker::

    version           int16  (0)
    coordinatorEpoch  int32

Readers accept newer key/value versions by reading the fields they know, as
Kafka does; negative versions and short keys/values are corrupt.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from protocol.errors import CorruptRecordError
from protocol.record_batch import NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE
from protocol.records import Record, build_batch

CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
CONTROL_RECORD_KEY_SIZE = 4
END_TXN_MARKER_VALUE_SIZE = 6

_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    """Kafka's ControlRecordType ids (org.apache.kafka.common.record)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class EndTransactionMarker(NamedTuple):
    control_type: ControlRecordType  # ABORT or COMMIT
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type == ControlRecordType.COMMIT


def encode_control_key(control_type: int, version: int = CONTROL_RECORD_KEY_VERSION) -> bytes:
    return _KEY.pack(version, control_type)


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """(version, type id) of a control record's key; the type may be one we do not know."""
    if key is None or len(key) < CONTROL_RECORD_KEY_SIZE:
        raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes is too short")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    return version, type_id


def encode_end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _MARKER.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def end_txn_marker_record(
    *, commit: bool, coordinator_epoch: int, offset: int = 0, timestamp: int
) -> Record:
    control_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return Record(
        offset, timestamp, encode_control_key(control_type), encode_end_txn_marker_value(coordinator_epoch)
    )


def parse_end_txn_marker(record: Record) -> EndTransactionMarker:
    """The marker a COMMIT/ABORT control record carries."""
    _, type_id = parse_control_key(record.key)
    if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise CorruptRecordError(f"control record type {type_id} is not an end transaction marker")
    value = record.value
    if value is None or len(value) < END_TXN_MARKER_VALUE_SIZE:
        raise CorruptRecordError(
            f"end transaction marker value of {0 if value is None else len(value)} bytes is too short"
        )
    version, coordinator_epoch = _MARKER.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"invalid end transaction marker version {version}")
    return EndTransactionMarker(ControlRecordType(type_id), coordinator_epoch)


def build_end_txn_marker_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """A one-record transactional control batch, as Kafka's withEndTransactionMarker builds it."""
    record = end_txn_marker_record(
        commit=commit, coordinator_epoch=coordinator_epoch, offset=base_offset, timestamp=timestamp
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
