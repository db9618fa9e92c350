"""Kafka's message formats v0 and v1 (``LegacyRecord``): what clients older than
Kafka 0.11 write and read, and what Produce v0-v2 and Fetch v0-v3 carry.

A message set is a run of entries, each::

    offset      int64
    size        int32   bytes after this field
    crc         uint32  CRC32 (IEEE) of everything after it
    magic       int8    0 or 1
    attributes  int8    bits 0-2 codec, bit 3 timestamp type (v1 only)
    timestamp   int64   v1 only
    key         int32 length (-1 = null) + bytes
    value       int32 length (-1 = null) + bytes

A compressed message is a *wrapper*: its value is a compressed message set of
uncompressed inner messages of the same magic. Inner offsets are absolute in
v0 and relative (0..n-1) in v1, whose wrapper carries the last inner offset;
a v1 wrapper's timestamp is the largest inner one, and with LogAppendTime it
overrides every inner timestamp.

pafka stores only v2 batches (as Kafka 3.x does once its message format is
3.0): Produce v0-v2 entries are *up-converted* to one v2 batch
(:func:`up_convert`) and Fetch v0-v3 answers are *down-converted* from the
stored batches (:func:`down_convert`). Both copy and parse records, which is
why only those old request versions come here.

Bad input raises ``CorruptRecordError`` and nothing else; its subclasses carry
the code Kafka answers with where that is not CORRUPT_MESSAGE: a message set
Kafka's LogValidator rejects as INVALID_RECORD raises ``InvalidLegacyRecordError``,
zstd (which these formats cannot carry) ``UnsupportedCompressionError``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from protocol import compression
from protocol.buffers import Buffer
from protocol.errors import CorruptRecordError, ErrorCode
from protocol.record_batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_CREATE_TIME,
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    parse_batch_header,
)
from protocol.records import Record, build_batch, read_batch

__all__ = [
    "InvalidLegacyRecordError",
    "LegacyRecord",
    "UnsupportedCompressionError",
    "build_message_set",
    "down_convert",
    "down_convert_fetched",
    "iter_legacy_records",
    "message_set_magic",
    "up_convert",
]

MAGIC_V0 = 0
MAGIC_V1 = 1
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08

_OFFSET_SIZE = struct.Struct(">qi")
_CRC_MAGIC_ATTRIBUTES = struct.Struct(">Ibb")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_HEADER_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_HEADER_V1 = struct.Struct(">qiIbbq")  # ... and timestamp
#: crc + magic + attributes (+ timestamp) + key length + value length.
MIN_MESSAGE_SIZE = {MAGIC_V0: 14, MAGIC_V1: 22}
#: The position of the magic byte in an entry; the same for v2 batches.
MAGIC_POSITION = 16


class UnsupportedCompressionError(CorruptRecordError):
    """A message or batch compressed with a codec its format or request version cannot carry (zstd)."""

    def __init__(self, message: str, **kwargs: object) -> None:
        kwargs.setdefault("error_code", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        super().__init__(message, **kwargs)


class InvalidLegacyRecordError(CorruptRecordError):
    """A message set whose CRCs hold but whose structure Kafka's LogValidator refuses
    (InvalidRecordException, INVALID_RECORD): mixed magics, a second compressed
    wrapper, a wrapper holding compressed or differently versioned messages or none."""

    def __init__(self, message: str, **kwargs: object) -> None:
        kwargs.setdefault("error_code", ErrorCode.INVALID_RECORD)
        super().__init__(message, **kwargs)


class LegacyRecord(NamedTuple):
    """One uncompressed message with its absolute offset and effective timestamp."""

    offset: int
    magic: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None


def message_set_magic(buf: Buffer) -> int | None:
    """The magic byte of the first entry (0, 1 or 2 for a v2 batch); None when too short to tell."""
    if len(buf) <= MAGIC_POSITION:
        return None
    return int(memoryview(buf)[MAGIC_POSITION])


# ---------------------------------------------------------------- reading


def _read_bytes(view: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecordError("legacy message truncated in a length field")
    (length,) = _INT32.unpack_from(view, pos)
    pos += 4
    if length < 0:
        return None, pos
    if length > end - pos:
        raise CorruptRecordError(f"legacy message field of {length} bytes overruns its message")
    return bytes(view[pos : pos + length]), pos + length


def _entries(view: memoryview) -> Iterator[tuple[int, int, int, int, int, bytes | None, bytes | None]]:
    """(offset, magic, attributes, timestamp, end, key, value) of each whole entry; a partial last entry is ignored."""
    pos, end = 0, len(view)
    while end - pos >= LOG_OVERHEAD:
        offset, size = _OFFSET_SIZE.unpack_from(view, pos)
        if size < MIN_MESSAGE_SIZE[MAGIC_V0]:
            raise CorruptRecordError(f"legacy message of {size} bytes is below the minimum size")
        body = pos + LOG_OVERHEAD
        if body + size > end:
            break  # a trailing partial message: ignored, as Kafka does
        crc, magic, attributes = _CRC_MAGIC_ATTRIBUTES.unpack_from(view, body)
        if magic not in MIN_MESSAGE_SIZE:
            if magic == 2:  # a known format, only not this set's: Kafka's "Batch magic ... is not the same"
                raise InvalidLegacyRecordError("a v2 record batch inside a message set of format v0/v1")
            raise CorruptRecordError(f"message magic {magic} is not a legacy format")
        if size < MIN_MESSAGE_SIZE[magic]:
            raise CorruptRecordError(f"v{magic} message of {size} bytes is below the minimum size")
        if zlib.crc32(view[body + 4 : body + size]) != crc:
            raise CorruptRecordError(f"legacy message at offset {offset} fails its CRC32")
        field = body + 6
        timestamp = NO_TIMESTAMP
        if magic == MAGIC_V1:
            (timestamp,) = _INT64.unpack_from(view, field)
            field += 8
        key, field = _read_bytes(view, field, body + size)
        value, field = _read_bytes(view, field, body + size)
        yield offset, magic, attributes, timestamp, body + size, key, value
        pos = body + size


def _fix_lz4_v0_header_checksum(data: bytes) -> bytes:
    """Kafka 0.8-0.9 clients (and librdkafka for v0) checksum the LZ4 frame descriptor
    together with the frame's magic number (KAFKA-3160); correct it before decoding."""
    if len(data) < 7 or data[:4] != b"\x04\x22\x4d\x18":
        return data
    flg = data[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) <= end:
        return data
    correct = (compression.xxh32_short(bytes(data[4:end])) >> 8) & 0xFF
    return data[:end] + bytes((correct,)) + data[end + 1 :]


def _inflate(codec: int, magic: int, value: bytes, max_size: int) -> memoryview:
    if codec == compression.ZSTD:
        raise UnsupportedCompressionError("zstd cannot be used with message format v0 or v1")
    if codec not in compression.CODEC_NAMES:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    if codec == compression.LZ4 and magic == MAGIC_V0:
        value = _fix_lz4_v0_header_checksum(value)
    return memoryview(compression.decompress(codec, value, max_size))


def iter_legacy_records(buf: Buffer, max_decompressed_size: int = compression.MAX_DECOMPRESSED_SIZE
                        ) -> Iterator[LegacyRecord]:
    """Every message of a v0/v1 message set, compressed wrappers opened, with absolute offsets."""
    return _open_entries(_entries(memoryview(buf)), max_decompressed_size)


def _open_entries(entries: Iterable[tuple[int, int, int, int, int, bytes | None, bytes | None]],
                  max_decompressed_size: int) -> Iterator[LegacyRecord]:
    first_magic = None
    for offset, magic, attributes, timestamp, _, key, value in entries:
        if first_magic is None:
            first_magic = magic
        elif magic != first_magic:
            raise InvalidLegacyRecordError(f"message magic {magic} differs from the first message's {first_magic}")
        codec = attributes & _CODEC_MASK
        ts_type = (attributes & _TIMESTAMP_TYPE_BIT) >> 3 if magic == MAGIC_V1 else TIMESTAMP_TYPE_CREATE_TIME
        if codec == compression.NONE:
            yield LegacyRecord(offset, magic, timestamp, ts_type, key, value)
            continue
        if value is None:
            raise InvalidLegacyRecordError("compressed legacy message has a null value")
        inner = list(_entries(_inflate(codec, magic, value, max_decompressed_size)))
        if not inner:
            raise InvalidLegacyRecordError("compressed legacy message holds no inner message")
        last_relative = inner[-1][0] if inner else 0
        for inner_offset, inner_magic, inner_attributes, inner_ts, _, inner_key, inner_value in inner:
            if inner_magic != magic:
                raise InvalidLegacyRecordError(f"inner message magic {inner_magic} differs from its wrapper's {magic}")
            if inner_attributes & _CODEC_MASK:
                raise InvalidLegacyRecordError("compressed legacy message holds another compressed message")
            absolute = inner_offset if magic == MAGIC_V0 else offset - last_relative + inner_offset
            effective = timestamp if ts_type == TIMESTAMP_TYPE_LOG_APPEND_TIME else inner_ts
            yield LegacyRecord(absolute, magic, effective, ts_type, inner_key, inner_value)


def up_convert(buf: Buffer, max_decompressed_size: int = compression.MAX_DECOMPRESSED_SIZE
               ) -> tuple[bytearray, list[LegacyRecord]]:
    """One v2 batch (base offset 0, CreateTime) holding every message of ``buf``, and the messages.

    As Kafka's LogValidator converting to message format v2: the records keep
    their keys, values and timestamps (-1 for v0), offsets become 0..n-1 (the
    log assigns the real ones), and the batch keeps the first wrapper's codec
    (pafka applies no broker-side ``compression.type``, as for v2 batches).
    """
    entries = list(_entries(memoryview(buf)))
    codec = max((attributes & _CODEC_MASK for _, _, attributes, _, _, _, _ in entries), default=compression.NONE)
    if codec != compression.NONE and len(entries) > 1:
        # Kafka's LogValidator: a compressed message set is one wrapper (one "batch").
        raise InvalidLegacyRecordError("Compressed outer record has more than one batch")
    records = list(_open_entries(entries, max_decompressed_size))
    if not records:
        raise CorruptRecordError("the message set holds no whole message")
    batch = build_batch(
        [Record(offset=i, timestamp=r.timestamp, key=r.key, value=r.value) for i, r in enumerate(records)],
        compression=codec,
        timestamp_type=TIMESTAMP_TYPE_CREATE_TIME,
    )
    return batch, records


# ---------------------------------------------------------------- writing


def _message(out: bytearray, offset: int, magic: int, attributes: int, timestamp: int,
             key: bytes | None, value: Buffer | None) -> None:
    start = len(out)
    out += _HEADER_V1.pack(offset, 0, 0, magic, attributes, timestamp) if magic else _HEADER_V0.pack(
        offset, 0, 0, magic, attributes)
    for field in (key, value):
        if field is None:
            out += _INT32.pack(-1)
        else:
            out += _INT32.pack(len(field))
            out += field
    _INT32.pack_into(out, start + 8, len(out) - start - LOG_OVERHEAD)
    struct.pack_into(">I", out, start + 12, zlib.crc32(memoryview(out)[start + 16 :]))


def _lz4_v0(data: bytes) -> bytes:
    """Kafka writes v0 LZ4 frames with the descriptor checksum that includes the magic (KAFKA-3160)."""
    end = 6
    broken = (compression.xxh32_short(bytes(data[:end])) >> 8) & 0xFF
    return data[:end] + bytes((broken,)) + data[end + 1 :]


def build_message_set(records: Sequence[Record], magic: int, codec: int, timestamp_type: int,
                      log_append_time: int = NO_TIMESTAMP) -> bytearray:
    """Messages of format ``magic`` for ``records`` (absolute offsets), compressed into one wrapper when ``codec``.

    Headers cannot be carried by v0/v1 and are dropped, as Kafka drops them.
    """
    if codec == compression.ZSTD:
        raise UnsupportedCompressionError("zstd cannot be used with message format v0 or v1")
    ts_attribute = _TIMESTAMP_TYPE_BIT if magic == MAGIC_V1 and timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME else 0

    def stamp(record: Record) -> int:
        if magic == MAGIC_V0:
            return NO_TIMESTAMP
        return log_append_time if ts_attribute else record.timestamp

    out = bytearray()
    if codec == compression.NONE:
        for record in records:
            _message(out, record.offset, magic, ts_attribute, stamp(record), record.key, record.value)
        return out
    if not records:
        return out
    base = records[0].offset
    inner = bytearray()
    for record in records:
        inner_offset = record.offset if magic == MAGIC_V0 else record.offset - base
        _message(inner, inner_offset, magic, ts_attribute, stamp(record), record.key, record.value)
    compressed = compression.compress(codec, inner)
    if codec == compression.LZ4 and magic == MAGIC_V0:
        compressed = _lz4_v0(compressed)
    wrapper_ts = max((stamp(r) for r in records), default=NO_TIMESTAMP)
    _message(out, records[-1].offset, magic, codec | ts_attribute, wrapper_ts, None, compressed)
    return out


def down_convert(buf: Buffer, magic: int, max_decompressed_size: int = compression.MAX_DECOMPRESSED_SIZE,
                 first_offset: int = -1) -> bytearray:
    """The whole v2 batches of ``buf`` as messages of format ``magic``; a trailing partial batch is dropped.

    As Kafka's down-conversion: control batches are skipped (old consumers
    know no transaction markers), each batch keeps its offsets and codec, and
    a LogAppendTime batch stamps its messages with the batch's time. A zstd
    batch raises UnsupportedCompressionError: Kafka answers such a fetch with
    UNSUPPORTED_COMPRESSION_TYPE.

    Records of an *uncompressed* batch below ``first_offset`` (the fetch
    offset) are dropped: v0/v1 messages are only batched when compressed, and
    clients reading uncompressed v0/v1 (librdkafka) expect the first message
    to be the one they asked for (KAFKA-5360). A compressed wrapper is kept
    whole, as Kafka keeps it; consumers skip what lies below their position.
    """
    view = memoryview(buf)
    out = bytearray()
    pos, end = 0, len(view)
    while end - pos >= BATCH_HEADER_SIZE:
        header = parse_batch_header(view, pos)
        if pos + header.size_in_bytes > end:
            break
        if not header.is_control:
            if header.compression_type == compression.ZSTD:
                raise UnsupportedCompressionError("zstd batches cannot be down-converted to message format v0 or v1")
            _, records = read_batch(view, pos, max_decompressed_size=max_decompressed_size)
            if header.compression_type == compression.NONE and header.base_offset < first_offset:
                records = [r for r in records if r.offset >= first_offset]
            ts_type = TIMESTAMP_TYPE_LOG_APPEND_TIME if header.attributes & _TIMESTAMP_TYPE_BIT else TIMESTAMP_TYPE_CREATE_TIME
            out += build_message_set(records, magic, header.compression_type, ts_type, header.max_timestamp)
        pos += header.size_in_bytes
    return out


#: Kafka's LazyDownConversionRecordsSend converts at most this much of the stored
#: batches at a time after the first batch (MAX_READ_SIZE).
DOWN_CONVERSION_CHUNK = 128 * 1024
#: What Kafka sends for a partition whose batches all vanished in conversion
#: (control batches only): a message header whose size (61, a v2 batch's
#: minimum) overruns the 12 bytes sent, which consumers read as a message too
#: large for their fetch size.
OVERFLOW_ENTRY = _OFFSET_SIZE.pack(-1, BATCH_HEADER_SIZE)


def _batch_extents(view: memoryview) -> list[tuple[int, int]]:
    """(position, size) of every whole batch of ``view``."""
    extents = []
    pos, end = 0, len(view)
    while end - pos >= LOG_OVERHEAD:
        (size,) = _INT32.unpack_from(view, pos + 8)
        whole = LOG_OVERHEAD + size
        if size < MIN_MESSAGE_SIZE[MAGIC_V0] or whole > end - pos:
            break
        extents.append((pos, whole))
        pos += whole
    return extents


def _whole_entries_within(converted: Buffer, room: int) -> int:
    """The length of the longest run of whole entries of ``converted`` that fits in ``room`` bytes."""
    view = memoryview(converted)
    pos = 0
    while len(view) - pos >= LOG_OVERHEAD:
        (size,) = _INT32.unpack_from(view, pos + 8)
        if pos + LOG_OVERHEAD + size > room:
            break
        pos += LOG_OVERHEAD + size
    return pos


def down_convert_fetched(buf: Buffer, magic: int, fetch_offset: int,
                         max_decompressed_size: int = compression.MAX_DECOMPRESSED_SIZE) -> bytearray:
    """A fetched range of v2 batches as the message set Kafka 3.x answers an old Fetch (v0-v3) with.

    Kafka converts lazily (KIP-283, ``LazyDownConversionRecords``): the first
    batch that converts to something (control batches vanish) is converted
    up front, then chunks of at most 128 KiB of stored batches while the
    response is written, and the partition's answer is exactly
    max(stored size, first converted batch) bytes. pafka converts here, before
    the response is built, with the same outcome for the consumer:

    * a zstd batch before anything converted raises UnsupportedCompressionError
      (the partition's answer is UNSUPPORTED_COMPRESSION_TYPE); a zstd batch in
      a later chunk ends the answer before that chunk, so the consumer reads
      what came before and gets the error when it fetches from there;
    * the answer holds whole messages up to that size limit (Kafka sends the
      bytes up to the limit; a message cut there is ignored by consumers and
      fetched again, so pafka leaves it out rather than sending a fragment);
    * a range of whole batches none of which converts gets ``OVERFLOW_ENTRY``;
      a range without a whole batch gets nothing.
    """
    view = memoryview(buf)
    extents = _batch_extents(view)
    if not extents:
        return bytearray()
    out = bytearray()
    limit = -1  # set by the first batch that converts to something
    i = 0
    while i < len(extents):
        start, size = extents[i]
        j = i + 1
        if limit >= 0:  # after the first converted batch: chunks of up to 128 KiB
            while j < len(extents) and size + extents[j][1] <= DOWN_CONVERSION_CHUNK:
                size += extents[j][1]
                j += 1
        try:
            converted = down_convert(view[start:start + size], magic, max_decompressed_size, fetch_offset)
        except UnsupportedCompressionError:
            if limit < 0:
                raise
            break
        i = j
        if not converted:
            continue
        if limit < 0:
            limit = max(len(view), len(converted))
        if len(out) + len(converted) > limit:
            out += memoryview(converted)[:_whole_entries_within(converted, limit - len(out))]
            break
        out += converted
    if limit < 0:
        return bytearray(OVERFLOW_ENTRY)
    return out
