"""One share partition (KIP-932): which records of a topic partition a share group has delivered, to whom, and how.

A share partition lives on the leader of its topic partition. Records between
the share-partition start offset and end offset are *in flight*: each is
AVAILABLE (may be handed out), ACQUIRED (locked by one member until it
acknowledges or the lock times out), ACKNOWLEDGED or ARCHIVED (done). Every
offset below the start offset is done; the start offset moves up over the
done records at its head, which is what lets the group read on. The records
are kept as runs of offsets that share a state (:mod:`in_flight_batches`), so
what a consumer does a batch at a time costs the same for one record or many.

This class does no I/O: the caller reads the log (through the replica
manager) from :meth:`SharePartition.next_fetch_offset`, hands the batches it
read to :meth:`acquire`, and persists the state :meth:`persistent_state`
returns after an acknowledgement before it answers (:meth:`acknowledge` gives
a :class:`PendingAcknowledgement` the caller commits or rolls back). Lock
timeouts run on a ``Scheduler``, so tests drive them with a fake clock.
"""

from __future__ import annotations

import enum
import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from coordinator.common.scheduler import Scheduler
from coordinator.share.in_flight_batches import AcquisitionLock, InFlightBatch, InFlightBatches
from coordinator.share.persister import PersisterStateBatch, RecordState, ShareGroupPartitionState
from protocol.errors import ErrorCode


class AcknowledgeType(enum.IntEnum):
    """The acknowledgement types of ShareFetch/ShareAcknowledge, with Kafka's numbers."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    #: Keeps the record ACQUIRED and restarts its lock (KIP-1222, ShareFetch/ShareAcknowledge v2).
    RENEW = 4


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    """The group's share configs that shape a share partition (Kafka's names in the comments)."""

    record_lock_duration_ms: int = 30_000  # share.record.lock.duration.ms
    delivery_count_limit: int = 5  # share.delivery.count.limit
    max_record_locks: int = 2000  # share.partition.max.record.locks
    renew_acknowledge_enable: bool = True  # share.renew.acknowledge.enable


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """What acquisition needs of one record batch read from the log."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """An aborted transaction overlapping the read (the transaction index's entry, as Fetch sends it)."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """A run of offsets acquired by one member in one acquisition, all with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """One acknowledged range: one type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


class ShareAcknowledgeError(Exception):
    """An acknowledgement the partition refuses whole (nothing of it is applied)."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(slots=True)
class PendingAcknowledgement:
    """An acknowledgement applied in memory but not yet persisted: what to restore if the write fails."""

    member_id: str
    #: (first offset, last offset, state, delivery count, lock) of each run the acknowledgement changed,
    #: as they were.
    previous: list[tuple[int, int, RecordState, int, AcquisitionLock | None]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether the acknowledgement changed durable state (renewals and gaps over done records do not)."""
        return bool(self.previous)


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def aborted_batch_flags(batches: Sequence[FetchedBatch], aborted: Iterable[AbortedTransaction]) -> list[bool]:
    """For each batch, whether a read_committed reader skips it: control batches, and the
    transactional batches of a producer from its aborted transaction's first offset up to its marker
    (the walk Kafka's consumer makes over the aborted-transaction list Fetch returns)."""
    pending = sorted(aborted, key=lambda txn: txn.first_offset)
    next_txn = 0
    aborting: set[int] = set()
    flags: list[bool] = []
    for batch in batches:
        while next_txn < len(pending) and pending[next_txn].first_offset <= batch.last_offset:
            aborting.add(pending[next_txn].producer_id)
            next_txn += 1
        if batch.is_control:
            # The producer's next marker after an aborted transaction's start is that abort's marker.
            aborting.discard(batch.producer_id)
            flags.append(True)
        else:
            flags.append(batch.is_transactional and batch.producer_id in aborting)
    return flags


def _add_run(out: list[AcquiredRecords], first: int, last: int, delivery_count: int) -> None:
    """Append first..last to the acquired runs, extending the last run when it continues it."""
    if out:
        run = out[-1]
        if run.last_offset == first - 1 and run.delivery_count == delivery_count:
            out[-1] = AcquiredRecords(run.first_offset, last, delivery_count)
            return
    out.append(AcquiredRecords(first, last, delivery_count))


class SharePartition:
    """The in-flight records of one (share group, topic partition) on the partition's leader."""

    def __init__(self, group_id: str, topic_id: uuid.UUID, partition: int, scheduler: Scheduler,
                 config: SharePartitionConfig, state: ShareGroupPartitionState) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self._scheduler = scheduler
        self.config = config
        self.state_epoch = state.state_epoch
        self.leader_epoch = state.leader_epoch
        self.start_offset = state.start_offset
        self.end_offset = state.start_offset
        self._batches = InFlightBatches()
        #: Told when records may have become acquirable (AVAILABLE again, or room below the lock limit),
        #: so a fetch waiting for this partition can try again.
        self.listener: Callable[[], None] | None = None
        #: Told when the state changed with no acknowledgement to carry it to the persister (a lock
        #: expired, a member's records were released), so the owner can write it.
        self.on_unwritten_change: Callable[[], None] | None = None
        self._load(state.state_batches)

    def _load(self, batches: Sequence[PersisterStateBatch]) -> None:
        """Rebuild the in-flight records from persisted batches. A lock does not survive its leader:
        ACQUIRED comes back AVAILABLE with its delivery count; offsets between batches are AVAILABLE, never
        delivered."""
        for batch in sorted(batches, key=lambda b: b.first_offset):
            if batch.last_offset < self.start_offset:
                continue
            if self.end_offset < batch.first_offset:
                self._batches.add(InFlightBatch(self.end_offset, batch.first_offset - 1, RecordState.AVAILABLE, 0))
            state = RecordState(batch.delivery_state)
            if state == RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            first = max(batch.first_offset, self.start_offset)
            for stale in self._batches.within(first, batch.last_offset):  # a later batch wins an overlap
                self._batches.remove(stale)
            self._batches.add(InFlightBatch(first, batch.last_offset, state, batch.delivery_count))
            self.end_offset = max(self.end_offset, batch.last_offset + 1)
        self._advance_start()

    # -- reading ----------------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts: the first AVAILABLE in-flight offset, else the end offset."""
        start = self.start_offset
        for batch in self._batches:
            if batch.last_offset >= start and batch.state == RecordState.AVAILABLE:
                return max(batch.first_offset, start)
        return self.end_offset

    def record_state(self, offset: int) -> tuple[RecordState, int, str | None] | None:
        """(state, delivery count, holder) of an in-flight offset, None when it is not in flight."""
        batch = self._batches.find(offset)
        return None if batch is None else (batch.state, batch.delivery_count, batch.member_id)

    @property
    def in_flight_count(self) -> int:
        return self._batches.record_count

    def can_acquire(self) -> bool:
        """Whether a fetch could find anything to acquire (an AVAILABLE record, or room for new ones)."""
        return self.next_fetch_offset() < self.end_offset or self._has_room()

    # -- acquisition ------------------------------------------------------------------------------------
    def acquire(self, member_id: str, batches: Sequence[FetchedBatch], max_records: int,
                aborted: Sequence[AbortedTransaction] | None = None, fetch_offset: int | None = None,
                record_limit: bool = False) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` what of ``batches`` (read from the log at :meth:`next_fetch_offset`) is
        AVAILABLE or new, whole batches at a time until ``max_records`` are acquired or the partition holds
        ``max_record_locks`` in-flight records. Control batches are archived, never delivered; so are
        aborted transactions' batches when ``aborted`` is given (read_committed reads). Offsets the read
        skipped (absent from the log) are archived. ``fetch_offset`` is where the read started, when the
        state may have moved since. ``record_limit`` (KIP-1206's record-limit acquire mode): never more
        than ``max_records``, a batch split where the limit falls."""
        # Control batches (transaction markers) hold nothing to deliver in either isolation level:
        # archived at once, so a consumer that does not acknowledge them as gaps never waits on their locks.
        skip = aborted_batch_flags(batches, aborted) if aborted is not None else [b.is_control for b in batches]
        lock = AcquisitionLock(member_id)
        acquired: list[AcquiredRecords] = []
        count = 0
        cursor = self.next_fetch_offset() if fetch_offset is None else max(fetch_offset, self.start_offset)
        for batch, skipped in zip(batches, skip, strict=True):
            if batch.last_offset < cursor:
                continue
            if count >= max_records or (batch.last_offset >= self.end_offset and not self._has_room()):
                break
            self._archive_absent(cursor, batch.base_offset)
            first = max(batch.base_offset, cursor)
            cursor = batch.last_offset + 1
            if skipped:
                self._archive_range(first, batch.last_offset)
                continue
            budget = max_records - count if record_limit else batch.last_offset - first + 1
            count += self._acquire_range(first, batch.last_offset, lock, acquired, budget)
        if lock.held:
            lock.timer = self._scheduler.schedule(self.config.record_lock_duration_ms,
                                                  lambda: self._lock_expired(lock))
        self._advance_start()
        return acquired

    def _has_room(self) -> bool:
        return self._batches.record_count < self.config.max_record_locks

    def _acquire_range(self, first: int, last: int, lock: AcquisitionLock, out: list[AcquiredRecords],
                       budget: int) -> int:
        """Acquire what is AVAILABLE or new in first..last, at most ``budget`` records."""
        count = 0
        in_flight_last = min(last, self.end_offset - 1)
        for batch in self._batches.overlapping(first, in_flight_last) if first <= in_flight_last else ():
            if count >= budget:
                break
            if batch.state != RecordState.AVAILABLE:
                continue  # held or done now
            low = max(batch.first_offset, first)
            high = min(batch.last_offset, in_flight_last, low + budget - count - 1)
            for part in self._batches.within(low, high):
                part.state = RecordState.ACQUIRED
                part.delivery_count += 1
                part.lock = lock
                count += part.size
                _add_run(out, part.first_offset, part.last_offset, part.delivery_count)
        if last >= self.end_offset and count < budget:
            # Never in flight before: one run, no per-record decisions (the common case).
            new_first = max(first, self.end_offset)
            last = min(last, new_first + budget - count - 1)
            self._batches.add(InFlightBatch(new_first, last, RecordState.ACQUIRED, 1, lock))
            count += last - new_first + 1
            self.end_offset = last + 1
            _add_run(out, new_first, last, 1)
        lock.held += count
        return count

    def _archive_available(self, first: int, last: int) -> None:
        """The AVAILABLE in-flight offsets of first..last become ARCHIVED."""
        last = min(last, self.end_offset - 1)
        if first > last:
            return
        for batch in self._batches.overlapping(first, last):
            if batch.state == RecordState.AVAILABLE:
                for part in self._batches.within(max(batch.first_offset, first), min(batch.last_offset, last)):
                    part.state = RecordState.ARCHIVED

    def _archive_absent(self, first: int, end: int) -> None:
        """Offsets in [first, end) the log does not hold (compacted, or the read skipped them): archive
        the AVAILABLE in-flight ones so they do not hold the start offset back."""
        self._archive_available(first, end - 1)

    def _archive_range(self, first: int, last: int) -> None:
        self._archive_available(first, last)
        if last >= self.end_offset:
            self._batches.add(InFlightBatch(max(first, self.end_offset), last, RecordState.ARCHIVED, 0))
            self.end_offset = last + 1

    def move_start_to(self, offset: int) -> None:
        """The log no longer holds the offsets below ``offset`` (retention, DeleteRecords): they are done."""
        if offset <= self.start_offset:
            return
        self._batches.split_at(offset)
        for stale in [b for b in self._batches if b.last_offset < offset and not b.in_write]:
            self._batches.remove(stale)
            if stale.state == RecordState.ACQUIRED:
                self._unhold(stale)
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance_start()

    # -- lock expiry and release ------------------------------------------------------------------------
    def _lock_expired(self, lock: AcquisitionLock) -> None:
        """The lock's time is up: its records still ACQUIRED become AVAILABLE again (delivered once more,
        with delivery count + 1) or, at the delivery count limit, ARCHIVED."""
        lock.expired = True
        lock.timer = None
        for batch in self._batches:
            if batch.lock is lock and batch.state == RecordState.ACQUIRED:
                self._make_available(batch)
        lock.held = 0
        self._advance_start()
        self._notify()
        self._unwritten()

    def _make_available(self, batch: InFlightBatch) -> None:
        batch.lock = None
        limit_reached = batch.delivery_count >= self.config.delivery_count_limit
        batch.state = RecordState.ARCHIVED if limit_reached else RecordState.AVAILABLE

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (its share session closed or it left the group), as a
        RELEASE acknowledgement would. Returns how many were released."""
        released = 0
        for batch in self._batches:
            if batch.state == RecordState.ACQUIRED and batch.member_id == member_id:
                self._unhold(batch)
                self._make_available(batch)
                released += batch.size
        self._advance_start()
        if released:
            self._notify()
            self._unwritten()
        return released

    def _notify(self) -> None:
        if self.listener is not None:
            self.listener()

    def _unwritten(self) -> None:
        if self.on_unwritten_change is not None:
            self.on_unwritten_change()

    def _unhold(self, batch: InFlightBatch) -> None:
        lock = batch.lock
        if lock is not None:
            lock.held -= batch.size
            lock.cancel_if_empty()

    # -- acknowledgement --------------------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch],
                    allow_renew: bool = False) -> PendingAcknowledgement:
        """Apply ``member_id``'s acknowledgements in memory, all or nothing: every offset must be ACQUIRED
        by that member (a GAP may also name an offset already done or absent from the log), else
        INVALID_RECORD_STATE and nothing changes. The caller persists :meth:`persistent_state` and then
        calls :meth:`commit`, or :meth:`rollback` when the write failed (:attr:`PendingAcknowledgement.changed`
        False: nothing to write). RENEW (``allow_renew``: version 2) restarts the records' lock at once."""
        segments = [segment for batch in batches for segment in self._validate(member_id, batch, allow_renew)]
        ordered = sorted(segments)
        if any(later[0] <= earlier[1] for earlier, later in itertools.pairwise(ordered)):
            raise ShareAcknowledgeError(ErrorCode.INVALID_REQUEST, "acknowledgement batches overlap")
        pending = PendingAcknowledgement(member_id)
        renewed: list[InFlightBatch] = []
        for first, last, kind in segments:
            for batch in self._batches.within(first, last):
                if batch.state == RecordState.ARCHIVED:
                    continue  # a GAP over an offset already done
                if kind == AcknowledgeType.RENEW:
                    renewed.append(batch)
                    continue
                self._apply(batch, kind, pending)
        if renewed:
            self._renew(member_id, renewed)
        return pending

    def _apply(self, batch: InFlightBatch, kind: AcknowledgeType, pending: PendingAcknowledgement) -> None:
        """One run's acknowledgement, remembered in ``pending`` and held out of other acknowledgements
        until its write is done."""
        lock = batch.lock
        pending.previous.append((batch.first_offset, batch.last_offset, batch.state, batch.delivery_count, lock))
        if lock is not None:
            lock.held -= batch.size
            lock.in_write += batch.size
        if kind == AcknowledgeType.ACCEPT:
            batch.state = RecordState.ACKNOWLEDGED
            batch.lock = None
        elif kind == AcknowledgeType.RELEASE:
            self._make_available(batch)
        else:  # REJECT, GAP
            batch.state = RecordState.ARCHIVED
            batch.lock = None
        batch.in_write = True

    def _renew(self, member_id: str, batches: list[InFlightBatch]) -> None:
        """The records stay ACQUIRED by the member under a new lock of the full duration; their old lock's
        timer finds them gone when it fires."""
        lock = AcquisitionLock(member_id)
        for batch in batches:
            old = batch.lock
            if old is not None:
                old.held -= batch.size
                old.cancel_if_empty()
            batch.lock = lock
            lock.held += batch.size
        lock.timer = self._scheduler.schedule(self.config.record_lock_duration_ms, lambda: self._lock_expired(lock))

    def _validate(self, member_id: str, batch: AcknowledgementBatch, allow_renew: bool
                  ) -> list[tuple[int, int, AcknowledgeType]]:
        """The in-flight runs of one acknowledged range with their type: (first, last, type), in order."""
        width = batch.last_offset - batch.first_offset + 1
        types = batch.acknowledge_types
        if width <= 0 or len(types) not in (1, width):
            raise ShareAcknowledgeError(ErrorCode.INVALID_REQUEST, "acknowledge types do not match the range")
        try:
            kinds = [AcknowledgeType(t) for t in types]
        except ValueError:
            raise ShareAcknowledgeError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type in {list(types)}"
                                        ) from None
        if AcknowledgeType.RENEW in kinds:
            if not allow_renew:
                raise ShareAcknowledgeError(ErrorCode.INVALID_REQUEST, "RENEW needs version 2")
            if not self.config.renew_acknowledge_enable:
                raise ShareAcknowledgeError(ErrorCode.INVALID_RECORD_STATE,
                                            "renew acknowledgements are disabled for the share group")
        out: list[tuple[int, int, AcknowledgeType]] = []
        for first, last, kind in _kind_runs(batch.first_offset, batch.last_offset, kinds):
            self._validate_run(member_id, first, last, kind, out)
        return out

    def _validate_run(self, member_id: str, first: int, last: int, kind: AcknowledgeType,
                      out: list[tuple[int, int, AcknowledgeType]]) -> None:
        """Check one range of one type: every in-flight offset ACQUIRED by the member and not in a write
        (or ARCHIVED, for a GAP); offsets not in flight only for a GAP below the end offset."""
        position = first
        for batch in self._batches.overlapping(first, last):
            if batch.first_offset > position:
                self._check_not_in_flight(member_id, position, batch.first_offset - 1, kind)
                position = batch.first_offset
            lock = batch.lock
            held = batch.state == RecordState.ACQUIRED and lock is not None and lock.member_id == member_id
            if batch.in_write or not (held or (kind == AcknowledgeType.GAP and batch.state == RecordState.ARCHIVED)):
                raise _not_acquired(position, member_id)
            high = min(batch.last_offset, last)
            out.append((position, high, kind))
            position = high + 1
        if position <= last:
            self._check_not_in_flight(member_id, position, last, kind)

    def _check_not_in_flight(self, member_id: str, first: int, last: int, kind: AcknowledgeType) -> None:
        """Offsets not in flight (done before, or absent from the log) may be acknowledged only as GAPs,
        and only below the end offset."""
        if kind != AcknowledgeType.GAP:
            raise _not_acquired(first, member_id)
        if last >= self.end_offset:
            raise _not_acquired(max(first, self.end_offset), member_id)

    def commit(self, pending: PendingAcknowledgement) -> None:
        """The acknowledgement is durable: finish it (timers of emptied locks cancelled, start offset moved)."""
        for first, last, _state, _count, lock in pending.previous:
            for batch in self._batches.within(first, last):
                batch.in_write = False
            if lock is not None:
                lock.in_write -= last - first + 1
        for lock in {entry[4] for entry in pending.previous}:
            if lock is not None:
                lock.cancel_if_empty()
        self._advance_start()
        self._notify()

    def rollback(self, pending: PendingAcknowledgement) -> None:
        """The write failed: the records go back to their holder, or, when the lock expired meanwhile,
        to AVAILABLE (or ARCHIVED at the limit) as the expiry would have left them."""
        for first, last, state, delivery_count, lock in pending.previous:
            for batch in self._batches.within(first, last):
                batch.in_write = False
                batch.state = state
                batch.delivery_count = delivery_count
                batch.lock = lock
                if lock is None:
                    continue
                lock.in_write -= batch.size
                if lock.expired:
                    self._make_available(batch)
                else:
                    lock.held += batch.size
        self._advance_start()
        self._notify()

    # -- start offset and durable state -----------------------------------------------------------------
    def _done_up_to(self, durable: bool) -> int:
        """How far from the start offset every offset is done (``durable``: counting those whose write is
        still pending as done, since the write carries them)."""
        offset = self.start_offset
        while offset < self.end_offset:
            batch = self._batches.first_at_or_after(offset)
            if batch is None:
                return self.end_offset
            if batch.first_offset > offset:
                offset = batch.first_offset  # not in flight in between: done
                continue
            if batch.state not in _DONE or (batch.in_write and not durable):
                break
            offset = batch.last_offset + 1
        return min(offset, max(self.end_offset, self.start_offset))

    def _advance_start(self) -> None:
        start = self._done_up_to(durable=False)
        if start > self.start_offset:
            self._batches.split_at(start)
            for done in [b for b in self._batches.overlapping(self.start_offset, start - 1) if not b.in_write]:
                self._batches.remove(done)
        self.start_offset = start

    def persistent_state(self) -> ShareGroupPartitionState:
        """What to write: the start offset (past the pending acknowledgement's done records) and runs of
        in-flight records with their state and delivery count. ACQUIRED is written AVAILABLE (a lock dies
        with its leader); the tail that was never delivered is left out (it is read again from the log)."""
        runs: list[PersisterStateBatch] = []
        start = self._done_up_to(durable=True)
        for batch in self._batches.overlapping(start, self.end_offset - 1) if start < self.end_offset else ():
            first = max(batch.first_offset, start)
            state = RecordState.AVAILABLE if batch.state == RecordState.ACQUIRED else batch.state
            last = runs[-1] if runs else None
            if (last is not None and last.last_offset == first - 1 and last.delivery_state == state
                    and last.delivery_count == batch.delivery_count):
                runs[-1] = PersisterStateBatch(last.first_offset, batch.last_offset, state, batch.delivery_count)
            else:
                runs.append(PersisterStateBatch(first, batch.last_offset, state, batch.delivery_count))
        while runs and runs[-1].delivery_state == RecordState.AVAILABLE and runs[-1].delivery_count == 0:
            runs.pop()
        return ShareGroupPartitionState(self.state_epoch, start, self.leader_epoch, tuple(runs))

    def close(self) -> None:
        """The partition leaves this broker: cancel every lock timer (the records' state is in the persister)."""
        for batch in self._batches:
            if batch.lock is not None and batch.lock.timer is not None:
                batch.lock.timer.cancel()
                batch.lock.timer = None


def _kind_runs(first: int, last: int, kinds: Sequence[AcknowledgeType]
               ) -> Iterator[tuple[int, int, AcknowledgeType]]:
    """An acknowledged range as runs of one type: the whole range for one type, else the offsets' types
    grouped where neighbours agree."""
    if len(kinds) == 1:
        yield first, last, kinds[0]
        return
    run_first = first
    for index in range(1, len(kinds) + 1):
        if index == len(kinds) or kinds[index] != kinds[index - 1]:
            yield run_first, first + index - 1, kinds[index - 1]
            run_first = first + index


def _not_acquired(offset: int, member_id: str) -> ShareAcknowledgeError:
    return ShareAcknowledgeError(ErrorCode.INVALID_RECORD_STATE, f"offset {offset} is not acquired by member {member_id}")
