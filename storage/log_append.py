"""What an append checks before anything is written (Kafka's LogValidator).

A batch's records are read only when its header cannot vouch for them: on a
compacted topic (every record needs a key), or on a CreateTime topic when the
header's timestamps are implausible (maxTimestamp -1 or below baseTimestamp:
the records' real maximum must be computed, as Kafka does) or out of the
accepted range (the records at fault must be named). Every other batch is
judged by its header alone, plus the single control record of a transaction
marker. Offsets are assigned by the Log after these checks pass.

Records that fail a per-record check are reported by their index in the batch
(KIP-467), with Kafka's messages; the batch is refused whole either way.
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
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    RecordBatchHeader,
    patch_max_timestamp,
    peek_offset_and_length,
    validate_batch,
)
from protocol.records import read_batch
from storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    RecordError,
    RecordTooLargeError,
)
from storage.log_config import LogConfig
from storage.producer_state import (
    AppendOrigin,
    BatchMetadata,
    EndTxnMarker,
    OutOfOrderSequenceError,
    ProducerStateManager,
    VerificationGuard,
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
    topic_partition: str = "",
    verification_guard: VerificationGuard | None = None,
) -> AnalyzedAppend:
    """Check every whole batch of ``buf``; a trailing partial batch is ignored, as Kafka does.

    A leader's batch whose maxTimestamp is recomputed is patched in ``buf`` (field
    and CRC) and listed with the corrected header. ``topic_partition`` (``topic-0``)
    goes into per-record messages, as Kafka's name them. ``verification_guard``:
    see ``ProducerStateManager.validate_append``.
    """
    result = AnalyzedAppend()
    pos, end = 0, len(buf)
    while end - pos >= LOG_OVERHEAD:
        _, batch_length = peek_offset_and_length(buf, pos)
        if end - pos < BATCH_HEADER_SIZE or pos + LOG_OVERHEAD + batch_length > end:
            break
        header = validate_batch(buf, pos)
        if assign_offsets:  # the leader; a follower takes what its leader accepted (appendAsFollower)
            header = _check_batch(buf, pos, header, config, origin, now, topic_partition)
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
        result.duplicate = _check_producer_state(result, producer_state, origin, verification_guard)
    return result


def _check_batch(buf: Buffer, pos: int, header: RecordBatchHeader, config: LogConfig, origin: AppendOrigin,
                 now: int, topic_partition: str) -> RecordBatchHeader:
    """The leader's checks; returns the header, corrected when its maxTimestamp was recomputed.

    The common batch costs comparisons of header fields; the records are read only
    when the header cannot vouch for them (see the module's docstring).
    """
    if header.size_in_bytes > config.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes {config.max_message_bytes}"
        )
    # Batch-level rules: Kafka names no records for these either.
    if header.records_count < 1 or header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"batch record count {header.records_count} does not match lastOffsetDelta {header.last_offset_delta}"
        )
    if origin == AppendOrigin.CLIENT and header.is_control:
        raise InvalidRecordError("clients may not write control batches")
    if header.producer_id != NO_PRODUCER_ID and header.base_sequence < 0 and not header.is_control:
        raise InvalidRecordError(f"batch of producer {header.producer_id} has no sequence number")
    compact = config.compact
    if config.log_append_time:
        # The append stamps its own time: record timestamps are neither checked nor kept as the maximum.
        if compact and not header.is_control:
            _validate_records(buf, pos, topic_partition, True, None)
        return header
    base, max_ts = header.base_timestamp, header.max_timestamp
    low = now - config.message_timestamp_before_max_ms
    high = now + config.message_timestamp_after_max_ms
    # maxTimestamp -1 (sarama 1.22 writes it) or below the first record's: the records hold the real one.
    # A plausible header's extremes (the first record's and the largest timestamp; -1 is "none") out of
    # the accepted range: the records at fault are named. Records between them are not read, so one
    # older than both inside a batch goes unnoticed: the price of not parsing every batch.
    if ((compact or max_ts < base or max_ts < 0 or max_ts > high or (base < low and (base >= 0 or max_ts < low)))
            and not header.is_control):  # control records are the brokers' own
        real_max = _validate_records(buf, pos, topic_partition, compact, (low, high))
        if real_max != max_ts or header.attributes & TIMESTAMP_TYPE_MASK:
            # Kafka's setMaxTimestamp(CreateTime, max): the field, the topic's type bit and the CRC.
            if isinstance(buf, bytes):  # Log.append_as_leader copies bytes: the leader's batches are writable
                raise TypeError("a leader's append needs a writable buffer")
            patch_max_timestamp(buf, pos, header.size_in_bytes, real_max, 0)
            header = header._replace(max_timestamp=real_max, attributes=header.attributes & ~TIMESTAMP_TYPE_MASK)
    return header


def _validate_records(buf: Buffer, pos: int, topic_partition: str, check_keys: bool,
                      accepted: tuple[int, int] | None) -> int:
    """Kafka's per-record validation of one batch; returns its records' largest timestamp.

    A record without a key on a compacted topic fails with INVALID_RECORD; failing
    that, a record whose timestamp is outside ``accepted`` (inclusive bounds) fails
    with INVALID_TIMESTAMP. Every failing record is named, and the batch is refused
    as INVALID_TIMESTAMP when any timestamp failed, else as INVALID_RECORD.
    ``accepted`` None: timestamps are not checked (a LogAppendTime topic).
    """
    _, records = read_batch(buf, pos)  # decompresses; a batch that does not decode is CORRUPT_MESSAGE
    errors: list[RecordError] = []
    bad_timestamp = False
    max_ts = NO_TIMESTAMP
    for index, record in enumerate(records):
        ts = record.timestamp
        if ts > max_ts:
            max_ts = ts
        if check_keys and record.key is None:
            errors.append(RecordError(index, "Compacted topic cannot accept message without key in topic "
                                             f"partition {topic_partition}"))
        elif accepted is not None and ts != NO_TIMESTAMP and not accepted[0] <= ts <= accepted[1]:
            bad_timestamp = True
            errors.append(RecordError(index, f"Timestamp {ts} of message with offset {record.offset} is out of "
                                             f"range. The timestamp should be within [{_java_long(accepted[0])}, "
                                             f"{_java_long(accepted[1])}]"))
    if not errors:
        return max_ts
    if bad_timestamp:
        raise InvalidTimestampError("One or more records have been rejected due to invalid timestamp", tuple(errors))
    shown = ", ".join(str(e) for e in errors[:3])
    raise InvalidRecordError(f"One or more records have been rejected due to {len(errors)} record errors in total, "
                             f"and only showing the first three errors at most: [{shown}]", tuple(errors))


def _java_long(value: int) -> int:
    """``value`` as Kafka's message shows it: now + message.timestamp.after.max.ms wraps in a Java long."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


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
    result: AnalyzedAppend, producer_state: ProducerStateManager, origin: AppendOrigin,
    verification_guard: VerificationGuard | None,
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
            producer_state.validate_append(header, origin=origin, marker=result.markers.get(index),
                                           verification_guard=verification_guard)
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
