"""RecordBatch v2 header: layout, attributes, CRC32C, patching, legacy formats."""

from __future__ import annotations

import struct

import pytest
from kafka.record._crc32c import crc as reference_crc32c  # pure-Python, independent of ours
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol import compression
from protocol.errors import CorruptRecordError, ErrorCode, ProtocolError, UnsupportedRecordFormatError
from protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    LOG_OVERHEAD,
    build_batch_header,
    is_crc_valid,
    iter_batch_headers,
    last_offset_delta_and_timestamps,
    parse_batch_header,
    patch_base_offset,
    patch_base_offset_and_epoch,
    patch_max_timestamp,
    patch_partition_leader_epoch,
    peek_offset_and_length,
    validate_batch,
)
from protocol.records import Record, build_batch, iter_records


def _kafka_python_batch(codec: int = 0, **producer) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=producer.get("is_transactional", False),
        producer_id=producer.get("producer_id", -1), producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1), batch_size=1 << 20,
    )
    builder.append(0, 1_000, b"k", b"v" * 100, [])
    builder.append(1, 3_000, None, b"v" * 100, [("h", b"x")])
    builder.append(4, 2_000, b"k", None, [])
    return builder.build()


def test_layout_matches_kafka_python() -> None:
    assert BATCH_HEADER_SIZE == DefaultRecordBatch.HEADER_STRUCT.size == 61
    assert CRC_OFFSET == DefaultRecordBatch.CRC_OFFSET
    assert ATTRIBUTES_OFFSET == DefaultRecordBatch.ATTRIBUTES_OFFSET
    assert LOG_OVERHEAD == DefaultRecordBatch.AFTER_LEN_OFFSET


@pytest.mark.parametrize("codec", [compression.NONE, compression.LZ4])
def test_header_fields_of_a_kafka_python_batch(codec: int) -> None:
    built = _kafka_python_batch(codec, producer_id=11, producer_epoch=2, base_sequence=30, is_transactional=True)
    patch_base_offset(built, 0, 123_456)
    patch_partition_leader_epoch(built, 0, 7)
    theirs = DefaultRecordBatch(bytes(built))
    header = validate_batch(built)
    assert header.base_offset == theirs.base_offset == 123_456
    assert header.size_in_bytes == theirs.size_in_bytes == len(built)
    assert header.partition_leader_epoch == theirs.leader_epoch == 7
    assert header.magic == 2 and header.crc == theirs.crc
    assert header.attributes == theirs.attributes
    assert header.compression_type == theirs.compression_type == codec
    assert header.is_transactional and theirs.is_transactional
    assert header.last_offset_delta == theirs.last_offset_delta == 4
    assert header.last_offset == theirs.last_offset == 123_460
    assert header.next_offset == theirs.next_offset == 123_461
    assert header.base_timestamp == theirs.first_timestamp == 1_000
    assert header.max_timestamp == theirs.max_timestamp == 3_000
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (11, 2, 30)
    assert header.last_sequence == theirs.last_sequence == 34
    assert header.records_count == theirs.records_count == 3
    assert last_offset_delta_and_timestamps(built) == (theirs.last_offset_delta, theirs.first_timestamp,
                                                      theirs.max_timestamp)


def test_offset_and_epoch_in_one_patch_equal_the_two_patches() -> None:
    """The leader's single pack leaves the bytes exactly as the two separate patches do."""
    one = _kafka_python_batch(compression.NONE, producer_id=11, producer_epoch=2, base_sequence=30)
    two = bytearray(one)
    length = validate_batch(one).batch_length
    patch_base_offset_and_epoch(one, 0, 1 << 40, length, 9)
    patch_base_offset(two, 0, 1 << 40)
    patch_partition_leader_epoch(two, 0, 9)
    assert one == two
    header = validate_batch(one)  # the CRC still holds
    assert (header.base_offset, header.batch_length, header.partition_leader_epoch) == (1 << 40, length, 9)


def test_crc_is_crc32c_of_attributes_to_end() -> None:
    built = build_batch([Record(0, 5, b"a", b"b"), Record(1, 6, None, b"c")], compression=compression.GZIP)
    header = parse_batch_header(built)
    assert header.crc == reference_crc32c(bytes(built[ATTRIBUTES_OFFSET:]))
    assert is_crc_valid(built)


@pytest.mark.parametrize(
    ("kwargs", "bits"),
    [
        ({"compression": compression.ZSTD}, 0x04),
        ({"compression": compression.SNAPPY, "timestamp_type": 1}, 0x0A),
        ({"is_transactional": True, "producer_id": 1, "producer_epoch": 0}, 0x10),
        ({"is_control": True}, 0x20),
        ({"delete_horizon_ms": 77}, 0x40),
        ({"compression": compression.LZ4, "is_transactional": True, "is_control": True}, 0x33),
    ],
)
def test_attribute_bits(kwargs: dict, bits: int) -> None:
    built = build_batch([Record(0, 5, b"a", b"b")], **kwargs)
    header = validate_batch(built)
    assert header.attributes == bits
    theirs = DefaultRecordBatch(bytes(built))
    assert theirs.compression_type == header.compression_type == bits & 0x07
    assert theirs.timestamp_type == header.timestamp_type == (bits >> 3) & 1
    assert theirs.is_transactional == header.is_transactional == bool(bits & 0x10)
    assert theirs.is_control_batch == header.is_control == bool(bits & 0x20)
    assert header.has_delete_horizon == bool(bits & 0x40)


def test_base_offset_and_leader_epoch_patches_keep_the_crc() -> None:
    built = build_batch([Record(0, 5, b"a", b"b")])
    patch_base_offset(built, 0, 1 << 40)
    patch_partition_leader_epoch(built, 0, 12)
    header = validate_batch(built)
    assert header.base_offset == 1 << 40 and header.partition_leader_epoch == 12
    assert [r.offset for r in iter_records(built)] == [1 << 40]


def test_patch_max_timestamp_sets_log_append_time_and_rechecksums() -> None:
    log = build_batch([Record(0, 1, None, b"x")]) + build_batch([Record(1, 5, None, b"a"), Record(2, 9, None, b"b")], base_offset=1)
    position, header = list(iter_batch_headers(log))[1]
    patch_max_timestamp(log, position, header.size_in_bytes, 4242, 1)
    header = validate_batch(log, position)
    assert header.timestamp_type == 1 and header.max_timestamp == 4242
    assert [r.timestamp for r in iter_records(log, position)] == [4242, 4242]
    assert [r.timestamp for r in DefaultRecordBatch(bytes(log[position:]))] == [4242, 4242]
    patch_max_timestamp(log, position, header.size_in_bytes, 9, 0)
    header = validate_batch(log, position)
    assert header.timestamp_type == 0
    assert [r.timestamp for r in iter_records(log, position)] == [5, 9]


def test_last_sequence_wraps_like_kafka() -> None:
    records = [Record(i, 0, None, b"") for i in range(3)]
    built = build_batch(records, producer_id=1, producer_epoch=0, base_sequence=0x7FFFFFFF - 1)
    assert parse_batch_header(built).last_sequence == 0
    assert DefaultRecordBatch(bytes(built)).last_sequence == 0
    assert parse_batch_header(build_batch(records)).last_sequence == -1


def test_iter_batch_headers_stops_at_a_partial_batch() -> None:
    batches = [build_batch([Record(i, i, None, b"v" * i)], base_offset=i) for i in range(3)]
    log = b"".join(batches)
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [(pos, h.base_offset) for pos, h in iter_batch_headers(log)] == list(zip(positions, range(3), strict=True))
    for cut in (1, 11, 12, 30, 61, len(batches[2]) - 1):
        assert len(list(iter_batch_headers(log[:-cut]))) == 2
    assert len(list(iter_batch_headers(log, positions[1], positions[2]))) == 1
    assert peek_offset_and_length(log, positions[2]) == (2, len(batches[2]) - LOG_OVERHEAD)


def _legacy_message_set(magic: int) -> bytes:
    """One v0/v1 message (offset, size, crc, magic, attributes, [timestamp], key, value)."""
    body = bytes((magic, 0)) + (struct.pack(">q", 0) if magic == 1 else b"") + struct.pack(">i", -1) + struct.pack(">i", 3) + b"abc"
    message = struct.pack(">I", reference_crc32c(body)) + body
    return struct.pack(">qi", 0, len(message)) + message + bytes(40)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_are_refused_with_invalid_record(magic: int) -> None:
    legacy = _legacy_message_set(magic)
    for check in (parse_batch_header, validate_batch, iter_records):
        with pytest.raises(UnsupportedRecordFormatError) as info:
            check(legacy)
        # Kafka 4 answers a produce of v0/v1 data with INVALID_RECORD (KIP-724).
        assert info.value.error_code == ErrorCode.INVALID_RECORD
        assert isinstance(info.value, ProtocolError)
    with pytest.raises(UnsupportedRecordFormatError):
        list(iter_batch_headers(legacy))


def _header_with(**fields: int) -> bytearray:
    built = build_batch([Record(0, 0, None, b"v")])
    offsets = {"batch_length": (8, ">i"), "last_offset_delta": (23, ">i"), "records_count": (57, ">i"), "magic": (16, ">b")}
    for name, value in fields.items():
        position, fmt = offsets[name]
        struct.pack_into(fmt, built, position, value)
    return built


@pytest.mark.parametrize(
    "fields",
    [
        {"magic": 3},
        {"magic": -1},
        {"batch_length": 48},  # below the header's own size
        {"batch_length": -5},
        {"last_offset_delta": -1},
        {"records_count": -1},
    ],
)
def test_impossible_headers_are_corrupt(fields: dict) -> None:
    with pytest.raises(CorruptRecordError):
        parse_batch_header(_header_with(**fields))


def test_short_input_is_corrupt() -> None:
    built = build_batch([Record(0, 0, None, b"v")])
    for size in (0, 5, 11, 16, 17, 60):
        with pytest.raises(CorruptRecordError):
            parse_batch_header(built[:size])
    with pytest.raises(CorruptRecordError, match="claims"):
        validate_batch(built[:-1])
    assert not is_crc_valid(built[:-1])
    with pytest.raises(CorruptRecordError):
        peek_offset_and_length(built[:11])


def test_build_batch_header_checks_the_records_size() -> None:
    with pytest.raises(ValueError):
        build_batch_header(
            base_offset=0, records_size=3, attributes=0, last_offset_delta=0,
            base_timestamp=0, max_timestamp=0, records_count=0, records=b"ab",
        )
