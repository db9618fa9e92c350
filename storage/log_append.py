"""What an append checks before anything is written (Kafka's LogValidator, batch level).

Only batch headers are read, plus the single control record of a transaction
marker. Offsets are assigned by the Log after these checks pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.buffers import Buffer
from protocol.control_records import parse_end_txn_marker
from protocol.errors import CorruptRecordError
from protocol.record_batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    RecordBatchHeader,
    peek_offset_and_length,
    validate_batch,
)
from protocol.records import iter_records, read_batch
from storage.errors import InvalidRecordError, InvalidTimestampError, RecordBatchTooLargeError, RecordTooLargeError
from storage.log_config import LogConfig
from storage.producer_state import (
    AppendOrigin,
    BatchMetadata,
    EndTxnMarker,
    OutOfOrderSequenceError,
    ProducerStateManager,
)

__all__ = ["AppendOrigin", "LogAppendInfo", "analyze_and_validate", "empty_append_info", "end_txn_marker"]


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    #: The broker's time stamped on the batches (LogAppendTime topics), else -1.
    log_append_time: int
    log_start_offset: int
    valid_bytes: int
    num_batches: int
    num_records: int
    #: True when an idempotent producer resent a batch already in the log:
    #: nothing was written and the offsets are the original ones.
    duplicate: bool = False


def empty_append_info(log_start_offset: int) -> LogAppendInfo:
    return LogAppendInfo(-1, -1, -1, -1, -1, log_start_offset, 0, 0, 0)


@dataclass
class AnalyzedAppend:
    batches: list[tuple[int, RecordBatchHeader]] = field(default_factory=list)
    valid_bytes: int = 0
    #: batch index → end-transaction marker, for control batches.
    markers: dict[int, EndTxnMarker | None] = field(default_factory=dict)
    duplicate: BatchMetadata | None = None

    def to_append_info(self, log_start_offset: int, log_append_time: int = -1) -> LogAppendInfo:
        if self.duplicate is not None:
            dup = self.duplicate
            return LogAppendInfo(dup.first_offset, dup.last_offset, dup.timestamp, dup.last_offset,
                                 -1, log_start_offset, 0, 0, 0, duplicate=True)
        if not self.batches:
            return empty_append_info(log_start_offset)
        batches = self.batches
        if len(batches) == 1:  # the common produce request: one batch per partition
            h = batches[0][1]
            return LogAppendInfo(h.base_offset, h.base_offset + h.last_offset_delta, h.max_timestamp,
                                 h.base_offset + h.last_offset_delta, log_append_time, log_start_offset,
                                 self.valid_bytes, 1, h.records_count)
        max_ts, max_ts_offset = -1, -1
        for _, header in batches:
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, header.last_offset
        return LogAppendInfo(
            batches[0][1].base_offset, batches[-1][1].last_offset, max_ts, max_ts_offset, log_append_time,
            log_start_offset, self.valid_bytes, len(batches), sum(h.records_count for _, h in batches),
        )


def analyze_and_validate(
    buf: Buffer,
    config: LogConfig,
    origin: AppendOrigin,
    now: int,
    producer_state: ProducerStateManager | None,
    assign_offsets: bool,
) -> AnalyzedAppend:
    """Check every whole batch of ``buf``; a trailing partial batch is ignored, as Kafka does."""
    result = AnalyzedAppend()
    pos, end = 0, len(buf)
    while end - pos >= LOG_OVERHEAD:
        _, batch_length = peek_offset_and_length(buf, pos)
        if end - pos < BATCH_HEADER_SIZE or pos + LOG_OVERHEAD + batch_length > end:
            break
        header = validate_batch(buf, pos)
        _check_batch(header, config, origin, now, assign_offsets)
        if assign_offsets and config.compact and not header.is_control:
            _check_keys(buf, pos, header)
        if result.batches and not assign_offsets and header.base_offset <= result.batches[-1][1].last_offset:
            raise InvalidRecordError(f"out of order offsets: batch at {header.base_offset} follows "
                                     f"{result.batches[-1][1].last_offset}")
        if header.is_control:
            result.markers[len(result.batches)] = end_txn_marker(buf, pos)
        result.batches.append((pos, header))
        pos += header.size_in_bytes
    if pos == 0 and end > 0:
        raise CorruptRecordError(f"append of {end} bytes holds no whole record batch")
    result.valid_bytes = pos
    if pos > config.segment_bytes:
        raise RecordBatchTooLargeError(f"append of {pos} bytes exceeds segment.bytes {config.segment_bytes}")
    if producer_state is not None:
        result.duplicate = _check_producer_state(result, producer_state, origin)
    return result


def _check_keys(buf: Buffer, pos: int, header: RecordBatchHeader) -> None:
    """Kafka's LogValidator: a compacted topic refuses records without a key.

    The one place the leader's append looks inside a batch, and only for
    compacted topics, as in Kafka (whose validator decompresses them too).
    """
    batch = memoryview(buf)[pos : pos + header.size_in_bytes]
    for record in iter_records(batch):
        if record.key is None:
            raise InvalidRecordError("Compacted topic cannot accept message without key")


def _check_batch(header: RecordBatchHeader, config: LogConfig, origin: AppendOrigin, now: int, leader: bool) -> None:
    if not leader:
        return  # as Kafka's appendAsFollower: the leader accepted it (record size not re-checked)
    if header.size_in_bytes > config.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes {config.max_message_bytes}"
        )
    if header.records_count < 1 or header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"batch record count {header.records_count} does not match lastOffsetDelta {header.last_offset_delta}"
        )
    if origin == AppendOrigin.CLIENT and header.is_control:
        raise InvalidRecordError("clients may not write control batches")
    if header.producer_id != NO_PRODUCER_ID and header.base_sequence < 0 and not header.is_control:
        raise InvalidRecordError(f"batch of producer {header.producer_id} has no sequence number")
    if not config.log_append_time:
        for ts in (header.base_timestamp, header.max_timestamp):
            if ts >= 0 and (now - ts > config.message_timestamp_before_max_ms
                            or ts - now > config.message_timestamp_after_max_ms):
                raise InvalidTimestampError(f"timestamp {ts} is out of the accepted range around {now}")


def end_txn_marker(buf: Buffer, pos: int) -> EndTxnMarker | None:
    """The end-transaction marker of the control batch at ``pos``; None for another control type."""
    _, records = read_batch(buf, pos)
    if not records:
        return None
    try:
        marker = parse_end_txn_marker(records[0])
    except CorruptRecordError:
        return None  # another control type (KRaft): not a transaction marker
    return EndTxnMarker(int(marker.control_type), marker.coordinator_epoch)


def _check_producer_state(
    result: AnalyzedAppend, producer_state: ProducerStateManager, origin: AppendOrigin
) -> BatchMetadata | None:
    """Duplicate detection and epoch/sequence rules, before anything is written.

    The state is only updated after the write, so several batches of one
    producer in one append are checked against the state for the first one and
    for contiguity with each other for the rest.
    """
    previous: dict[int, RecordBatchHeader] = {}
    for index, (_, header) in enumerate(result.batches):
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            continue
        if origin == AppendOrigin.CLIENT:
            duplicate = producer_state.find_duplicate_batch(header)
            if duplicate is not None:
                return duplicate
        prior = previous.get(pid)
        if prior is None:
            producer_state.validate_append(header, origin=origin, marker=result.markers.get(index))
        elif origin == AppendOrigin.CLIENT and not header.is_control and (
            header.producer_epoch != prior.producer_epoch
            or header.base_sequence != (prior.last_sequence + 1) % 0x80000000
        ):
            raise OutOfOrderSequenceError(
                f"batch of producer {pid} with sequence {header.base_sequence} does not follow "
                f"{prior.last_sequence} in the same append"
            )
        previous[pid] = header
    return None
