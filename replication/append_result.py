"""What an append answers per partition (Kafka's LogAppendResult), and the Kafka error code each
failure of an append becomes.

The replica manager's appends (produce, the coordinators, transaction markers) answer one
:class:`PartitionAppendResult` per partition, so that one partition's bad batch or missing
leadership never fails the others of its request.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.errors import ErrorCode, ProtocolError
from replication.partition import NotLeaderOrFollowerError
from storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordError,
    RecordTooLargeError,
    StorageError,
)
from storage.log_append import LogAppendInfo
from storage.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)

# Storage exceptions → the error code Kafka answers with for the same condition.
APPEND_ERRORS: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (RecordBatchTooLargeError, ErrorCode.RECORD_LIST_TOO_LARGE),
    (InvalidTimestampError, ErrorCode.INVALID_TIMESTAMP),
    (InvalidRecordError, ErrorCode.INVALID_RECORD),
    (OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
    (TransactionCoordinatorFencedError, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (OffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
    (KafkaStorageError, ErrorCode.KAFKA_STORAGE_ERROR),
    (NotLeaderOrFollowerError, ErrorCode.NOT_LEADER_OR_FOLLOWER),
)
#: What an append may raise that becomes a per-partition error code.
APPEND_EXCEPTIONS = (StorageError, ProtocolError, NotLeaderOrFollowerError)


def error_code_for(exc: BaseException) -> ErrorCode:
    """The code a partition's answer carries for what its append raised."""
    if isinstance(exc, ProtocolError):
        return exc.error_code
    for kind, code in APPEND_ERRORS:
        if isinstance(exc, kind):
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(slots=True)
class PartitionAppendResult:
    """One partition's answer to an append: its error code and, on success, where the batch went."""

    error_code: int
    info: LogAppendInfo | None = None
    error_message: str | None = None
    #: The records a per-record check refused, by index in their batch (KIP-467).
    record_errors: tuple[RecordError, ...] = ()
