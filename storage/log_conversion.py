"""Kafka's LogValidator conversion path: a produced message set of format v0/v1
checked as Kafka checks it and up-converted to the one v2 batch the log stores.

Only Produce v0-v2 carry these formats, and only they come here: conversion
reads and rebuilds every record (decompressing and recompressing a wrapper),
about 4 us a record whatever the codec (measured: 1,000 records of 100 bytes in
3-7 ms, 10,000 in 40-50 ms), so the replica manager runs it on the append
thread, right before the append (``ReplicaManager.append_converted_records``),
never on the event loop. The converted batch then takes
the same append as any v2 batch: max.message.bytes, keys on compacted topics,
LogAppendTime stamping, offsets and the time index.
"""

from __future__ import annotations

from protocol.legacy_record import MAGIC_POSITION, up_convert
from protocol.record_batch import (
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    peek_offset_and_length,
)
from storage.errors import InvalidTimestampError, RecordTooLargeError
from storage.log_config import LogConfig

__all__ = ["convert_for_append"]

#: A v0 message's smallest size field (crc, magic, attributes, key and value lengths).
_MIN_V0_MESSAGE_SIZE = 14


def convert_for_append(records: bytearray | memoryview, config: LogConfig, now: int) -> bytearray | memoryview:
    """The v2 bytes to append for one partition entry of a Produce v0-v2 request.

    A v2 batch (Kafka accepts one in these versions too; the request handler
    checked it as for v3+) passes unchanged. A message set holding no whole
    message appends nothing, as in Kafka, whose append then answers no error and
    no offset. Raises CorruptRecordError and its subclasses (CRC, structure,
    zstd), RecordTooLargeError and InvalidTimestampError with Kafka's codes.
    """
    if len(records) > MAGIC_POSITION and records[MAGIC_POSITION] == CURRENT_MAGIC:
        return bytearray(records) if isinstance(records, memoryview) and records.readonly else records
    if not _holds_a_whole_message(records):
        return bytearray()
    _check_message_sizes(records, config)
    batch, messages = up_convert(records)
    check_before = not config.log_append_time
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    for message in messages:
        ts = message.timestamp
        if check_before and ts != NO_TIMESTAMP and (now - ts > before or ts - now > after):
            raise InvalidTimestampError(f"timestamp {ts} of message with offset {message.offset} is out of "
                                        f"the accepted range around {now}")
        if message.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME:
            raise InvalidTimestampError("Producer should not set timestamp type to LogAppendTime")
    return batch


def _holds_a_whole_message(records: bytearray | memoryview) -> bool:
    """False when the set is shorter than its first message (a trailing partial message is ignored)."""
    if len(records) < LOG_OVERHEAD:
        return False
    _, size = peek_offset_and_length(records, 0)
    # A size below any message's minimum is corrupt, not partial: up_convert reports it.
    return size < _MIN_V0_MESSAGE_SIZE or LOG_OVERHEAD + size <= len(records)


def _check_message_sizes(records: bytearray | memoryview, config: LogConfig) -> None:
    """Kafka checks each message (a wrapper counts as one) against max.message.bytes before
    converting, and the converted batch again after; the log does the second check."""
    pos, end, limit = 0, len(records), config.max_message_bytes
    while end - pos >= LOG_OVERHEAD:
        _, size = peek_offset_and_length(records, pos)
        if size < 0:
            return  # corrupt: up_convert reports it
        if LOG_OVERHEAD + size > limit:
            raise RecordTooLargeError(f"message of {LOG_OVERHEAD + size} bytes exceeds max.message.bytes {limit}")
        pos += LOG_OVERHEAD + size
