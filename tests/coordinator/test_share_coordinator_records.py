"""__share_group_state records in Kafka's byte formats (ShareSnapshotKey/Value v0, ShareUpdateKey/Value v0)."""

from __future__ import annotations

import struct
import uuid

import pytest

from coordinator.share.persister import PersisterStateBatch, RecordState
from coordinator.share.share_coordinator_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    SharePartitionKey,
    ShareRecordKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from protocol.errors import CorruptRecordError

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")
KEY = SharePartitionKey("grp", TOPIC, 7)
BATCHES = (PersisterStateBatch(100, 109, RecordState.ACKNOWLEDGED, 1),
           PersisterStateBatch(110, 110, RecordState.ARCHIVED, 5))


def test_keys_are_record_type_then_group_topic_partition() -> None:
    tail = b"\x00\x03grp" + TOPIC.bytes + b"\x00\x00\x00\x07"
    assert encode_key(SHARE_SNAPSHOT, KEY) == b"\x00\x00" + tail
    assert encode_key(SHARE_UPDATE, KEY) == b"\x00\x01" + tail
    assert decode_key(b"\x00\x01" + tail) == ShareRecordKey(SHARE_UPDATE, KEY)


def _batches_bytes() -> bytes:
    out = b"\x03"  # compact array of 2
    for first, last, state, count in ((100, 109, 2, 1), (110, 110, 4, 5)):
        out += struct.pack(">qqbh", first, last, state, count) + b"\x00"
    return out


def test_snapshot_value_bytes_follow_the_schema() -> None:
    value = ShareSnapshotValue(3, 2, 9, 100, 1_000, 2_000, BATCHES)
    expected = (b"\x00\x00" + struct.pack(">iiiqqq", 3, 2, 9, 100, 1_000, 2_000) + _batches_bytes() + b"\x00")
    assert encode_value(value) == expected
    assert decode_value(SHARE_SNAPSHOT, expected) == value


def test_update_value_bytes_follow_the_schema() -> None:
    value = ShareUpdateValue(70_000, -1, -1, BATCHES)  # the snapshot epoch is an int32 (Kafka 4.1)
    expected = b"\x00\x00" + struct.pack(">iiq", 70_000, -1, -1) + _batches_bytes() + b"\x00"
    assert encode_value(value) == expected
    assert decode_value(SHARE_UPDATE, expected) == value


def test_unknown_tagged_fields_of_a_later_kafka_are_skipped() -> None:
    value = ShareUpdateValue(1, 4, 50, ())
    data = encode_value(value)[:-1] + b"\x01\x05\x02\xab\xcd"  # one tagged field, tag 5, 2 bytes
    assert decode_value(SHARE_UPDATE, data) == value


@pytest.mark.parametrize("data", [b"\x00\x02\x00\x01g" + bytes(20), b"\x00\x00\x00"])
def test_bad_keys_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_key(data)


def test_an_unknown_value_version_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decode_value(SHARE_SNAPSHOT, b"\x00\x01" + encode_value(ShareUpdateValue(0, 0, 0, ()))[2:])


def test_coordinator_key_is_group_base64_topic_partition() -> None:
    # Kafka's Uuid.toString: URL-safe base64 without padding.
    assert KEY.coordinator_key() == "grp:ASNFZ4mrze8BI0VniavN7w:7"
