"""Partition: a log plus its replication state (leader epoch, ISR, high watermark).

This is Kafka's ``kafka.cluster.Partition``. With a single broker the ISR is
the leader alone, so an append is committed (the high watermark moves) as soon
as it is in the log; ``acks=all`` then means exactly what it means in Kafka
with one in-sync replica.

In a cluster the controller's LeaderAndIsr makes a replica leader
(``make_leader``) or follower (``make_follower``). The leader tracks each
follower (``replication.replica.Replica``: log end offset, last caught-up
time) from its fetches; the high watermark is the smallest log end offset over
the ISR (the maximal ISR while a change is pending, and caught-up followers about
to join it) and never moves back. ``maybe_shrink_isr`` drops followers not
caught up for ``replica.lag.time.max.ms``; ``maybe_expand_isr`` adds a follower
that reached the high watermark (and the current leader epoch's start offset).
Both only *propose* the change (``replication.partition_state``): the replica
manager sends it to the controller (AlterPartition) and hands the answer to
``handle_alter_partition_result``.

Threads: leadership, ISR and follower state change on the event loop; appends
run on the append thread (or on the loop when they cannot block) and read them.

Only the replica manager calls into a Partition; everything else goes through
:class:`replication.replica_manager.ReplicaManager`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from protocol.errors import ErrorCode
from protocol.record_batch import last_offset_delta_and_timestamps
from protocol.request_constants import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
)
from replication.partition_state import (
    RECOVERED,
    LeaderAndIsr,
    PendingExpandIsr,
    PendingIsrState,
    PendingShrinkIsr,
)
from replication.replica import Replica
from storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from storage.log import FetchIsolation, Log, now_ms
from storage.log_append import AppendOrigin, LogAppendInfo
from storage.log_segment import FetchDataInfo, LogOffsetMetadata
from storage.producer_state import SENTINEL_GUARD, VerificationGuard
from storage.transaction_index import AbortedTxn

log = logging.getLogger(__name__)


class LogReadResult(NamedTuple):
    """What a fetch of one partition found, with the offsets the response reports.

    ``info`` is None when the read failed (``error_code`` says why); the offsets
    are then the partition's current ones, or -1 when it is not hosted here.
    A named tuple: a fetch makes one per partition it names, most of them empty.
    """

    error_code: int
    info: FetchDataInfo | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    #: KIP-320: (epoch, end offset) where the fetcher's log diverges from this one, when its
    #: last fetched epoch says so; the read then carries no records.
    diverging_epoch: tuple[int, int] | None = None
    #: KIP-392: the replica the consumer should fetch from instead (the read then carries no
    #: records), -1 for none.
    preferred_read_replica: int = -1


#: No leader (Kafka's LeaderAndIsr.NoLeader).
NO_LEADER = -1
#: The leader epoch of a partition no LeaderAndIsr has reached yet (Kafka's LeaderAndIsr.NoEpoch).
NO_EPOCH = -1
#: replica.lag.time.max.ms's default.
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000


class NotLeaderOrFollowerError(Exception):
    """An append as leader reached a partition this broker no longer leads."""

    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class PartitionStateLike(Protocol):
    """What make_leader/make_follower read of a LeaderAndIsr partition state."""

    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def isr(self) -> list[int]: ...
    @property
    def partition_epoch(self) -> int: ...
    @property
    def replicas(self) -> list[int]: ...
    @property
    def adding_replicas(self) -> list[int]: ...
    @property
    def removing_replicas(self) -> list[int]: ...
    @property
    def leader_recovery_state(self) -> int: ...


def _any_replica_eligible(replica_id: int) -> bool:
    """A lone broker's partitions, and tests': no metadata cache says otherwise."""
    return True


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def read_error(error_code: int, partition: Partition | None) -> LogReadResult:
    if partition is None:
        return LogReadResult(error_code, None, -1, -1, -1, -1)
    return LogReadResult(error_code, None, partition.high_watermark, partition.last_stable_offset,
                         partition.log_start_offset, partition.log_end_offset)


class Partition:
    __slots__ = (
        '__weakref__', '_hw_lock', 'adding_replicas', 'broker_id', 'isr', 'leader_epoch', 'leader_epoch_start_offset',
        'leader_id', 'leader_recovery_state', 'log', 'partition_epoch', 'partition_index', 'pending_isr',
        'remote_replicas', 'removing_replicas', 'replica_isr_eligible', 'replica_lag_time_max_ms', 'replicas',
        'topic', 'topic_id',
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
        self.leader_recovery_state = RECOVERED
        self.adding_replicas: list[int] = []
        self.removing_replicas: list[int] = []
        #: The ISR change proposed to the controller and not answered yet (None: committed).
        self.pending_isr: PendingIsrState | None = None
        #: The log end offset when this broker became leader at ``leader_epoch`` (None: not leader).
        self.leader_epoch_start_offset: int | None = log.log_end_offset
        self.replica_lag_time_max_ms = DEFAULT_REPLICA_LAG_TIME_MAX_MS
        #: Whether a follower may join the ISR (Kafka's isReplicaIsrEligible: in ZooKeeper mode, its
        #: broker is alive in the metadata cache). Only an eligible follower outside the ISR holds
        #: the high watermark back while it is caught up; a dead one must not, for its last
        #: caught-up time stays recent for replica.lag.time.max.ms after it died.
        self.replica_isr_eligible: Callable[[int], bool] = _any_replica_eligible
        #: The followers, as the leader knows them. The dict is replaced whole, never resized, so
        #: the append thread can iterate it while the loop changes leadership.
        self.remote_replicas: dict[int, Replica] = {}
        #: Makes the leader's check-and-move of the HW atomic: the append thread (after an append)
        #: and the loop (after a follower's fetch) both move it, and it must never move back.
        #: Held for the comparison and the assignment only, never across I/O.
        self._hw_lock = threading.Lock()
        now = now_ms()
        self._reset_remote_replicas(self.replicas, set(self.replicas), now, self.log.log_end_offset, True)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition_index}, epoch={self.leader_epoch})"

    # -- leadership (event loop) ---------------------------------------------------
    def _reset_remote_replicas(self, replicas: Sequence[int], in_sync: set[int], now: int, leader_end_offset: int,
                               is_new_leader: bool) -> None:
        existing = self.remote_replicas
        remote: dict[int, Replica] = {}
        for replica_id in replicas:
            if replica_id == self.broker_id:
                continue
            replica = existing.get(replica_id) or Replica(replica_id)
            replica.reset_replica_state(now, leader_end_offset, is_new_leader, replica_id in in_sync)
            remote[replica_id] = replica
        self.remote_replicas = remote

    def _update_assignment_and_isr(self, state: PartitionStateLike) -> None:
        self.replicas = list(state.replicas)
        self.adding_replicas = list(state.adding_replicas)
        self.removing_replicas = list(state.removing_replicas)
        self.isr = list(state.isr)
        self.pending_isr = None
        self.leader_recovery_state = state.leader_recovery_state
        self.partition_epoch = state.partition_epoch

    def make_leader(self, state: PartitionStateLike, now: int | None = None) -> bool:
        """Become (or stay) leader under the controller's ``state``; True when this broker was
        not the leader before (Kafka's makeLeader). Followers in the ISR count as caught up now;
        the high watermark may move (the ISR may be this broker alone)."""
        now = now_ms() if now is None else now
        is_new_leader = not self.is_leader or self.leader_epoch_start_offset is None
        leader_end_offset = self.log.log_end_offset
        self._update_assignment_and_isr(state)
        self._reset_remote_replicas(self.replicas, set(self.isr), now, leader_end_offset, is_new_leader)
        if is_new_leader or state.leader_epoch != self.leader_epoch:
            # The first offset this leader epoch writes (issue 18's OffsetForLeaderEpoch answers from it).
            self.leader_epoch_start_offset = leader_end_offset
        self.leader_id = self.broker_id
        self.leader_epoch = state.leader_epoch
        self.maybe_increment_high_watermark(now)
        return is_new_leader

    def make_follower(self, state: PartitionStateLike) -> bool:
        """Follow ``state.leader`` (Kafka's makeFollower); True when the leader or its epoch changed
        (the fetcher must restart from this log's end). The ISR is recorded, never acted on."""
        changed = state.leader != self.leader_id or state.leader_epoch != self.leader_epoch
        self._update_assignment_and_isr(state)
        self.remote_replicas = {}
        self.leader_epoch_start_offset = None
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        return changed

    def stop_replica(self) -> None:
        """This broker no longer hosts the partition as leader or follower (StopReplica)."""
        self.leader_id = NO_LEADER
        self.remote_replicas = {}
        self.pending_isr = None
        self.leader_epoch_start_offset = None

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the high watermark is computed over: the committed ISR plus a replica whose
        addition is pending (a pending removal still counts the removed replicas)."""
        pending = self.pending_isr
        return self.isr if pending is None else pending.maximal_isr(self.isr)

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

    # -- leader epochs (KIP-101, KIP-279, KIP-320) ------------------------------------------
    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int,
                                     fetch_only_from_leader: bool = True) -> tuple[int, int, int]:
        """OffsetsForLeaderEpoch on this replica: (error, epoch, end offset) of the largest epoch at
        most ``leader_epoch`` in the log, and where the epoch after it starts (the log end for the
        latest); (NO_ERROR, -1, -1) when the log knows no such epoch. The caller's current leader
        epoch is fenced as a fetch's is, and only the leader answers unless told otherwise."""
        fenced = self.leader_epoch_error(current_leader_epoch)
        if fenced is None and fetch_only_from_leader and self.leader_id != self.broker_id:
            fenced = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if fenced is not None:
            return fenced, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        found = self.log.end_offset_for_epoch(leader_epoch)
        if found is None:
            return ErrorCode.NO_ERROR, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        return ErrorCode.NO_ERROR, found[0], found[1]

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """KIP-320, at the leader: a fetcher whose last fetched epoch this log does not have up to
        ``fetch_offset`` has diverged; answer the largest epoch both may share and where it ends,
        so the fetcher truncates there (Kafka's validateFetchOffsetAndMaybeGetDivergingEpoch)."""
        found = self.log.end_offset_for_epoch(last_fetched_epoch)
        epoch, end_offset = found if found is not None else (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def diverged_read(self, fetch_offset: int, diverging: tuple[int, int]) -> LogReadResult:
        """A fetch's answer when the fetcher's log diverged: no records, the divergence point."""
        log_ = self.log
        info = FetchDataInfo(LogOffsetMetadata(fetch_offset), None)
        return LogReadResult(ErrorCode.NO_ERROR, info, log_.high_watermark, log_.last_stable_offset,
                             log_.log_start_offset, log_.log_end_offset, diverging)

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
        calls it on the append thread, never on the event loop. Refused when this broker
        stopped leading the partition since the append was queued.
        """
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not the leader of {self.topic}-"
                                           f"{self.partition_index} (leader {self.leader_id})")
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
        if self.leader_id != self.broker_id or not log_.lock.acquire(blocking=False):
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

    def maybe_increment_high_watermark(self, now: int | None = None) -> bool:
        """Move the HW up to the smallest log end offset over the (maximal) ISR; True when it moved.

        As Kafka 3.9's maybeIncrementLeaderHW: every member of the maximal ISR counts (a follower
        that stopped fetching holds the high watermark until the controller accepts its removal),
        and so does a caught-up follower outside the ISR, about to join it. The high watermark
        never moves back.
        """
        isr = self.isr
        log_ = self.log
        if len(isr) == 1 and isr[0] == self.broker_id and self.pending_isr is None:
            before = log_.high_watermark
            return log_.update_high_watermark(log_.log_end_offset) != before
        if not self.is_leader:
            return False
        leader_end = log_.log_end_offset
        new_hw = leader_end
        now = now_ms() if now is None else now
        lag = self.replica_lag_time_max_ms
        remote = self.remote_replicas
        maximal_isr = self.maximal_isr
        for replica_id in maximal_isr:
            if replica_id != self.broker_id and replica_id not in remote:
                return False  # an ISR member that is no replica here: nothing known, nothing committed
        for replica_id, replica in remote.items():
            if replica.log_end_offset < new_hw and (
                    replica_id in maximal_isr or (replica.is_caught_up(leader_end, now, lag)
                                                  and replica_id not in self.removing_replicas
                                                  and self.replica_isr_eligible(replica_id))):
                new_hw = replica.log_end_offset
        with self._hw_lock:
            before = log_.high_watermark
            if new_hw <= before:
                return False
            return log_.update_high_watermark(new_hw) != before

    # -- followers at the leader (event loop) -----------------------------------------
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, follower_log_start_offset: int,
                                    leader_end_offset: int, now: int, broker_epoch: int = -1) -> bool:
        """Record a follower's fetch (Kafka's updateFollowerFetchState); True when the high
        watermark moved. A fetch from a broker that is not a replica here changes nothing."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None:
            return False
        previous_end = replica.log_end_offset
        replica.update_fetch_state(fetch_offset, follower_log_start_offset, now, leader_end_offset, broker_epoch)
        # A follower whose log end moved may move the high watermark, and so may one whose log end
        # is above it (what held it back may be gone: a dead broker's replica no longer counts).
        # A follower at the high watermark cannot: an idle partition's fetch costs no scan.
        end = replica.log_end_offset
        if previous_end != end or end > self.log.high_watermark:
            return self.maybe_increment_high_watermark(now)
        return False

    def is_follower_in_sync(self, replica: Replica) -> bool:
        """Caught up to the high watermark and into this leader epoch (Kafka's isFollowerInSync)."""
        start = self.leader_epoch_start_offset
        end = replica.log_end_offset
        return start is not None and end >= self.log.high_watermark and end >= start

    def maybe_expand_isr(self, replica_id: int) -> LeaderAndIsr | None:
        """Propose adding a follower that caught up (Kafka's maybeExpandIsr); the proposal to
        send, or None. Only a leader with no change pending proposes; a replica being removed
        by a reassignment is not added."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return None
        replica = self.remote_replicas.get(replica_id)
        if (replica is None or replica_id in self.removing_replicas or not self.is_follower_in_sync(replica)
                or not self.replica_isr_eligible(replica_id)):
            return None
        proposal = LeaderAndIsr(self.broker_id, self.leader_epoch, (*self.isr, replica_id), self.partition_epoch,
                                self.leader_recovery_state)
        self.pending_isr = PendingExpandIsr(replica_id, proposal, tuple(self.isr))
        log.info("[Partition %s-%d broker=%d] Expanding ISR from %s to %s", self.topic, self.partition_index,
                 self.broker_id, self.isr, list(proposal.isr))
        return proposal

    def out_of_sync_replicas(self, now: int) -> set[int]:
        """ISR followers not caught up for ``replica.lag.time.max.ms`` (Kafka's getOutOfSyncReplicas)."""
        leader_end = self.log.log_end_offset
        remote = self.remote_replicas
        lag = self.replica_lag_time_max_ms
        return {replica_id for replica_id in self.isr if replica_id != self.broker_id
                and ((replica := remote.get(replica_id)) is None or not replica.is_caught_up(leader_end, now, lag))}

    def maybe_shrink_isr(self, now: int | None = None) -> LeaderAndIsr | None:
        """Propose removing followers that fell behind (Kafka's maybeShrinkIsr); the proposal to
        send, or None. The leader itself always stays."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        now = now_ms() if now is None else now
        out_of_sync = self.out_of_sync_replicas(now)
        if not out_of_sync:
            return None
        new_isr = tuple(r for r in self.isr if r not in out_of_sync)
        proposal = LeaderAndIsr(self.broker_id, self.leader_epoch, new_isr, self.partition_epoch,
                                self.leader_recovery_state)
        self.pending_isr = PendingShrinkIsr(frozenset(out_of_sync), proposal, tuple(self.isr))
        log.info("[Partition %s-%d broker=%d] Shrinking ISR from %s to %s (out of sync: %s; leader end offset %d, "
                 "high watermark %d)", self.topic, self.partition_index, self.broker_id, self.isr, list(new_isr),
                 sorted(out_of_sync), self.log.log_end_offset, self.log.high_watermark)
        return proposal

    def handle_alter_partition_result(self, proposal: LeaderAndIsr, result: LeaderAndIsr | None,
                                      error: int = ErrorCode.NO_ERROR, now: int | None = None) -> bool:
        """Apply the controller's answer to ``proposal``; True when the high watermark moved.

        Success: the controller's state becomes the committed one (unless a LeaderAndIsr
        has moved the partition on meanwhile). OPERATION_NOT_ATTEMPTED and
        INELIGIBLE_REPLICA say the change was not made: back to the committed state, to be
        proposed again. Other errors (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
        UNKNOWN_TOPIC_OR_PARTITION...) leave the change pending, as Kafka does: the
        controller's next LeaderAndIsr resets the partition.
        """
        pending = self.pending_isr
        if pending is None or pending.sent_leader_and_isr != proposal:
            return False  # a LeaderAndIsr (or an earlier answer) replaced it
        if error != ErrorCode.NO_ERROR or result is None:
            if error in (ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA):
                self.pending_isr = None
            log.info("[Partition %s-%d broker=%d] ISR change to %s failed: %s", self.topic, self.partition_index,
                     self.broker_id, list(proposal.isr), _error_name(error))
            return False
        if result.leader_epoch != self.leader_epoch or result.partition_epoch < self.partition_epoch:
            return False  # from before the partition's current leadership
        self.isr = list(result.isr)
        self.partition_epoch = result.partition_epoch
        self.leader_recovery_state = result.leader_recovery_state
        self.pending_isr = None
        log.info("[Partition %s-%d broker=%d] ISR updated to %s and partition epoch to %d", self.topic,
                 self.partition_index, self.broker_id, self.isr, self.partition_epoch)
        return self.maybe_increment_high_watermark(now)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """Whether an acks=all append up to ``required_offset`` is acknowledged: (done, error)
        (Kafka's checkEnoughReplicasReachOffset). Done with NOT_ENOUGH_REPLICAS_AFTER_APPEND
        when the ISR shrank below min.insync.replicas while it waited; NOT_LEADER_OR_FOLLOWER
        when leadership moved."""
        if not self.is_leader:
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if len(self.isr) >= self.log.config.min_insync_replicas:
                return True, ErrorCode.NO_ERROR
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NO_ERROR

    # -- follower side ------------------------------------------------------------------
    def update_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """A follower's HW: the leader's, bounded by its own log end (Kafka's follower rule); True
        when it moved."""
        log_ = self.log
        before = log_.high_watermark
        return log_.update_high_watermark(min(leader_high_watermark, log_.log_end_offset)) != before

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
            isolation, upper = FetchIsolation.LOG_END, leo
        elif isolation_level == READ_COMMITTED:
            isolation, upper = FetchIsolation.TXN_COMMITTED, lso  # also collects the aborted transactions
        else:
            isolation, upper = FetchIsolation.HIGH_WATERMARK, hw
        if fetch_offset == upper:
            # Nothing to read yet (a caught-up follower or consumer; most partitions of a long poll):
            # the log's read would find the same without its layers.
            aborted: list[AbortedTxn] | None = [] if isolation is FetchIsolation.TXN_COMMITTED else None
            info = FetchDataInfo(LogOffsetMetadata(fetch_offset), None, aborted_transactions=aborted)
        else:
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

    def fetch_offset_for_timestamp(self, timestamp: int, isolation_level: int | None) -> tuple[int, int, int] | None:
        """ListOffsets: (timestamp, offset, leader epoch), or (-1, -1, -1) when nothing qualifies.

        ``isolation_level`` is None for a follower or a debugging client, which see up to the log
        end. None (OFFSET_NOT_AVAILABLE, KIP-207) when a client asks a new leader whose high
        watermark is still below the start of its epoch for "latest" or for a time past the
        last fetchable offset: the old leader may already have told it a higher offset, and
        offsets a consumer sees must never go back.
        """
        log_ = self.log
        if isolation_level is None:
            last_fetchable = log_.log_end_offset
        elif isolation_level == READ_COMMITTED:
            last_fetchable = log_.last_stable_offset
        else:
            last_fetchable = log_.high_watermark
        epoch_start = self.leader_epoch_start_offset
        lagging = isolation_level is not None and epoch_start is not None and epoch_start > log_.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            # The partition's current leader epoch, as Kafka answers, not that of the last batch:
            # a new leader may not have written in its epoch yet.
            return None if lagging else (-1, last_fetchable, self.leader_epoch)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return -1, -1, -1
        found = log_.fetch_offset_by_timestamp(timestamp)
        if timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP) and (
                found is None or found.offset >= last_fetchable):
            return None if lagging else (-1, -1, -1)
        if found is None:
            return -1, -1, -1
        return found.timestamp, found.offset, -1 if found.leader_epoch is None else found.leader_epoch
