"""Partition: a log plus its replication state (leader epoch, ISR, high watermark).

This is Kafka's ``kafka.cluster.Partition`` reduced to what a broker needs
today: the leader's side. With a single broker the ISR is the leader alone, so
an append is committed (the high watermark moves) as soon as it is in the log;
``acks=all`` then means exactly what it means in Kafka with one in-sync replica.
The follower side (fetchers, ISR shrink/expand) builds on the same object.

Only the replica manager calls into a Partition; everything else goes through
:class:`replication.replica_manager.ReplicaManager`.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.record_batch import last_offset_delta_and_timestamps
from protocol.request_constants import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
)
from storage.log import FetchIsolation, Log
from storage.log_append import AppendOrigin, LogAppendInfo
from storage.log_segment import FetchDataInfo
from storage.producer_state import SENTINEL_GUARD, VerificationGuard

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogReadResult:
    """What a fetch of one partition found, with the offsets the response reports.

    ``info`` is None when the read failed (``error_code`` says why); the offsets
    are then the partition's current ones, or -1 when it is not hosted here.
    """

    error_code: int
    info: FetchDataInfo | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int


def read_error(error_code: int, partition: Partition | None) -> LogReadResult:
    if partition is None:
        return LogReadResult(error_code, None, -1, -1, -1, -1)
    return LogReadResult(error_code, None, partition.high_watermark, partition.last_stable_offset,
                         partition.log_start_offset, partition.log_end_offset)


class Partition:
    __slots__ = (
        '__weakref__', 'broker_id', 'isr', 'leader_epoch', 'leader_id', 'log', 'partition_epoch', 'partition_index',
        'replicas', 'topic', 'topic_id',
    )

    def __init__(
        self,
        topic: str,
        partition_index: int,
        topic_id: uuid.UUID,
        log: Log,
        broker_id: int,
        replicas: list[int],
        leader_epoch: int = 0,
    ) -> None:
        self.topic = topic
        self.partition_index = partition_index
        self.topic_id = topic_id
        self.log = log
        self.broker_id = broker_id
        self.replicas = list(replicas)
        self.isr = [broker_id]
        self.leader_id = broker_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = 0

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition_index}, epoch={self.leader_epoch})"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the HW, or the first offset of the oldest open transaction below it."""
        return self.log.last_stable_offset

    def leader_epoch_error(self, current_leader_epoch: int) -> ErrorCode | None:
        """Kafka's epoch fencing (KIP-320): a request naming another epoch than ours is refused."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return None
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    # -- append -------------------------------------------------------------------
    def isr_too_small(self) -> str:
        """Why acks=all is refused here: fewer in-sync replicas than min.insync.replicas
        (the replica manager compares the sizes before writing, as Kafka does)."""
        return (f"The size of the current ISR {self.isr} is insufficient to satisfy the min.isr requirement of "
                f"{self.log.config.min_insync_replicas} for partition {self.topic}-{self.partition_index}")

    def maybe_start_transaction_verification(self, producer_id: int, producer_epoch: int,
                                             now: int) -> VerificationGuard:
        """KIP-890 part 1 (Kafka's maybeStartTransactionVerification): SENTINEL_GUARD when the
        producer's transaction is already open here (nothing to verify), else the guard a
        verified append must carry. Event loop only: each step is one dict operation, and the
        guard is created before the coordinator is asked, so a marker written meanwhile clears it."""
        state = self.log.producer_state
        if state is None or state.has_ongoing_transaction(producer_id, producer_epoch):
            return SENTINEL_GUARD
        return state.maybe_create_verification_state_entry(producer_id, producer_epoch, now)

    def append_records_to_leader(self, records: bytearray | memoryview, origin: AppendOrigin,
                                 now: int | None = None,
                                 verification_guard: VerificationGuard | None = None) -> LogAppendInfo:
        """Append as leader and advance the HW (the ISR is this broker alone).

        Blocking (may fsync on roll or under flush.messages): the replica manager
        calls it on the append thread, never on the event loop.
        """
        info = self.log.append_as_leader(records, self.leader_epoch, origin, now,
                                         verification_guard=verification_guard)
        self.maybe_increment_high_watermark()
        return info

    def reserve_append(self, records: bytearray | memoryview, now: int) -> bool:
        """Take the log's lock for an append on the event loop: True when it is held and
        the append cannot block (no roll, no flush due); else nothing is held.

        The replica manager reserves every partition of a request, then appends them
        (``append_reserved``): two short passes keep the interpreter's working set of
        each in the CPU caches, which at 1,000 partitions a request is measurable.
        """
        log_ = self.log
        if not log_.lock.acquire(blocking=False):
            return False
        # Three header fields, not a full parse: the request's decoder checked this header.
        last_offset_delta, base_timestamp, max_timestamp = last_offset_delta_and_timestamps(records)
        # An implausible maxTimestamp is recomputed from the records by the append, so the roll
        # test cannot be answered from it here: such a batch goes to the append thread, whose
        # append asks the roll test again with the real maximum.
        if max_timestamp < base_timestamp or max_timestamp < 0 or log_.append_would_block(
                len(records), max_timestamp, last_offset_delta, now):
            log_.lock.release()
            return False
        return True

    def append_reserved(self, records: bytearray | memoryview, origin: AppendOrigin, now: int,
                        verification_guard: VerificationGuard | None = None) -> LogAppendInfo:
        """Append under the lock ``reserve_append`` took, release it, advance the HW."""
        log_ = self.log
        try:
            info = log_.append_as_leader(records, self.leader_epoch, origin, now, True, verification_guard)
        finally:
            log_.lock.release()
        self.maybe_increment_high_watermark()
        return info

    def release_reserved(self) -> None:
        """Give back a reservation that will not be used."""
        self.log.lock.release()

    def maybe_increment_high_watermark(self) -> bool:
        """Move the HW to the smallest log end offset in the ISR; True when it moved."""
        isr = self.isr
        if len(isr) == 1 and isr[0] == self.broker_id:
            log_ = self.log
            before = log_.high_watermark
            return log_.update_high_watermark(log_.log_end_offset) != before
        return False

    # -- read -----------------------------------------------------------------------
    def read_records(self, fetch_offset: int, max_bytes: int, isolation_level: int,
                     min_one_message: bool, fetch_only_committed: bool = True) -> LogReadResult:
        """Read for a consumer (up to the HW or LSO) or a follower (up to the log end).

        Offsets are sampled before the read so the response never reports a high
        watermark below the data it carries. Raises OffsetOutOfRangeError.
        """
        log_ = self.log
        hw = log_.high_watermark
        lso = log_.last_stable_offset
        log_start = log_.log_start_offset
        leo = log_.log_end_offset
        if not fetch_only_committed:
            isolation = FetchIsolation.LOG_END
        elif isolation_level == READ_COMMITTED:
            isolation = FetchIsolation.TXN_COMMITTED  # also collects the aborted transactions
        else:
            isolation = FetchIsolation.HIGH_WATERMARK
        info = log_.read(fetch_offset, max_bytes, min_one_message=min_one_message, isolation=isolation)
        return LogReadResult(ErrorCode.NO_ERROR, info, hw, lso, log_start, leo)

    def legacy_fetch_offsets_for_timestamp(self, timestamp: int, max_num_offsets: int,
                                           from_consumer: bool) -> list[int]:
        """ListOffsets v0: the log's offsets before a time; a consumer never sees beyond the high
        watermark: offsets above it are dropped and the high watermark leads the list instead."""
        offsets = self.log.legacy_fetch_offsets_before(timestamp, max_num_offsets)
        if not from_consumer:
            return offsets
        hw = self.log.high_watermark
        if offsets and offsets[0] > hw:
            return [hw, *(o for o in offsets if o <= hw)]
        return offsets

    def fetch_offset_for_timestamp(self, timestamp: int, isolation_level: int,
                                   from_replica: bool) -> tuple[int, int, int]:
        """ListOffsets: (timestamp, offset, leader epoch), or (-1, -1, -1) when nothing qualifies."""
        log_ = self.log
        if from_replica:
            last_fetchable = log_.log_end_offset
        elif isolation_level == READ_COMMITTED:
            last_fetchable = log_.last_stable_offset
        else:
            last_fetchable = log_.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            epoch = log_.leader_epoch_cache.epoch_for_offset(last_fetchable)
            return -1, last_fetchable, -1 if epoch is None else epoch
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return -1, -1, -1
        found = log_.fetch_offset_by_timestamp(timestamp)
        if found is None:
            return -1, -1, -1
        if timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP) and found.offset >= last_fetchable:
            return -1, -1, -1
        return found.timestamp, found.offset, -1 if found.leader_epoch is None else found.leader_epoch
