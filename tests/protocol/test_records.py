"""Records inside a batch: round trips, kafka-python interop, control records, corruption."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from protocol import compression
from protocol.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_txn_marker_batch,
    encode_control_key,
    parse_control_key,
    parse_end_txn_marker,
)
from protocol.errors import CorruptRecordError
from protocol.record_batch import (
    BATCH_HEADER_SIZE,
    NO_TIMESTAMP,
    build_batch_header,
    parse_batch_header,
    patch_base_offset,
    validate_batch,
)
from protocol.records import Record, build_batch, encode_varint, iter_records, read_batch

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
INT64_MAX = (1 << 63) - 1


# ---------------------------------------------------------------- strategies

headers_st = st.lists(
    st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=24)), max_size=3
)
timestamps_st = st.one_of(
    st.integers(-1, 1 << 45),  # realistic: epoch milliseconds, or NO_TIMESTAMP
    st.integers(-(1 << 61), 1 << 61),  # anything whose deltas still fit an int64
)


@st.composite
def record_lists(draw: st.DrawFn, max_records: int = 8) -> tuple[int, list[Record]]:
    base_offset = draw(st.integers(0, 1 << 50))
    count = draw(st.integers(0, max_records))
    offset = base_offset + draw(st.integers(0, 1000))  # a compacted batch may start with a gap
    records = []
    for _ in range(count):
        records.append(
            Record(
                offset,
                draw(timestamps_st),
                draw(st.none() | st.binary(max_size=40)),
                draw(st.none() | st.binary(max_size=300)),
                draw(headers_st),
            )
        )
        offset += draw(st.integers(1, 1 << 20))
    return base_offset, records


def _from_kafka_python(record) -> Record:
    return Record(record.offset, record.timestamp, record.key, record.value, list(record.headers))


# ---------------------------------------------------------------- round trips

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists(), st.sampled_from(CODECS))
def test_round_trip_property(batch: tuple[int, list[Record]], codec: int) -> None:
    base_offset, records = batch
    built = build_batch(records, base_offset=base_offset, compression=codec)
    header = validate_batch(built)
    assert header.compression_type == codec
    assert header.records_count == len(records)
    assert list(iter_records(built, verify_crc=True)) == records
    if records:
        assert header.last_offset == records[-1].offset
        assert header.base_timestamp == records[0].timestamp
        assert header.max_timestamp == max(r.timestamp for r in records)


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_edge_cases(codec: int) -> None:
    base = 1 << 50
    records = [
        Record(base + 3, 1_700_000_000_000, None, None),
        Record(base + 4, 1_600_000_000_000, b"", b""),  # negative timestamp delta
        Record(base + 90, INT64_MAX - 5, b"k" * 200, None, [("h", None), ("", b""), ("ключ", b"v")]),
        Record(base + 91, -1, None, b"v" * 70_000, [("a", b"x" * 300)] * 3),  # multi-byte lengths
        Record(base + (1 << 31) - 1, -(1 << 40), b"last", b"record"),  # the largest offset delta
    ]
    built = build_batch(records, base_offset=base, compression=codec)
    assert list(iter_records(built, verify_crc=True)) == records
    header = parse_batch_header(built)
    assert header.last_offset_delta == (1 << 31) - 1


def test_iter_records_reads_a_batch_inside_a_larger_buffer() -> None:
    first = build_batch([Record(0, 5, b"a", b"1")])
    second = build_batch([Record(1, 6, b"b", b"2"), Record(2, 7, None, b"3")], base_offset=1, compression=compression.LZ4)
    log = bytes(first + second)
    assert list(iter_records(log, len(first), verify_crc=True)) == [Record(1, 6, b"b", b"2"), Record(2, 7, None, b"3")]
    assert list(iter_records(memoryview(log))) == [Record(0, 5, b"a", b"1")]


def test_log_append_time_batches_report_max_timestamp_for_every_record() -> None:
    records = [Record(0, 100, None, b"a"), Record(1, 300, None, b"b"), Record(2, 200, None, b"c")]
    built = build_batch(records, timestamp_type=1, log_append_time=999)
    header = validate_batch(built)
    assert header.timestamp_type == 1 and header.max_timestamp == 999
    assert [r.timestamp for r in iter_records(built)] == [999, 999, 999]
    assert [r.timestamp for r in DefaultRecordBatch(bytes(built))] == [999, 999, 999]
    # Without an explicit append time the batch's maxTimestamp is still the max.
    assert [r.timestamp for r in iter_records(build_batch(records, timestamp_type=1))] == [300] * 3


def test_delete_horizon_is_the_base_timestamp_and_keeps_record_timestamps() -> None:
    records = [Record(10, 1000, b"k", None), Record(12, 2000, b"j", b"v")]
    built = build_batch(records, base_offset=10, delete_horizon_ms=5000)
    header = validate_batch(built)
    assert header.has_delete_horizon and header.delete_horizon_ms == 5000
    assert header.base_timestamp == 5000
    assert list(iter_records(built)) == records


def test_last_offset_delta_can_extend_past_the_last_record() -> None:
    built = build_batch([Record(100, 1, b"k", b"v")], base_offset=100, last_offset_delta=9)
    header = validate_batch(built)
    assert header.last_offset == 109 and header.records_count == 1
    empty = build_batch([], base_offset=50, last_offset_delta=4, producer_id=3, producer_epoch=1, base_sequence=7)
    header = validate_batch(empty)
    assert (header.records_count, header.last_offset, header.base_timestamp) == (0, 54, NO_TIMESTAMP)
    assert list(iter_records(empty)) == []


def test_producer_fields_and_flags() -> None:
    built = build_batch(
        [Record(0, 1, None, b"x")], producer_id=77, producer_epoch=3, base_sequence=12,
        is_transactional=True, partition_leader_epoch=8, compression=compression.ZSTD,
    )
    header = validate_batch(built)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 12)
    assert header.is_transactional and not header.is_control
    assert header.partition_leader_epoch == 8


def test_header_keys_that_are_not_utf8_survive_a_round_trip() -> None:
    raw_key = b"\xff\xfeabc"
    body = bytearray(b"\x00") + encode_varint(0) + encode_varint(0) + encode_varint(-1) + encode_varint(-1)
    body += encode_varint(1) + encode_varint(len(raw_key)) + raw_key + encode_varint(-1)
    payload = encode_varint(len(body)) + body
    batch = _batch_with_payload(payload, count=1)
    (record,) = iter_records(batch, verify_crc=True)
    rebuilt = build_batch([record])
    assert bytes(rebuilt[BATCH_HEADER_SIZE:]) == bytes(payload)


@pytest.mark.parametrize(
    ("records", "kwargs"),
    [
        ([Record(5, 0, None, None), Record(5, 0, None, None)], {}),  # offsets must increase
        ([Record(3, 0, None, None)], {"base_offset": 4}),  # below the base offset
        ([Record(1 << 31, 0, None, None)], {}),  # offset delta beyond int32
        ([Record(0, 0, None, None)], {"compression": 5}),
        ([Record(0, 0, None, None)], {"timestamp_type": 2}),
        ([Record(0, 0, None, None), Record(1, 1 << 63, None, None)], {}),  # delta beyond int64
        ([Record(4, 0, None, None)], {"last_offset_delta": 3}),
    ],
)
def test_build_refuses_impossible_batches(records: list[Record], kwargs: dict) -> None:
    with pytest.raises(ValueError):
        build_batch(records, **kwargs)


# ---------------------------------------------------------------- interop with kafka-python

def _kafka_python_batch(records: list[Record], codec: int, **producer) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=producer.get("is_transactional", False),
        producer_id=producer.get("producer_id", -1), producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1), batch_size=1 << 24,
    )
    for record in records:
        assert builder.append(record.offset, record.timestamp, record.key, record.value, record.headers)
    return builder.build()


COMPRESSIBLE = [
    Record(0, 1_700_000_000_000, b"key-0", b"value " * 40, [("trace", b"abc"), ("none", None)]),
    Record(1, 1_700_000_000_005, None, b"value " * 40),
    Record(2, 1_699_999_999_000, b"key-2", None),
    Record(7, 1_700_000_100_000, b"", b"value " * 40, [("h", b"")]),
]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_parse_with_ours(codec: int) -> None:
    built = _kafka_python_batch(COMPRESSIBLE, codec, producer_id=5, producer_epoch=1, base_sequence=40)
    patch_base_offset(built, 0, 1000)
    header = validate_batch(built)
    assert header.compression_type == codec  # compression really happened
    assert (header.producer_id, header.base_sequence, header.records_count) == (5, 40, 4)
    expected = [Record(r.offset + 1000, r.timestamp, r.key, r.value, r.headers) for r in COMPRESSIBLE]
    assert list(iter_records(built, verify_crc=True)) == expected


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_parse_with_kafka_python(codec: int) -> None:
    built = build_batch(COMPRESSIBLE, base_offset=0, compression=codec, producer_id=9, producer_epoch=2, base_sequence=0)
    patch_base_offset(built, 0, 500)
    theirs = DefaultRecordBatch(bytes(built))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec and theirs.producer_id == 9
    expected = [Record(r.offset + 500, r.timestamp, r.key, r.value, r.headers) for r in COMPRESSIBLE]
    assert [_from_kafka_python(r) for r in theirs] == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists(max_records=6), st.sampled_from(CODECS))
def test_interop_property(batch: tuple[int, list[Record]], codec: int) -> None:
    base_offset, records = batch
    if not records:
        return  # kafka-python's builder cannot write an empty batch
    ours = build_batch(records, base_offset=base_offset, compression=codec)
    theirs_view = DefaultRecordBatch(bytes(ours))
    assert theirs_view.validate_crc()
    assert [_from_kafka_python(r) for r in theirs_view] == records
    relative = [Record(r.offset - base_offset, r.timestamp, r.key, r.value, r.headers) for r in records]
    theirs = _kafka_python_batch(relative, codec)
    patch_base_offset(theirs, 0, base_offset)
    assert list(iter_records(theirs, verify_crc=True)) == records


def test_kafka_python_memory_records_reads_a_log_of_our_batches() -> None:
    log = bytearray()
    expected = []
    offset = 0
    for codec in CODECS:
        records = [Record(offset + i, 1000 + i, b"k%d" % i, b"v" * 50) for i in range(3)]
        log += build_batch(records, base_offset=offset, compression=codec)
        expected += records
        offset += 3
    seen = []
    memory = MemoryRecords(bytes(log))
    while memory.has_next():
        batch = memory.next_batch()
        assert batch.validate_crc()
        seen += [_from_kafka_python(r) for r in batch]
    assert seen == expected


# ---------------------------------------------------------------- control records

@pytest.mark.parametrize("commit", [True, False])
def test_end_transaction_markers(commit: bool) -> None:
    built = build_end_txn_marker_batch(
        commit=commit, producer_id=42, producer_epoch=3, coordinator_epoch=17, timestamp=1234, base_offset=88,
    )
    header = validate_batch(built)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, -1)
    (record,) = iter_records(built)
    assert record.offset == 88 and record.timestamp == 1234
    marker = parse_end_txn_marker(record)
    assert marker == EndTransactionMarker(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, 17)
    assert marker.is_commit == commit
    # kafka-python's own reading of the same bytes.
    theirs = DefaultRecordBatch(bytes(built))
    assert theirs.validate_crc() and theirs.is_control_batch
    (control,) = list(theirs)
    assert (control.version, control.type, control.commit, control.abort) == (0, int(commit), commit, not commit)


def test_control_key_accepts_newer_versions_and_unknown_types() -> None:
    assert parse_control_key(encode_control_key(ControlRecordType.LEADER_CHANGE)) == (0, 2)
    assert parse_control_key(struct.pack(">hh", 3, 1) + b"extra") == (3, 1)
    marker = Record(0, 0, struct.pack(">hh", 1, 0), struct.pack(">hi", 2, 9) + b"future fields")
    assert parse_end_txn_marker(marker) == EndTransactionMarker(ControlRecordType.ABORT, 9)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (None, struct.pack(">hi", 0, 1)),
        (b"\x00\x00\x00", struct.pack(">hi", 0, 1)),  # short key
        (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1)),  # negative key version
        (struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 1)),  # not an end marker
        (struct.pack(">hh", 0, 1), None),
        (struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x01"),  # short value
        (struct.pack(">hh", 0, 1), struct.pack(">hi", -2, 1)),  # negative value version
    ],
)
def test_bad_control_records_are_corrupt(key: bytes | None, value: bytes | None) -> None:
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(Record(0, 0, key, value))


# ---------------------------------------------------------------- corruption

def _batch_with_payload(payload: bytes | bytearray, count: int, codec: int = 0) -> bytearray:
    """A batch whose CRC is right for ``payload``, so decoding reaches the records."""
    return build_batch_header(
        base_offset=0, records_size=len(payload), attributes=codec, last_offset_delta=max(count - 1, 0),
        base_timestamp=0, max_timestamp=0, records_count=count, records=payload,
    )


FUZZ_RECORDS = [
    Record(0, 10, b"key", b"value", [("h1", b"v1"), ("h2", None)]),
    Record(1, 9, None, b"x" * 150),
    Record(3, 1 << 40, b"k" * 70, None, [("long", b"y" * 130)]),
    Record(4, -1, b"", b""),
    Record(9, 11, b"z", b"w", [("a", b"b"), ("c", b"d"), ("e", None)]),
]


def test_flipped_bytes_fail_the_crc_check() -> None:
    built = build_batch(FUZZ_RECORDS, compression=compression.GZIP)
    for position in range(21, len(built)):  # attributes .. end: what the CRC covers
        corrupted = bytearray(built)
        corrupted[position] ^= 0x10
        with pytest.raises(CorruptRecordError):
            validate_batch(corrupted)
        with pytest.raises(CorruptRecordError):
            iter_records(corrupted, verify_crc=True)
    for position in range(17, 21):  # the stored CRC itself
        corrupted = bytearray(built)
        corrupted[position] ^= 0x01
        with pytest.raises(CorruptRecordError, match="CRC"):
            validate_batch(corrupted)


def test_truncated_batches_are_corrupt() -> None:
    built = build_batch(FUZZ_RECORDS)
    for size in range(len(built)):
        with pytest.raises(CorruptRecordError):
            read_batch(built[:size])


def _mutate(rng: random.Random, data: bytes) -> bytearray:
    out = bytearray(data)
    op = rng.randrange(6)
    if op == 0 and out:
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif op == 1 and out:
        out[rng.randrange(len(out))] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF))
    elif op == 2:
        position = rng.randrange(len(out) + 1)
        out[position:position] = rng.randbytes(rng.randrange(1, 6))
    elif op == 3 and out:
        start = rng.randrange(len(out))
        del out[start : start + rng.randrange(1, 12)]
    elif op == 4:
        del out[rng.randrange(len(out) + 1) :]
    else:
        position = rng.randrange(len(out) + 1)
        out[position:position] = b"\xff" * rng.randrange(1, 12)  # endless varints
    return out


def test_fuzzed_records_raise_corrupt_record_error_only() -> None:
    rng = random.Random(20_000)
    payload = bytes(build_batch(FUZZ_RECORDS)[BATCH_HEADER_SIZE:])
    decoded = corrupt = 0
    for _ in range(20_000):
        mutated = _mutate(rng, payload)
        if rng.random() < 0.3:
            mutated = _mutate(rng, mutated)
        count = len(FUZZ_RECORDS) if rng.random() < 0.8 else rng.choice((0, 1, 4, 6, 1 << 30, 0x7FFFFFFF))
        batch = _batch_with_payload(mutated, count)
        try:
            records = list(iter_records(batch, verify_crc=True))
        except CorruptRecordError:
            corrupt += 1
            continue
        decoded += 1
        assert len(records) == count
    # Both outcomes occur: the loop really exercised the decoder's error paths.
    assert corrupt > 10_000 and decoded > 1_000


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_fuzzed_compressed_batches_raise_corrupt_record_error_only(codec: int) -> None:
    rng = random.Random(codec)
    built = build_batch(FUZZ_RECORDS, compression=codec)
    payload = bytes(built[BATCH_HEADER_SIZE:])
    inner = bytes(build_batch(FUZZ_RECORDS)[BATCH_HEADER_SIZE:])
    for round_ in range(1000):
        if round_ % 2:  # garble the compressed bytes
            mutated = bytes(_mutate(rng, payload))
        else:  # or compress garbled records correctly
            mutated = compression.compress(codec, _mutate(rng, inner))
        try:
            list(iter_records(_batch_with_payload(mutated, len(FUZZ_RECORDS), codec), verify_crc=True))
        except CorruptRecordError:
            pass


def test_overlong_varints_are_corrupt() -> None:
    def one_record(timestamp_delta: bytes) -> bytearray:
        body = b"\x00" + timestamp_delta + b"\x00\x01\x01\x00"
        return _batch_with_payload(encode_varint(len(body)) + body, 1)

    ten_bytes = b"\xfe" + b"\xff" * 8 + b"\x01"  # zig-zag 2**64 - 2: the largest varlong
    (record,) = iter_records(one_record(ten_bytes))
    assert record.timestamp == INT64_MAX
    with pytest.raises(CorruptRecordError, match="too long"):
        list(iter_records(one_record(b"\x80" * 10 + b"\x00")))  # eleven bytes
    with pytest.raises(CorruptRecordError, match="bits"):
        list(iter_records(one_record(b"\xff" * 9 + b"\x7f")))  # 70 bits
    # A varint (not varlong) field may take five bytes, not six.
    body = b"\x00\x00" + b"\x80\x80\x80\x80\x80\x00" + b"\x01\x01\x00"
    with pytest.raises(CorruptRecordError, match="too long"):
        list(iter_records(_batch_with_payload(encode_varint(len(body)) + body, 1)))


def test_unknown_codec_in_a_batch_is_corrupt() -> None:
    built = build_batch([Record(0, 0, None, b"v")])
    payload = bytes(built[BATCH_HEADER_SIZE:])
    for codec in (5, 6, 7):
        batch = _batch_with_payload(payload, 1, codec=codec)
        with pytest.raises(CorruptRecordError, match="compression"):
            validate_batch(batch)
        with pytest.raises(CorruptRecordError, match="compression"):
            list(iter_records(batch))


def test_decompression_bomb_inside_a_batch_is_corrupt() -> None:
    built = build_batch([Record(0, 0, None, bytes(3 << 20))], compression=compression.ZSTD)
    assert len(built) < 1000
    assert len(next(iter(iter_records(built))).value) == 3 << 20
    with pytest.raises(CorruptRecordError, match="limit"):
        iter_records(built, max_decompressed_size=1 << 20)


def test_record_count_larger_than_the_data_is_corrupt_without_work() -> None:
    payload = bytes(build_batch(FUZZ_RECORDS)[BATCH_HEADER_SIZE:])
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        iter_records(_batch_with_payload(payload, 0x7FFFFFFF))
    with pytest.raises(CorruptRecordError, match="left over"):
        iter_records(_batch_with_payload(payload, len(FUZZ_RECORDS) - 1))
