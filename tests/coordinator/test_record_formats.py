"""__consumer_offsets keys and values in Kafka's byte formats, and the coordinator's partition hash."""

from __future__ import annotations

import struct

import pytest

from coordinator.common.partitioner import java_string_hash, kafka_abs, partition_for
from coordinator.group.record_formats import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from protocol.errors import CorruptRecordError


def test_offset_commit_key_is_version_1_group_topic_partition() -> None:
    data = encode_offset_commit_key(OffsetCommitKey("g", "t", 7))
    assert data == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x07"
    assert decode_key(data) == OffsetCommitKey("g", "t", 7)
    # Version 0 keys (older brokers) read the same way.
    assert decode_key(b"\x00\x00" + data[2:]) == OffsetCommitKey("g", "t", 7)


def test_group_metadata_key_is_version_2() -> None:
    data = encode_group_metadata_key(GroupMetadataKey("grp"))
    assert data == b"\x00\x02\x00\x03grp"
    assert decode_key(data) == GroupMetadataKey("grp")


def test_offset_commit_value_version_3_layout() -> None:
    value = OffsetCommitValue(offset=42, metadata="meta", commit_timestamp=1234, leader_epoch=5)
    data = encode_offset_commit_value(value)
    assert data == struct.pack(">hqih4sq", 3, 42, 5, 4, b"meta", 1234)
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_with_expire_timestamp_is_version_1() -> None:
    value = OffsetCommitValue(offset=1, metadata="", commit_timestamp=10, expire_timestamp=99)
    data = encode_offset_commit_value(value)
    assert data == struct.pack(">hqhqq", 1, 1, 0, 10, 99)
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_versions_0_2_and_flexible_4() -> None:
    v0 = struct.pack(">hqh2sq", 0, 7, 2, b"md", 55)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(7, "md", 55)
    v2 = struct.pack(">hqh2sq", 2, 7, 2, b"md", 55)
    assert decode_offset_commit_value(v2) == OffsetCommitValue(7, "md", 55)
    # v4: compact string (length + 1 as a varint) and an empty tagged-field section.
    v4 = struct.pack(">hqi", 4, 7, 3) + bytes([3]) + b"md" + struct.pack(">q", 55) + b"\x00"
    assert decode_offset_commit_value(v4) == OffsetCommitValue(7, "md", 55, leader_epoch=3)


def _group_value() -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type="consumer", generation=3, protocol="range", leader="m-1", current_state_timestamp=777,
        members=[MemberMetadataValue("m-1", "instance-a", "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
                 MemberMetadataValue("m-2", None, "client", "/127.0.0.1", 30000, 10000, b"", b"")])


def test_group_metadata_value_version_3_round_trip() -> None:
    data = encode_group_metadata_value(_group_value())
    assert data[:2] == b"\x00\x03"
    assert decode_group_metadata_value(data) == _group_value()


def test_group_metadata_value_version_0_layout() -> None:
    member = (struct.pack(">h1s", 1, b"m") + struct.pack(">h1s", 1, b"c") + struct.pack(">h1s", 1, b"h")
              + struct.pack(">i", 6000) + struct.pack(">i1s", 1, b"s") + struct.pack(">i1s", 1, b"a"))
    data = (struct.pack(">h", 0) + struct.pack(">h8s", 8, b"consumer") + struct.pack(">i", 2)
            + struct.pack(">h5s", 5, b"range") + struct.pack(">h1s", 1, b"m") + struct.pack(">i", 1) + member)
    value = decode_group_metadata_value(data)
    assert value.generation == 2 and value.protocol == "range" and value.current_state_timestamp == -1
    assert value.members == [MemberMetadataValue("m", None, "c", "h", 6000, 6000, b"s", b"a")]


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("consumer", 4, None, None, 5, [])
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x05\x00\x01g", b"\x00\x01\x00\x05ab"])
def test_bad_keys_raise_corrupt_record(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_key(data)


def test_truncated_values_raise_corrupt_record() -> None:
    data = encode_group_metadata_value(_group_value())
    for cut in (1, 5, len(data) // 2, len(data) - 1):
        with pytest.raises(CorruptRecordError):
            decode_group_metadata_value(data[:cut])
    with pytest.raises(CorruptRecordError):
        decode_offset_commit_value(b"\x00\x09" + bytes(20))


def test_java_string_hash_code() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("my-group") == -1906497762
    assert java_string_hash("\u00e9t\u00e9") == (0xE9 * 31 + ord("t")) * 31 + 0xE9  # UTF-16 units, not UTF-8
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # a surrogate pair counts twice
    # A famous string whose hashCode is Integer.MIN_VALUE: Utils.abs maps it to 0.
    assert java_string_hash("polygenelubricants") == -(1 << 31)


def test_partition_for_uses_kafka_utils_abs() -> None:
    assert kafka_abs(-(1 << 31)) == 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("my-group", 50) == 1906497762 % 50
    assert partition_for("hello", 7) == 99162322 % 7
