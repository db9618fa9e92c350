"""LogValidator's conversion path for Produce v0-v2 (``storage.log_conversion``):
message sets written by kafka-python's independent legacy builder."""

from __future__ import annotations

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from protocol import compression
from protocol.record_batch import parse_batch_header
from protocol.records import Record, build_batch, read_batch
from storage.errors import InvalidTimestampError, RecordTooLargeError
from storage.log_config import LogConfig
from storage.log_conversion import convert_for_append

NOW = 1_700_000_000_000


def _set(magic: int, codec: int, timestamps: list[int], value: bytes = b"v") -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 22)
    for i, ts in enumerate(timestamps):
        builder.append(i, timestamp=ts, key=b"k%d" % i, value=value)
    return bytes(builder.build())


def test_a_message_set_becomes_one_v2_batch_with_its_codec_and_timestamps() -> None:
    batch = convert_for_append(memoryview(_set(1, compression.SNAPPY, [NOW, NOW - 5, NOW + 3])), LogConfig(), NOW)
    header = parse_batch_header(batch)
    assert (header.compression_type, header.records_count, header.max_timestamp) == (compression.SNAPPY, 3, NOW + 3)
    _, records = read_batch(batch, 0)
    assert [(r.offset, r.key, r.timestamp) for r in records] == [(0, b"k0", NOW), (1, b"k1", NOW - 5), (2, b"k2", NOW + 3)]


def test_a_v2_batch_passes_unchanged_and_writable() -> None:
    batch = bytes(build_batch([Record(0, NOW, b"k", b"v")]))
    converted = convert_for_append(memoryview(batch), LogConfig(), NOW)
    assert bytes(converted) == batch and isinstance(converted, bytearray)


def test_no_whole_message_appends_nothing() -> None:
    whole = _set(0, compression.NONE, [NOW])
    assert convert_for_append(memoryview(whole[:20]), LogConfig(), NOW) == b""
    assert convert_for_append(bytearray(), LogConfig(), NOW) == b""


def test_every_message_timestamp_is_checked_on_create_time_topics_only() -> None:
    # The middle message is a day old: a batch header check (first and max) would not see it.
    stale = _set(1, compression.GZIP, [NOW, NOW - 86_400_000, NOW])
    strict = LogConfig(message_timestamp_before_max_ms=3_600_000)
    with pytest.raises(InvalidTimestampError):
        convert_for_append(memoryview(stale), strict, NOW)
    lat = LogConfig(message_timestamp_before_max_ms=3_600_000, message_timestamp_type="LogAppendTime")
    assert parse_batch_header(convert_for_append(memoryview(stale), lat, NOW)).records_count == 3


def test_each_message_is_held_to_max_message_bytes_before_conversion() -> None:
    big = _set(0, compression.NONE, [-1, -1], value=b"x" * 2000)
    with pytest.raises(RecordTooLargeError):
        convert_for_append(memoryview(big), LogConfig(max_message_bytes=1500), NOW)
    assert parse_batch_header(convert_for_append(memoryview(big), LogConfig(max_message_bytes=3000), NOW)).records_count == 2
