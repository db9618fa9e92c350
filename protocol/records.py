"""Records inside a RecordBatch v2 (Kafka's record format v2): decode and build.

Each record, after the batch header (and after decompressing the batch's data)::

    length          varint   bytes after this field
    attributes      int8     unused, always 0
    timestampDelta  varlong  from the batch's baseTimestamp
    offsetDelta     varint   from the batch's baseOffset
    key             varint length (-1 = null) + bytes
    value           varint length (-1 = null) + bytes
    headers         varint count, each: varint length + UTF-8 key,
                    varint length (-1 = null) + value bytes

Varints are zig-zag protobuf varints. The broker's hot paths never come here;
compaction, dump-log and the internal topics do, so decoding is one tight loop
per batch: one and two byte varints (the common cases) are read inline, only
longer ones cost a function call. Decoding works on ``bytes`` (what
decompression returns; a bytearray/memoryview batch region is copied once), so
each key and value is a single slice.

Bad input raises ``CorruptRecordError`` and nothing else: every length is
checked against the record's own declared size before it is used, and the
decompressed size of a batch is bounded (see ``protocol.compression``).
Header keys are decoded with ``surrogateescape`` so a key that is not valid
UTF-8 (librdkafka sends raw bytes) survives a decode/encode round trip intact.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from protocol import compression as _compression
from protocol.buffers import Buffer
from protocol.errors import CorruptRecordError
from protocol.record_batch import (
    BATCH_HEADER_SIZE,
    CONTROL_FLAG,
    DELETE_HORIZON_FLAG,
    MAX_COMPRESSION_TYPE,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    RecordBatchHeader,
    build_batch_header,
    parse_batch_header,
    validate_batch,
)

Header = tuple[str, bytes | None]

#: attributes + timestampDelta + offsetDelta + key length + value length +
#: header count, each at its one-byte minimum.
MIN_RECORD_BODY_SIZE = 6
#: The smallest whole record: a one-byte length plus the minimal body.
MIN_RECORD_SIZE = 1 + MIN_RECORD_BODY_SIZE

_INT32_MAX = 0x7FFFFFFF
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


@dataclass(slots=True)
class Record:
    """One record with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


# ---------------------------------------------------------------- decoding

def _read_long_varint(data: Buffer, pos: int, first: int, max_bits: int) -> tuple[int, int]:
    """Finish a varint whose first byte (>= 0x80) was already read; (raw value, position).

    The caller zig-zag decodes, as it does for the one and two byte varints it
    reads inline.

    ``max_bits`` is 32 for a varint, 64 for a varlong: Kafka refuses longer
    encodings (5 and 10 bytes at most) and so do we.
    """
    shift_limit = 35 if max_bits == 32 else 70  # 7 bits per byte, 5 or 10 bytes
    raw = first & 0x7F
    shift = 7
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift >= shift_limit:
            raise CorruptRecordError("varint is too long")
    if raw >> max_bits:
        raise CorruptRecordError(f"varint does not fit in {max_bits} bits")
    return raw, pos


def decode_records(
    data: Buffer,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> list[Record]:
    """Decode exactly ``count`` records filling ``data[pos:end]`` (uncompressed).

    ``log_append_time``, when given, replaces every record's timestamp (a
    LogAppendTime batch reports its maxTimestamp for all its records).
    """
    if count < 0 or count * MIN_RECORD_SIZE > end - pos:
        raise CorruptRecordError(f"{count} records cannot fit in {end - pos} bytes")
    if type(data) is not bytes:
        # One copy of the region up front makes every later slice a bytes
        # object directly, and indexing bytes is the fastest path CPython has.
        data = bytes(memoryview(data)[pos:end])
        pos, end = 0, end - pos
    records: list[Record] = []
    append = records.append
    read_long = _read_long_varint
    try:
        for _ in range(count):
            # length
            raw = data[pos]
            if raw < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = read_long(data, pos + 1, raw, 32)
            length = (raw >> 1) ^ -(raw & 1)
            record_end = pos + length
            if length < MIN_RECORD_BODY_SIZE or record_end > end:
                raise CorruptRecordError(f"invalid record length {length}")
            # attributes: unused by Kafka, skipped
            pos += 1
            # timestampDelta (varlong)
            raw = data[pos]
            if raw < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = read_long(data, pos + 1, raw, 64)
            timestamp_delta = (raw >> 1) ^ -(raw & 1)
            # offsetDelta
            raw = data[pos]
            if raw < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = read_long(data, pos + 1, raw, 32)
            offset_delta = (raw >> 1) ^ -(raw & 1)
            # key
            raw = data[pos]
            if raw < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = read_long(data, pos + 1, raw, 32)
            size = (raw >> 1) ^ -(raw & 1)
            if size < 0:
                if size != -1:
                    raise CorruptRecordError(f"invalid key length {size}")
                key = None
            else:
                if pos + size > record_end:
                    raise CorruptRecordError(f"key of {size} bytes overruns its record")
                key = data[pos : pos + size]
                pos += size
            # value
            raw = data[pos]
            if raw < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = read_long(data, pos + 1, raw, 32)
            size = (raw >> 1) ^ -(raw & 1)
            if size < 0:
                if size != -1:
                    raise CorruptRecordError(f"invalid value length {size}")
                value = None
            else:
                if pos + size > record_end:
                    raise CorruptRecordError(f"value of {size} bytes overruns its record")
                value = data[pos : pos + size]
                pos += size
            # headers
            raw = data[pos]
            if raw < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = read_long(data, pos + 1, raw, 32)
            header_count = (raw >> 1) ^ -(raw & 1)
            if header_count == 0:
                headers: list[Header] = []
            else:
                headers, pos = _decode_headers(data, pos, record_end, header_count)
            if pos != record_end:
                raise CorruptRecordError(f"record declares {length} bytes but holds a different amount")
            append(
                Record(
                    base_offset + offset_delta,
                    base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
                    key,
                    value,
                    headers,
                )
            )
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left over after {count} records")
    return records


def _decode_headers(data: bytes, pos: int, record_end: int, count: int) -> tuple[list[Header], int]:
    # Each header takes at least two bytes (two lengths), which bounds the loop.
    if count < 0 or 2 * count > record_end - pos:
        raise CorruptRecordError(f"invalid header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (raw & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            raw, pos = _read_long_varint(data, pos + 1, raw, 32)
        size = (raw >> 1) ^ -(raw & 1)
        if size < 0 or pos + size > record_end:
            raise CorruptRecordError(f"invalid header key length {size}")
        name = data[pos : pos + size].decode("utf-8", "surrogateescape")
        pos += size
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (raw & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            raw, pos = _read_long_varint(data, pos + 1, raw, 32)
        size = (raw >> 1) ^ -(raw & 1)
        if size < 0:
            if size != -1:
                raise CorruptRecordError(f"invalid header value length {size}")
            headers.append((name, None))
            continue
        if pos + size > record_end:
            raise CorruptRecordError(f"header value of {size} bytes overruns its record")
        headers.append((name, data[pos : pos + size]))
        pos += size
    return headers, pos


def read_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    verify_crc: bool = False,
    max_decompressed_size: int = _compression.MAX_DECOMPRESSED_SIZE,
) -> tuple[RecordBatchHeader, list[Record]]:
    """The header and all records of the batch at ``pos``, decompressed as needed."""
    if verify_crc:
        header = validate_batch(buf, pos)
    else:
        header = parse_batch_header(buf, pos)
        if len(buf) - pos < header.size_in_bytes:
            raise CorruptRecordError(
                f"batch at {pos} claims {header.size_in_bytes} bytes, only {len(buf) - pos} present"
            )
    start = pos + BATCH_HEADER_SIZE
    end = pos + header.size_in_bytes
    log_append_time = (
        header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    )
    codec = header.compression_type
    if codec == _compression.NONE:
        data: Buffer = buf
    else:
        data = _compression.decompress(codec, memoryview(buf)[start:end], max_decompressed_size)
        start, end = 0, len(data)
    records = decode_records(
        data, start, end, header.records_count, header.base_offset, header.base_timestamp, log_append_time
    )
    return header, records


def iter_records(
    batch_buf: Buffer,
    pos: int = 0,
    *,
    verify_crc: bool = False,
    max_decompressed_size: int = _compression.MAX_DECOMPRESSED_SIZE,
) -> Iterator[Record]:
    """The records of the batch at ``pos`` with absolute offsets and timestamps.

    The whole batch is decoded up front (one tight loop beats a generator per
    record), so a corrupt batch raises here, before the first record is seen.
    """
    return iter(read_batch(batch_buf, pos, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size)[1])


# ---------------------------------------------------------------- encoding

def _encode_varint_unsigned(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


#: Encodings of the zig-zagged values below 2**14 (one and two byte varints).
_SMALL_VARINTS = tuple(_encode_varint_unsigned(n) for n in range(1 << 14))


def encode_varint(value: int) -> bytes:
    """Zig-zag varint/varlong encoding of a signed 64-bit value."""
    zigzag = (value << 1) ^ (value >> 63)
    if zigzag < 16384:
        return _SMALL_VARINTS[zigzag]
    return _encode_varint_unsigned(zigzag)


_NULL_LENGTH = encode_varint(-1)


def encode_record(record: Record, base_offset: int, base_timestamp: int, out: bytearray) -> None:
    """Append ``record`` to ``out`` relative to the batch's base offset and timestamp."""
    offset_delta = record.offset - base_offset
    if not 0 <= offset_delta <= _INT32_MAX:
        raise ValueError(f"offset {record.offset} is not within int32 of base offset {base_offset}")
    timestamp_delta = record.timestamp - base_timestamp
    if not _INT64_MIN <= timestamp_delta <= _INT64_MAX:
        raise ValueError(f"timestamp {record.timestamp} is not within int64 of base {base_timestamp}")
    varint = encode_varint
    body = bytearray(b"\x00")  # attributes: Kafka writes 0
    body += varint(timestamp_delta)
    body += varint(offset_delta)
    key = record.key
    if key is None:
        body += _NULL_LENGTH
    else:
        body += varint(len(key))
        body += key
    value = record.value
    if value is None:
        body += _NULL_LENGTH
    else:
        body += varint(len(value))
        body += value
    body += varint(len(record.headers))
    for name, header_value in record.headers:
        name_bytes = name.encode("utf-8", "surrogateescape")
        body += varint(len(name_bytes))
        body += name_bytes
        if header_value is None:
            body += _NULL_LENGTH
        else:
            body += varint(len(header_value))
            body += header_value
    if len(body) > _INT32_MAX:
        raise ValueError("record larger than 2 GiB")
    out += varint(len(body))
    out += body


def encode_records(records: Sequence[Record], base_offset: int, base_timestamp: int) -> bytearray:
    """The uncompressed records section of a batch; offsets must strictly increase."""
    out = bytearray()
    previous = base_offset - 1
    for record in records:
        if record.offset <= previous:
            raise ValueError(f"offset {record.offset} does not follow {previous}")
        previous = record.offset
        encode_record(record, base_offset, base_timestamp, out)
    return out


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = _compression.NONE,
    timestamp_type: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    log_append_time: int | None = None,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
) -> bytearray:
    """A complete RecordBatch v2 (header, CRC32C, compressed records).

    Offset deltas come from the records' own offsets relative to
    ``base_offset``, so a compacted batch keeps its gaps. ``last_offset_delta``
    may extend the batch past its last record (or describe an empty batch):
    the cleaner keeps a batch's last offset so producer state survives.
    baseTimestamp is the first record's timestamp, or ``delete_horizon_ms``
    when given (KIP-534 stores the horizon there and sets attributes bit 6).
    A LogAppendTime batch's maxTimestamp is ``log_append_time`` if given.
    """
    if not 0 <= compression <= MAX_COMPRESSION_TYPE:
        raise ValueError(f"unknown compression type {compression}")
    if timestamp_type not in (0, 1):
        raise ValueError(f"unknown timestamp type {timestamp_type}")
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    elif records:
        base_timestamp = records[0].timestamp
    else:
        base_timestamp = NO_TIMESTAMP
    if timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME and log_append_time is not None:
        max_timestamp = log_append_time
    elif records:
        max_timestamp = max(record.timestamp for record in records)
    else:
        max_timestamp = NO_TIMESTAMP
    encoded = encode_records(records, base_offset, base_timestamp)
    records_delta = records[-1].offset - base_offset if records else 0
    if last_offset_delta is None:
        last_offset_delta = records_delta
    elif last_offset_delta < records_delta or last_offset_delta > _INT32_MAX:
        raise ValueError(f"last_offset_delta {last_offset_delta} does not cover the records")
    attributes = compression | (timestamp_type << 3)
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG
    payload = _compression.compress(compression, encoded) if compression else encoded
    return build_batch_header(
        base_offset=base_offset,
        records_size=len(payload),
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
        partition_leader_epoch=partition_leader_epoch,
        records=payload,
    )
