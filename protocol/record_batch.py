"""RecordBatch v2 headers: parse, verify, patch, build (hand-written; no schema describes them).

Layout of the 61-byte header (all big-endian)::

    0  baseOffset           int64
    8  batchLength          int32   bytes after this field
    12 partitionLeaderEpoch int32
    16 magic                int8    (2; at the same position in v0/v1 message sets)
    17 crc                  uint32  CRC32C of everything from attributes to the end
    21 attributes           int16
    23 lastOffsetDelta      int32
    27 baseTimestamp        int64
    35 maxTimestamp         int64
    43 producerId           int64
    51 producerEpoch        int16
    53 baseSequence         int32
    57 recordsCount         int32

The hot paths use only these functions: a produced batch is checked and has
its base offset patched in place, and its records are never parsed.

CRC32C comes from the ``crc32c`` package: a C core that takes any buffer
(bytes, bytearray, memoryview) without copying it, so checking a produced batch
costs no copy. It is LGPL-2.1+ and used unmodified as a separately installed
library. ``google-crc32c`` (Apache-2.0) was the alternative, but it refuses
memoryview/bytearray input, which would force a copy of every batch on the
produce path.

A v0/v1 message set (magic 0 or 1, at the same offset 16) is recognised and
refused with INVALID_RECORD: Kafka 4 removed those formats (KIP-724), accepts
only Produce v3+, and its ProduceRequest.validateRecords rejects any other
magic with an InvalidRecordException, which maps to INVALID_RECORD (87).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from protocol.buffers import Buffer
from protocol.errors import CorruptRecordError, ErrorCode, UnsupportedRecordFormatError

#: baseOffset + batchLength: the part of a batch not counted in batchLength.
LOG_OVERHEAD = 12
BATCH_HEADER_SIZE = 61
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12
CURRENT_MAGIC = 2

#: Smallest legal batchLength: the header after LOG_OVERHEAD.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

# attributes bits
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

#: Codec ids 0-4 (none, gzip, snappy, lz4, zstd); 5-7 fit the mask but mean nothing.
MAX_COMPRESSION_TYPE = 4
TIMESTAMP_TYPE_CREATE_TIME = 0
TIMESTAMP_TYPE_LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_LENGTH = struct.Struct(">qi")
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
#: lastOffsetDelta, baseTimestamp, maxTimestamp.
_LAST_DELTA_TIMESTAMPS = struct.Struct(">iqq")


class RecordBatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        """The whole batch on disk / on the wire."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression_type(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def delete_horizon_ms(self) -> int:
        """When the cleaner may drop this batch's tombstones (KIP-534), else NO_TIMESTAMP.

        The horizon is stored as baseTimestamp; record timestamps stay relative to it.
        """
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG else NO_TIMESTAMP

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at Int32.MAX_VALUE, as in Kafka's DefaultRecordBatch.
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def peek_offset_and_length(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """(baseOffset, batchLength) of the batch at ``pos``; needs only 12 bytes."""
    if len(buf) - pos < LOG_OVERHEAD:
        raise CorruptRecordError(f"truncated batch at {pos}: fewer than {LOG_OVERHEAD} bytes")
    return _OFFSET_LENGTH.unpack_from(buf, pos)


def parse_batch_header(buf: Buffer, pos: int = 0) -> RecordBatchHeader:
    """Parse and sanity-check the header of the batch at ``pos`` (no CRC check).

    Raises UnsupportedRecordFormatError for a v0/v1 message set and
    CorruptRecordError when the header is short or its length is impossible.
    """
    available = len(buf) - pos
    if available < MAGIC_OFFSET + 1:
        raise CorruptRecordError(f"truncated batch at {pos}: {available} bytes")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != CURRENT_MAGIC:
        if magic in (0, 1):
            raise UnsupportedRecordFormatError(
                f"message format v{magic} is not supported (Kafka 4 accepts only v2)",
                error_code=ErrorCode.INVALID_RECORD,
            )
        raise CorruptRecordError(f"invalid magic {magic} at {pos}")
    if available < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"truncated batch header at {pos}: {available} bytes")
    header = RecordBatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {header.batch_length} below the minimum at {pos}")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptRecordError(f"negative offset delta or record count at {pos}")
    return header


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC32C over attributes..end of the batch of ``size`` bytes at ``pos``."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def is_crc_valid(buf: Buffer, pos: int = 0, header: RecordBatchHeader | None = None) -> bool:
    if header is None:
        header = parse_batch_header(buf, pos)
    size = header.size_in_bytes
    if len(buf) - pos < size:
        return False
    return compute_crc(buf, pos, size) == header.crc


def validate_batch(buf: Buffer, pos: int = 0) -> RecordBatchHeader:
    """Header sanity, CRC32C and a known codec; the produce path's only look at a batch."""
    header = parse_batch_header(buf, pos)
    size = header.size_in_bytes
    if len(buf) - pos < size:
        raise CorruptRecordError(
            f"batch at {pos} claims {size} bytes, only {len(buf) - pos} present"
        )
    if compute_crc(buf, pos, size) != header.crc:
        raise CorruptRecordError(f"CRC32C mismatch in batch at {pos}")
    if header.compression_type > MAX_COMPRESSION_TYPE:
        # Kafka fails such a batch while validating it (CompressionType.forId).
        raise CorruptRecordError(
            f"unknown compression type id {header.compression_type} in batch at {pos}"
        )
    return header


def last_offset_delta_and_timestamps(buf: Buffer, pos: int = 0) -> tuple[int, int, int]:
    """(lastOffsetDelta, baseTimestamp, maxTimestamp) of a batch whose header was already
    checked, without building a RecordBatchHeader: what a segment's roll test needs (and
    whether the leader will recompute the maximum first), once per partition batch."""
    return _LAST_DELTA_TIMESTAMPS.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)


def iter_batch_headers(buf: Buffer, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, RecordBatchHeader]]:
    """(position, header) of each whole batch in ``buf[pos:end]``; validates no CRC.

    Stops at the first incomplete batch (a partial batch at the end of a fetch
    response is normal); raises on a header that is not a v2 batch.
    """
    end = len(buf) if end is None else end
    while end - pos >= LOG_OVERHEAD:
        header = parse_batch_header(buf, pos) if end - pos >= BATCH_HEADER_SIZE else None
        if header is None or pos + header.size_in_bytes > end:
            return
        yield pos, header
        pos += header.size_in_bytes


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign the batch's offsets; baseOffset is outside the CRC, so no re-checksum."""
    _INT64.pack_into(buf, pos, base_offset)


def patch_base_offset_and_epoch(buf: bytearray | memoryview, pos: int, base_offset: int, batch_length: int,
                                epoch: int) -> None:
    """Both leader stamps in one pack: baseOffset and partitionLeaderEpoch, with the
    batchLength between them written back unchanged; none is covered by the CRC."""
    _OFFSET_LENGTH_EPOCH.pack_into(buf, pos, base_offset, batch_length, epoch)


def patch_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch; it is outside the CRC like baseOffset."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def patch_max_timestamp(buf: bytearray | memoryview, pos: int, size: int, timestamp: int, timestamp_type: int) -> None:
    """LogAppendTime: set the timestamp type bit and maxTimestamp, then re-checksum.

    Unlike the offset and epoch these fields are covered by the CRC.
    """
    attributes = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)[0]
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_MASK
    else:
        attributes &= ~TIMESTAMP_TYPE_MASK
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def build_batch_header(
    *,
    base_offset: int,
    records_size: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    records_count: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    records: Buffer = b"",
) -> bytearray:
    """A complete batch: header (with its CRC) followed by ``records``.

    ``records`` is the already encoded (and possibly compressed) record data;
    ``records_size`` must equal its length.
    """
    if records_size != len(records):
        raise ValueError("records_size does not match the records given")
    out = bytearray(BATCH_HEADER_SIZE + records_size)
    _HEADER.pack_into(
        out, 0, base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + records_size,
        partition_leader_epoch, CURRENT_MAGIC, 0, attributes, last_offset_delta,
        base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count,
    )
    out[BATCH_HEADER_SIZE:] = records
    _UINT32.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return out
