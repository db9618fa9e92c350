"""Message formats v0/v1 against kafka-python's independent implementation
(``kafka.record``: its legacy builder and reader, written from Kafka's protocol
guide), and the up- and down-conversions to and from v2 batches."""

from __future__ import annotations

import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from protocol import compression
from protocol.errors import CorruptRecordError, ErrorCode
from protocol.legacy_record import (
    OVERFLOW_ENTRY,
    InvalidLegacyRecordError,
    UnsupportedCompressionError,
    build_message_set,
    down_convert,
    down_convert_fetched,
    iter_legacy_records,
    message_set_magic,
    up_convert,
)
from protocol.records import Record, build_batch, read_batch

# kafka-python's codec ids are Kafka's: 0 none, 1 gzip, 2 snappy, 3 lz4.
CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4]
VALUES = [(b"k0", b"v0"), (None, b"v1" * 50), (b"k2", None), (b"", b"")]


def kafka_python_set(magic: int, codec: int, first_offset: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (key, value) in enumerate(VALUES):
        builder.append(first_offset + i if magic == 0 or codec == 0 else i, timestamp=1_700_000_000_000 + i,
                       key=key, value=value)
    return bytes(builder.build())


def kafka_python_records(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    records = MemoryRecords(data)
    out = []
    while records.has_next():
        batch = records.next_batch()
        # kafka-python reads a v0 message's missing timestamp as None; Kafka's value is -1.
        out += [(r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value) for r in batch]
    return out


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_reads_what_kafka_python_writes(magic: int, codec: int) -> None:
    data = kafka_python_set(magic, codec)
    assert message_set_magic(data) == magic
    got = list(iter_legacy_records(data))
    assert [(r.key, r.value) for r in got] == VALUES
    # kafka-python's v1 wrapper carries offset 0 rather than the last inner offset
    # (a producer's offsets are placeholders the broker replaces): compare spacing.
    offsets = [r.offset for r in got]
    assert [o - offsets[0] for o in offsets] == list(range(len(VALUES)))
    expected_ts = [-1] * 4 if magic == 0 else [1_700_000_000_000 + i for i in range(4)]
    assert [r.timestamp for r in got] == expected_ts


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_what_we_write(magic: int, codec: int) -> None:
    records = [Record(offset=100 + i, timestamp=1_700_000_000_000 + i, key=k, value=v)
               for i, (k, v) in enumerate(VALUES)]
    data = bytes(build_message_set(records, magic, codec, timestamp_type=0))
    got = kafka_python_records(data)
    assert [(o, k, v) for o, _, k, v in got] == [(100 + i, k, v) for i, (k, v) in enumerate(VALUES)]
    if magic == 1:
        assert [ts for _, ts, _, _ in got] == [1_700_000_000_000 + i for i in range(4)]


def test_uncompressed_v1_bytes_equal_kafka_python() -> None:
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i, (key, value) in enumerate(VALUES):
        builder.append(i, timestamp=5 + i, key=key, value=value)
    records = [Record(offset=i, timestamp=5 + i, key=k, value=v) for i, (k, v) in enumerate(VALUES)]
    assert bytes(build_message_set(records, 1, compression.NONE, 0)) == bytes(builder.build())


def test_log_append_time_wrapper_stamps_every_inner_message() -> None:
    records = [Record(offset=7 + i, timestamp=i, key=None, value=b"x") for i in range(3)]
    data = build_message_set(records, 1, compression.GZIP, timestamp_type=1, log_append_time=99)
    got = list(iter_legacy_records(data))
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in got] == [(7, 99, 1), (8, 99, 1), (9, 99, 1)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_up_convert_keeps_every_record(magic: int, codec: int) -> None:
    batch, legacy = up_convert(kafka_python_set(magic, codec))
    header, records = read_batch(batch, verify_crc=True)
    assert header.compression_type == codec and header.records_count == 4
    assert [(r.key, r.value) for r in records] == VALUES
    assert [r.offset for r in records] == [0, 1, 2, 3]
    assert [r.timestamp for r in records] == [r.timestamp for r in legacy]
    assert header.max_timestamp == max(r.timestamp for r in legacy)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_down_convert_skips_control_batches_and_keeps_offsets(magic: int, codec: int) -> None:
    first = build_batch([Record(offset=10 + i, timestamp=50 + i, key=b"k", value=b"v%d" % i, headers=[("h", b"x")])
                         for i in range(3)], base_offset=10, compression=codec)
    control = build_batch([Record(offset=13, timestamp=60, key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x00")],
                          base_offset=13, is_control=True, is_transactional=True)
    second = build_batch([Record(offset=14, timestamp=70, key=None, value=b"last")], base_offset=14, compression=codec)
    data = bytes(first + control + second)
    converted = down_convert(data + bytes(second[:30]), magic)  # a partial trailing batch is dropped
    got = kafka_python_records(bytes(converted))
    assert [(o, v) for o, _, _, v in got] == [(10, b"v0"), (11, b"v1"), (12, b"v2"), (14, b"last")]
    assert [ts for _, ts, _, _ in got] == ([-1] * 4 if magic == 0 else [50, 51, 52, 70])


def test_zstd_cannot_be_down_converted_or_read_from_a_legacy_message() -> None:
    batch = build_batch([Record(offset=0, timestamp=1, key=None, value=b"z")], compression=compression.ZSTD)
    with pytest.raises(UnsupportedCompressionError):
        down_convert(batch, 1)
    with pytest.raises(UnsupportedCompressionError):
        build_message_set([Record(offset=0, timestamp=1, key=None, value=b"z")], 1, compression.ZSTD, 0)
    inner = bytes(build_message_set([Record(offset=0, timestamp=1, key=None, value=b"z")], 1, compression.NONE, 0))
    wrapper = bytearray(build_message_set([Record(offset=0, timestamp=1, key=None, value=inner)], 1, compression.NONE, 0))
    wrapper[17] = 4  # attributes: zstd
    wrapper[12:16] = zlib.crc32(bytes(wrapper[16:])).to_bytes(4, "big")
    with pytest.raises(UnsupportedCompressionError):
        list(iter_legacy_records(wrapper))


def test_corrupt_messages_raise_corrupt_record_error() -> None:
    data = bytearray(kafka_python_set(1, compression.NONE))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC32"):
        list(iter_legacy_records(data))
    with pytest.raises(CorruptRecordError):
        list(iter_legacy_records(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 5))
    # A partial trailing message is ignored; no whole message at all is an error for up-conversion.
    whole = kafka_python_set(1, compression.NONE)
    assert len(list(iter_legacy_records(whole + whole[:20]))) == 4
    with pytest.raises(CorruptRecordError):
        up_convert(whole[:20])


def _one(offset: int, value: bytes, codec: int = compression.NONE) -> bytearray:
    return build_batch([Record(offset=offset, timestamp=offset, key=None, value=value)], base_offset=offset,
                       compression=codec)


def test_down_convert_fetched_as_kafkas_lazy_conversion() -> None:
    """The outcome of Kafka's LazyDownConversionRecords, converted at once."""
    control = build_batch([Record(offset=0, timestamp=1, key=b"\x00\x00\x00\x00", value=b"\x00" * 6)],
                          is_control=True, is_transactional=True)
    zstd = _one(3, b"z" * 100, compression.ZSTD)
    # Nothing whole: nothing. Whole batches none of which converts: Kafka's 12-byte overflow entry.
    assert down_convert_fetched(b"", 1, 0) == b""
    assert down_convert_fetched(bytes(_one(0, b"a"))[:40], 1, 0) == b""
    assert down_convert_fetched(control, 1, 0) == OVERFLOW_ENTRY
    # zstd before anything converted: the partition's error; after: the answer stops before its chunk.
    with pytest.raises(UnsupportedCompressionError):
        down_convert_fetched(control + zstd, 1, 0)
    served = down_convert_fetched(_one(1, b"a", compression.GZIP) + _one(2, b"b") + zstd, 1, 0)
    assert [o for o, _, _, _ in kafka_python_records(bytes(served))] == [1]  # 2 shares the zstd batch's chunk
    # The answer is cut at whole messages to max(stored size, first converted batch).
    many = b"".join(bytes(build_batch([Record(offset=i, timestamp=i, key=None, value=b"v") for i in range(b, b + 10)],
                                      base_offset=b)) for b in range(0, 50, 10))  # v1 messages take more room
    cut = down_convert_fetched(many, 1, 0)
    whole = down_convert(many, 1)
    assert len(whole) > len(many) >= len(cut) and whole.startswith(cut)
    assert [o for o, _, _, _ in kafka_python_records(bytes(cut))] == list(range(len(kafka_python_records(bytes(cut)))))
    # Uncompressed records below the fetch offset are dropped (KAFKA-5360); a compressed wrapper stays whole.
    three = [Record(offset=i, timestamp=i, key=None, value=b"v%d" % i) for i in range(3)]
    plain = down_convert_fetched(build_batch(three), 1, 2)
    packed = down_convert_fetched(build_batch(three, compression=compression.GZIP), 1, 2)
    assert [o for o, _, _, _ in kafka_python_records(bytes(plain))] == [2]
    assert [o for o, _, _, _ in kafka_python_records(bytes(packed))] == [0, 1, 2]


def _message(offset: int, magic: int, attributes: int, value: bytes | None) -> bytes:
    body = bytes([magic, attributes]) + (b"\x00" * 8 if magic else b"") + (-1).to_bytes(4, "big", signed=True)
    body += (-1).to_bytes(4, "big", signed=True) if value is None else len(value).to_bytes(4, "big") + value
    message = zlib.crc32(body).to_bytes(4, "big") + body
    return offset.to_bytes(8, "big") + len(message).to_bytes(4, "big") + message


def test_what_kafkas_log_validator_refuses_as_invalid_record() -> None:
    """CRCs hold, but Kafka answers INVALID_RECORD (its InvalidRecordException)."""
    v0, v1 = kafka_python_set(0, compression.NONE), kafka_python_set(1, compression.NONE)
    gzip = kafka_python_set(1, compression.GZIP)
    cases = {
        "mixed magics": v0 + v1,
        "two compressed wrappers": gzip + gzip,
        "a v2 batch after a message": v1 + bytes(build_batch([Record(0, 0, None, b"x")])),
        "null wrapper value": _message(0, 1, compression.GZIP, None),
        "empty wrapper": _message(0, 1, compression.GZIP, compression.compress(compression.GZIP, b"")),
        "compressed inner message": _message(0, 0, compression.GZIP, compression.compress(
            compression.GZIP, _message(0, 0, compression.GZIP, b"x"))),
        "inner magic differs": _message(0, 1, compression.GZIP, compression.compress(
            compression.GZIP, _message(0, 0, 0, b"x"))),
    }
    for name, data in cases.items():
        with pytest.raises(InvalidLegacyRecordError) as info:
            up_convert(data)
        assert info.value.error_code == ErrorCode.INVALID_RECORD, name
    # Several uncompressed messages are one set, as Kafka 0.10's clients send them.
    assert len(up_convert(v1 + v1)[1]) == 2 * len(VALUES)


def test_zstd_is_unsupported_compression_type() -> None:
    with pytest.raises(UnsupportedCompressionError) as info:
        up_convert(_message(0, 1, compression.ZSTD, compression.compress(compression.ZSTD, b"")))
    assert info.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
