"""A coordinator's view of its internal topic: append records, load a partition back.

Kafka's PartitionWriter and CoordinatorLoader in one narrow interface. A
coordinator's logic talks to :class:`CoordinatorLog` only, so it runs against
the broker's replica manager (:class:`ReplicaCoordinatorLog`) and against an
in-memory log in unit tests. Appends complete through a callback, as Kafka's
``ReplicaManager.appendRecords`` does, always on a later turn of the event
loop: the coordinator never blocks, and never sees its callback run inside
its own ``append`` call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import NamedTuple, Protocol

from protocol.control_records import parse_end_txn_marker
from protocol.errors import CorruptRecordError, ErrorCode
from protocol.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, iter_batch_headers
from protocol.records import Record, build_batch, iter_records
from replication.replica_manager import PartitionAppendResult, ReplicaManager
from replication.txn_verification import TransactionalProduce
from storage.log_append import AppendOrigin

log = logging.getLogger(__name__)

#: (key, value) pairs; a None value is a tombstone.
KeyValues = list[tuple[bytes, bytes | None]]
#: Called on the event loop with the append's error and the first offset it got.
AppendCallback = Callable[[ErrorCode, int | None], None]
#: An append's error -> what a coordinator answers the request that waited for it (Kafka's
#: GroupCoordinatorService.handleOperationException and TransactionStateManager.appendTransactionToLog):
#: a retriable error where another replica or a later try may succeed, NOT_COORDINATOR where this
#: broker lost the partition. A request type may override an entry (a classic group's join answers a
#: timeout with REBALANCE_IN_PROGRESS).
APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}

#: Kafka's offsets.load.buffer.size / transaction.state.log.load.buffer.size default.
LOAD_BUFFER_SIZE = 5 * 1024 * 1024


class RecordEntry(NamedTuple):
    """A data record of the log, and the producer whose transaction holds it."""

    offset: int
    key: bytes | None
    value: bytes | None
    #: The producer id of a transactional batch's record; NO_PRODUCER_ID outside a transaction.
    transactional_producer_id: int = NO_PRODUCER_ID


class TxnMarkerEntry(NamedTuple):
    """A COMMIT/ABORT marker in the log: the end of a producer's transaction there."""

    offset: int
    producer_id: int
    committed: bool


LogEntry = RecordEntry | TxnMarkerEntry


class CoordinatorLog(Protocol):
    num_partitions: int

    def is_local_leader(self, partition: int) -> bool: ...

    def log_end_offset(self, partition: int) -> int: ...

    def append(self, partition: int, records: KeyValues, timestamp: int, callback: AppendCallback, *,
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
               transactional_id: str | None = None, add_to_transaction: bool = False) -> None:
        """Append ``records`` as one batch; with a producer id, a transactional batch of that
        producer's transaction (Kafka's TxnOffsetCommit writes its offsets so). With its
        ``transactional_id`` the partition verifies the transaction first (KIP-890 part 1), as a
        produce is verified: a TxnOffsetCommit delayed past its transaction's end is refused
        rather than opening a transaction nobody ends. ``add_to_transaction`` (TxnOffsetCommit v5,
        transaction version 2): the partition joins the transaction then, with no AddOffsetsToTxn."""
        ...

    def read_records(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every data record, in offset order (blocking)."""
        ...

    def read_entries(self, partition: int) -> Iterator[LogEntry]:
        """Every data record and transaction marker, in offset order (blocking): what a
        coordinator that keeps transactional writes pending until their marker loads from."""
        ...


def build_records_batch(records: KeyValues, timestamp: int, producer_id: int = NO_PRODUCER_ID,
                        producer_epoch: int = NO_PRODUCER_EPOCH) -> bytearray:
    built = [Record(i, timestamp, key, value) for i, (key, value) in enumerate(records)]
    if producer_id == NO_PRODUCER_ID:
        return build_batch(built)
    # Sequence 0, as Kafka's coordinator writes it: only a client's appends are sequence-checked.
    return build_batch(built, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
                       is_transactional=True)


class ReplicaCoordinatorLog:
    """An internal topic as hosted by this broker, through its replica manager only.

    Appends are ``acks=-1`` with the coordinator's append timeout (Kafka's
    ``offsets.commit.timeout.ms``), so they are acknowledged once in the ISR.
    """

    def __init__(self, topic: str, num_partitions: int, replica_manager: ReplicaManager,
                 append_timeout_ms: int) -> None:
        self.topic = topic
        self.num_partitions = num_partitions
        self.replica_manager = replica_manager
        self.append_timeout_ms = append_timeout_ms
        self._in_flight: set[asyncio.Future[list[PartitionAppendResult]]] = set()

    def is_local_leader(self, partition: int) -> bool:
        p = self.replica_manager.get_partition(self.topic, partition)
        return p is not None and p.is_leader

    def log_end_offset(self, partition: int) -> int:
        p = self.replica_manager.get_partition(self.topic, partition)
        return 0 if p is None else p.log_end_offset

    def append(self, partition: int, records: KeyValues, timestamp: int, callback: AppendCallback, *,
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
               transactional_id: str | None = None, add_to_transaction: bool = False) -> None:
        batch = build_records_batch(records, timestamp, producer_id, producer_epoch)
        # TRANSACTION_ABORTABLE is answered as INVALID_TXN_STATE, which every TxnOffsetCommit version knows.
        transactional = (None if transactional_id is None or producer_id == NO_PRODUCER_ID
                         else TransactionalProduce(transactional_id, abortable_supported=False,
                                                   add_partitions=add_to_transaction))
        outcome = self.replica_manager.append_records([(self.topic, partition, batch)], -1,
                                                      self.append_timeout_ms, AppendOrigin.COORDINATOR,
                                                      transactional)
        loop = asyncio.get_running_loop()
        if isinstance(outcome, list):
            loop.call_soon(self._complete, partition, outcome[0], callback)
            return
        future = asyncio.ensure_future(outcome)
        self._in_flight.add(future)

        def done(f: asyncio.Future[list[PartitionAppendResult]]) -> None:
            self._in_flight.discard(f)
            if f.cancelled():
                callback(ErrorCode.NOT_COORDINATOR, None)
                return
            exc = f.exception()
            if exc is not None:
                log.error("append to %s-%d failed", self.topic, partition, exc_info=exc)
                callback(ErrorCode.UNKNOWN_SERVER_ERROR, None)
                return
            self._complete(partition, f.result()[0], callback)

        future.add_done_callback(done)

    def _complete(self, partition: int, result: PartitionAppendResult, callback: AppendCallback) -> None:
        if result.error_code != ErrorCode.NO_ERROR:
            log.debug("append to %s-%d failed: %s", self.topic, partition, result.error_message)
        first = result.info.first_offset if result.info is not None else None
        callback(ErrorCode(result.error_code), first)

    def read_records(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """Read the partition from its log start to its current end (Kafka's CoordinatorLoader):
        the data records only."""
        for entry in self.read_entries(partition):
            if isinstance(entry, RecordEntry):
                yield entry.offset, entry.key, entry.value

    def read_entries(self, partition: int) -> Iterator[LogEntry]:
        """Read the partition from its log start to its current end, a buffer at a time
        (Kafka's CoordinatorLoader): data records with the producer of their transaction,
        and the COMMIT/ABORT markers that end transactions. Other control records (and
        keyless records) are skipped."""
        tp = (self.topic, partition)
        hosted = self.replica_manager.get_partition(*tp)
        if hosted is None:
            return
        offset, end = hosted.log_start_offset, hosted.log_end_offset
        while offset < end:
            read = self.replica_manager.read_log(tp, offset, LOAD_BUFFER_SIZE)
            info = read.info
            if info is None or info.records is None or info.records.size == 0:
                return
            data = info.records.read_bytes()
            for position, header in iter_batch_headers(data):
                if header.base_offset >= end:
                    return
                offset = header.last_offset + 1
                if header.is_control:
                    marker = self._marker(data, position, partition, header.base_offset)
                    if marker is not None:
                        yield TxnMarkerEntry(header.base_offset, header.producer_id, marker)
                    continue
                producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
                for record in iter_records(data, position):
                    if record.key is not None:
                        yield RecordEntry(record.offset, record.key, record.value, producer_id)

    def _marker(self, data: bytes, position: int, partition: int, offset: int) -> bool | None:
        """COMMIT (True) or ABORT (False) of the control batch at ``position``; None for another type."""
        for record in iter_records(data, position):
            try:
                return parse_end_txn_marker(record).is_commit
            except CorruptRecordError as exc:
                log.debug("control record at offset %d of %s-%d is no transaction marker: %s",
                          offset, self.topic, partition, exc)
                return None
        return None

    def __repr__(self) -> str:
        return f"ReplicaCoordinatorLog({self.topic}, partitions={self.num_partitions})"
