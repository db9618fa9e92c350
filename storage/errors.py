"""Typed storage errors, each carrying the Kafka error code the broker answers with."""

from __future__ import annotations

from typing import NamedTuple

from protocol.errors import ErrorCode


class RecordError(NamedTuple):
    """One rejected record of a batch (KIP-467): its index in the batch and why."""

    batch_index: int
    message: str

    def __str__(self) -> str:
        # Kafka's RecordError.toString, which its summary message embeds.
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


class StorageError(Exception):
    """Base of the storage layer's errors; ``error_code`` is what a client sees.

    ``record_errors`` names the records that failed a per-record check (Produce
    v8+ reports them so a producer fails only those and retries the rest); it is
    empty for an error about the batch as a whole.
    """

    error_code: ErrorCode = ErrorCode.KAFKA_STORAGE_ERROR
    record_errors: tuple[RecordError, ...] = ()

    def __init__(self, message: str = "", record_errors: tuple[RecordError, ...] = ()) -> None:
        super().__init__(message)
        if record_errors:
            self.record_errors = record_errors


class OffsetOutOfRangeError(StorageError):
    """A fetch or truncation names an offset outside [logStartOffset, logEndOffset]."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class RecordTooLargeError(StorageError):
    """A batch is larger than ``max.message.bytes`` (Kafka's MESSAGE_TOO_LARGE)."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(StorageError):
    """One append is larger than a whole segment (``segment.bytes``)."""

    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidTimestampError(StorageError):
    """A CreateTime timestamp outside message.timestamp.before/after.max.ms."""

    error_code = ErrorCode.INVALID_TIMESTAMP


class InvalidRecordError(StorageError):
    """A batch whose header contradicts itself (e.g. count vs. lastOffsetDelta), or
    records a topic refuses (a record without a key on a compacted topic)."""

    error_code = ErrorCode.INVALID_RECORD


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose offsets go backwards (replication bug or corruption)."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class KafkaStorageError(StorageError):
    """An I/O failure or a log directory that cannot be used (locked, unreadable)."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class CorruptIndexError(StorageError):
    """An index file fails its sanity check; the loader rebuilds it from the log."""

    error_code = ErrorCode.CORRUPT_MESSAGE
