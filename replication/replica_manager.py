"""ReplicaManager: the partitions this broker hosts, and appends/reads across them.

Synchronous, like the storage it drives: the broker calls ``append_records``
from its append thread and ``read`` from the event loop (log reads take no lock
and never block on a flush). Errors come back per partition as Kafka error
codes, so one bad partition never fails a whole request.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Iterable

from protocol.errors import ErrorCode, ProtocolError
from protocol.record_batch import last_offset_delta_and_max_timestamp
from replication.partition import LogReadResult, Partition
from storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
)
from storage.log import now_ms
from storage.log_append import AppendOrigin, LogAppendInfo
from storage.log_manager import LogManager
from storage.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# Storage exceptions → the error code Kafka answers with for the same condition.
_APPEND_ERRORS: tuple[tuple[type[BaseException], ErrorCode], ...] = (
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
)


def error_code_for(exc: BaseException) -> ErrorCode:
    if isinstance(exc, ProtocolError):
        return exc.error_code
    for kind, code in _APPEND_ERRORS:
        if isinstance(exc, kind):
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(slots=True)
class PartitionAppendResult:
    error_code: int
    info: LogAppendInfo | None = None
    error_message: str | None = None


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        #: The same partitions by topic, in index order: Metadata, DescribeTopicPartitions and
        #: FindCoordinator list one topic's partitions without walking every partition hosted.
        self._by_topic: dict[str, dict[int, Partition]] = {}

    # -- partition lifecycle ---------------------------------------------
    def make_leader(self, topic: str, partition_index: int, topic_id: uuid.UUID, replicas: list[int],
                    leader_epoch: int = 0) -> Partition:
        """Host a partition as its leader, creating its log if needed."""
        tp = (topic, partition_index)
        partition = self.partitions.get(tp)
        if partition is None:
            log_ = self.log_manager.get_or_create_log(topic, partition_index)
            partition = Partition(topic, partition_index, topic_id, log_, self.broker_id, replicas, leader_epoch)
            # A single-replica leader owns everything in its log: committed.
            partition.maybe_increment_high_watermark()
            self.partitions[tp] = partition
            by_index = self._by_topic.setdefault(topic, {})
            out_of_order = bool(by_index) and partition_index < next(reversed(by_index))
            by_index[partition_index] = partition
            if out_of_order:
                self._by_topic[topic] = dict(sorted(by_index.items()))
        return partition

    def delete_partitions(self, topic: str) -> None:
        for index in list(self._by_topic.pop(topic, {})):
            del self.partitions[(topic, index)]
            self.log_manager.delete_log(topic, index)

    def get_partition(self, topic: str, partition_index: int) -> Partition | None:
        return self.partitions.get((topic, partition_index))

    def partitions_of(self, topic: str) -> list[Partition]:
        return list(self._by_topic.get(topic, {}).values())

    # -- append -----------------------------------------------------------
    def append_records(
        self,
        entries: Iterable[tuple[Partition, bytearray | memoryview]],
        origin: AppendOrigin = AppendOrigin.CLIENT,
        now: int | None = None,
        roll_checked: bool = False,
    ) -> list[PartitionAppendResult]:
        """Append each partition's batches; one result per entry, in order (blocking).

        ``now`` (ms), when given, is the append time of every entry; else each log reads the clock.
        ``roll_checked``: every log is locked by the caller, who found that none must roll
        for its entry (see ``try_append_without_blocking``).
        """
        results = []
        for partition, records in entries:
            try:
                info = partition.append_records_to_leader(records, origin, now, roll_checked)
                results.append(PartitionAppendResult(ErrorCode.NO_ERROR, info))
            except (StorageError, ProtocolError) as exc:
                code = error_code_for(exc)
                log.debug("append to %s failed: %s", partition, exc)
                results.append(PartitionAppendResult(code, None, str(exc)))
            except Exception as exc:
                tp = (partition.topic, partition.partition_index)
                if self.partitions.get(tp) is not partition:
                    # Deleted (or replaced) between the request's lookup and this append.
                    results.append(PartitionAppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, str(exc)))
                    continue
                log.error("error appending to %s: %s", partition, exc)
                results.append(PartitionAppendResult(ErrorCode.KAFKA_STORAGE_ERROR, None, str(exc)))
        return results

    def try_append_without_blocking(
        self, entries: list[tuple[Partition, bytearray | memoryview]], origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> list[PartitionAppendResult] | None:
        """Append now if no log involved is locked by another thread and none would
        fsync (roll or flush.messages); None when the append must go to a thread.

        Each entry is one validated batch (its header is read for the roll test).
        """
        # One clock read for the request, not two per partition batch: with 1,000
        # partitions a request carries 1,000 batches.
        now = now_ms()
        locked = []
        try:
            for partition, records in entries:
                log_ = partition.log
                if not log_.lock.acquire(blocking=False):
                    return None
                locked.append(log_.lock)
                # Two header fields, not a full parse: the handler already checked this header.
                last_offset_delta, max_timestamp = last_offset_delta_and_max_timestamp(records)
                if log_.append_would_block(len(records), max_timestamp, last_offset_delta, now):
                    return None
            return self.append_records(entries, origin, now, roll_checked=True)
        finally:
            for lock in locked:
                lock.release()

    # -- read -------------------------------------------------------------
    @staticmethod
    def read(partition: Partition, fetch_offset: int, max_bytes: int, isolation_level: int,
             min_one_message: bool, fetch_only_committed: bool = True) -> LogReadResult:
        return partition.read_records(fetch_offset, max_bytes, isolation_level, min_one_message, fetch_only_committed)
