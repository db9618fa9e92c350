"""Producer state values: per-producer entries, batch metadata, transactions, errors.

The pieces of Kafka's ProducerStateEntry / BatchMetadata / TxnMetadata /
CompletedTxn and the typed errors of ProducerAppendInfo's checks, each
carrying the Kafka error code a produce is answered with. The manager that
keeps them per partition is ``storage.producer_state``.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.errors import ErrorCode
from protocol.record_batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, RecordBatchHeader
from storage.errors import StorageError

NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = 0x7FFFFFFF


# Control record types (the key of an end-transaction marker).
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1


class AppendOrigin(enum.Enum):
    """Who is appending: only client appends get sequence checks (as in Kafka)."""

    CLIENT = "client"
    REPLICATION = "replication"
    COORDINATOR = "coordinator"


# ---------------------------------------------------------------- errors


class ProducerStateError(StorageError):
    """A produce that breaks the producer's epoch, sequence or transaction rules."""


class OutOfOrderSequenceError(ProducerStateError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(ProducerStateError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(ProducerStateError):
    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(ProducerStateError):
    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


# ---------------------------------------------------------------- value types


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Sequences wrap from Int32.MAX_VALUE to 0 (DefaultRecordBatch's rule)."""
    return (sequence - decrement) % (_INT32_MAX + 1)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class BatchMetadata(NamedTuple):
    """What we remember of one appended batch."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class EndTxnMarker(NamedTuple):
    """The content of a control record: COMMIT (1) or ABORT (0), and the coordinator epoch."""

    control_type: int
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == CONTROL_TYPE_ABORT


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at ``last_offset``.

    ``is_aborted`` is None when the marker's content was not available (a
    rebuild from batch headers only).
    """

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool | None


class VerificationGuard:
    """A one-off token of one transaction verification (KIP-890 part 1, Kafka's VerificationGuard).

    Compared by identity: an append carrying a guard may start a transaction on
    the partition only while the producer's :class:`VerificationStateEntry` still
    holds that very guard. A marker or any other append of the producer clears
    the entry, so a verification answered before an abort marker can never
    append after it, even if a later verification of the same producer succeeds
    meanwhile (the ABA case).
    """

    __slots__ = ()

    def verify(self, request_guard: VerificationGuard) -> bool:
        return request_guard is self and self is not SENTINEL_GUARD


#: No verification was made: it never verifies anything.
SENTINEL_GUARD = VerificationGuard()


@dataclass(slots=True)
class VerificationStateEntry:
    """A verification of a producer's transaction in flight on one partition (Kafka's VerificationStateEntry)."""

    timestamp: int
    producer_epoch: int
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def maybe_update_epoch(self, epoch: int) -> None:
        # A newer epoch's verification reuses the entry (and its guard): an older one never lowers it.
        self.producer_epoch = max(self.producer_epoch, epoch)


@dataclass
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return NO_SEQUENCE if self.is_empty else self.batch_metadata[0].first_seq

    @property
    def last_seq(self) -> int:
        return NO_SEQUENCE if self.is_empty else self.batch_metadata[-1].last_seq

    @property
    def first_data_offset(self) -> int:
        return -1 if self.is_empty else self.batch_metadata[0].first_offset

    @property
    def last_data_offset(self) -> int:
        return -1 if self.is_empty else self.batch_metadata[-1].last_offset

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        """A new epoch starts a new sequence space: forget the old batches."""
        if epoch == self.producer_epoch:
            return False
        self.batch_metadata.clear()
        self.producer_epoch = epoch
        return True

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, header: RecordBatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        for meta in self.batch_metadata:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return meta
        return None

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp,
            self.current_txn_first_offset, deque(self.batch_metadata, maxlen=NUM_BATCHES_TO_RETAIN),
        )
