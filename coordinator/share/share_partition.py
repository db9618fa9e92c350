"""One share partition (KIP-932): which records of a topic partition a share group has delivered, to whom, and how.

A share partition lives on the leader of its topic partition. Records between
the share-partition start offset and end offset are *in flight*: each is
AVAILABLE (may be handed out), ACQUIRED (locked by one member until it
acknowledges or the lock times out), ACKNOWLEDGED or ARCHIVED (done). Every
offset below the start offset is done; the start offset moves up over the
done records at its head, which is what lets the group read on.

This class does no I/O: the caller reads the log (through the replica
manager) from :meth:`SharePartition.next_fetch_offset`, hands the batches it
read to :meth:`acquire`, and persists the state :meth:`persistent_state`
returns after an acknowledgement before it answers (:meth:`acknowledge` gives
a :class:`PendingAcknowledgement` the caller commits or rolls back). Lock
timeouts run on a ``Scheduler``, so tests drive them with a fake clock.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from coordinator.common.scheduler import Scheduler, Timer
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


class _AcquisitionLock:
    """The lock of one acquisition: its timer, how many of its records are still held, and how many
    were acknowledged by writes not yet durable (a failed one gives them back to this lock)."""

    __slots__ = ("expired", "held", "in_write", "member_id", "timer")

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.held = 0
        self.in_write = 0
        self.expired = False
        self.timer: Timer | None = None

    def cancel_if_empty(self) -> None:
        """Nothing can come back to this lock any more: its timer goes."""
        if self.held <= 0 and self.in_write <= 0 and self.timer is not None:
            self.timer.cancel()
            self.timer = None


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState
    delivery_count: int
    lock: _AcquisitionLock | None = None

    @property
    def member_id(self) -> str | None:
        return None if self.lock is None else self.lock.member_id


@dataclass(slots=True)
class PendingAcknowledgement:
    """An acknowledgement applied in memory but not yet persisted: what to restore if the write fails."""

    member_id: str
    #: (offset, state, delivery count, lock) of each record the acknowledgement changed, as they were.
    previous: list[tuple[int, RecordState, int, _AcquisitionLock | None]] = field(default_factory=list)

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
        self._records: dict[int, InFlightRecord] = {}
        self._pending: set[int] = set()
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
            for offset in range(self.end_offset, batch.first_offset):
                self._records[offset] = InFlightRecord(RecordState.AVAILABLE, 0)
            state = RecordState(batch.delivery_state)
            if state == RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                self._records[offset] = InFlightRecord(state, batch.delivery_count)
            self.end_offset = max(self.end_offset, batch.last_offset + 1)
        self._advance_start()

    # -- reading ----------------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts: the first AVAILABLE in-flight offset, else the end offset."""
        for offset in range(self.start_offset, self.end_offset):
            record = self._records.get(offset)
            if record is not None and record.state == RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def record_state(self, offset: int) -> tuple[RecordState, int, str | None] | None:
        """(state, delivery count, holder) of an in-flight offset, None when it is not in flight."""
        record = self._records.get(offset)
        return None if record is None else (record.state, record.delivery_count, record.member_id)

    @property
    def in_flight_count(self) -> int:
        return len(self._records)

    def can_acquire(self) -> bool:
        """Whether a fetch could find anything to acquire (an AVAILABLE record, or room for new ones)."""
        return self.next_fetch_offset() < self.end_offset or len(self._records) < self.config.max_record_locks

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
        lock = _AcquisitionLock(member_id)
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
        return len(self._records) < self.config.max_record_locks

    def _acquire_range(self, first: int, last: int, lock: _AcquisitionLock, out: list[AcquiredRecords],
                       budget: int) -> int:
        """Acquire what is AVAILABLE or new in first..last, at most ``budget`` records."""
        count = 0
        records = self._records
        for offset in range(first, min(last + 1, self.end_offset)):
            if count >= budget:
                break
            record = records.get(offset)
            if record is None or record.state != RecordState.AVAILABLE:
                continue  # done before (or absent from the log), or held or done now
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.lock = lock
            count += 1
            _add_run(out, offset, offset, record.delivery_count)
        if last >= self.end_offset and count < budget:
            # Never in flight before: one pass, no per-record decisions (the common case).
            new_first = max(first, self.end_offset)
            last = min(last, new_first + budget - count - 1)
            for offset in range(new_first, last + 1):
                records[offset] = InFlightRecord(RecordState.ACQUIRED, 1, lock)
            count += last - new_first + 1
            self.end_offset = last + 1
            _add_run(out, new_first, last, 1)
        lock.held += count
        return count

    def _archive_absent(self, first: int, end: int) -> None:
        """Offsets in [first, end) the log does not hold (compacted, or the read skipped them): archive
        the AVAILABLE in-flight ones so they do not hold the start offset back."""
        for offset in range(first, min(end, self.end_offset)):
            record = self._records.get(offset)
            if record is not None and record.state == RecordState.AVAILABLE:
                record.state = RecordState.ARCHIVED

    def _archive_range(self, first: int, last: int) -> None:
        for offset in range(first, last + 1):
            record = self._records.get(offset)
            if record is None:
                if offset < self.end_offset:
                    continue
                self._records[offset] = InFlightRecord(RecordState.ARCHIVED, 0)
                self.end_offset = offset + 1
            elif record.state == RecordState.AVAILABLE:
                record.state = RecordState.ARCHIVED

    def move_start_to(self, offset: int) -> None:
        """The log no longer holds the offsets below ``offset`` (retention, DeleteRecords): they are done."""
        if offset <= self.start_offset:
            return
        for stale in [o for o in self._records if o < offset and o not in self._pending]:
            record = self._records.pop(stale)
            if record.state == RecordState.ACQUIRED:
                self._unhold(record)
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance_start()

    # -- lock expiry and release ------------------------------------------------------------------------
    def _lock_expired(self, lock: _AcquisitionLock) -> None:
        """The lock's time is up: its records still ACQUIRED become AVAILABLE again (delivered once more,
        with delivery count + 1) or, at the delivery count limit, ARCHIVED."""
        lock.expired = True
        lock.timer = None
        for record in self._records.values():
            if record.lock is lock and record.state == RecordState.ACQUIRED:
                self._make_available(record)
        lock.held = 0
        self._advance_start()
        self._notify()
        self._unwritten()

    def _make_available(self, record: InFlightRecord) -> None:
        record.lock = None
        limit_reached = record.delivery_count >= self.config.delivery_count_limit
        record.state = RecordState.ARCHIVED if limit_reached else RecordState.AVAILABLE

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (its share session closed or it left the group), as a
        RELEASE acknowledgement would. Returns how many were released."""
        released = 0
        for record in self._records.values():
            if record.state == RecordState.ACQUIRED and record.member_id == member_id:
                self._unhold(record)
                self._make_available(record)
                released += 1
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

    def _unhold(self, record: InFlightRecord) -> None:
        lock = record.lock
        if lock is not None:
            lock.held -= 1
            lock.cancel_if_empty()

    # -- acknowledgement --------------------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch],
                    allow_renew: bool = False) -> PendingAcknowledgement:
        """Apply ``member_id``'s acknowledgements in memory, all or nothing: every offset must be ACQUIRED
        by that member (a GAP may also name an offset already done or absent from the log), else
        INVALID_RECORD_STATE and nothing changes. The caller persists :meth:`persistent_state` and then
        calls :meth:`commit`, or :meth:`rollback` when the write failed (:attr:`PendingAcknowledgement.changed`
        False: nothing to write). RENEW (``allow_renew``: version 2) restarts the records' lock at once."""
        changes = [change for batch in batches for change in self._validate(member_id, batch, allow_renew)]
        if len({change[0] for change in changes}) != len(changes):
            raise ShareAcknowledgeError(ErrorCode.INVALID_REQUEST, "acknowledgement batches overlap")
        pending = PendingAcknowledgement(member_id)
        previous = pending.previous
        renewed: list[InFlightRecord] = []
        for offset, kind, record in changes:
            if record.state == RecordState.ARCHIVED:
                continue  # a GAP over an offset already done
            if kind == AcknowledgeType.RENEW:
                renewed.append(record)
                continue
            lock = record.lock
            previous.append((offset, record.state, record.delivery_count, lock))
            if lock is not None:
                lock.held -= 1
                lock.in_write += 1
            if kind == AcknowledgeType.ACCEPT:
                record.state = RecordState.ACKNOWLEDGED
                record.lock = None
            else:
                self._apply(record, kind)
        self._pending.update(entry[0] for entry in previous)
        if renewed:
            self._renew(member_id, renewed)
        return pending

    def _renew(self, member_id: str, records: list[InFlightRecord]) -> None:
        """The records stay ACQUIRED by the member under a new lock of the full duration; their old lock's
        timer finds them gone when it fires."""
        lock = _AcquisitionLock(member_id)
        for record in records:
            old = record.lock
            if old is not None:
                old.held -= 1
                old.cancel_if_empty()
            record.lock = lock
        lock.held = len(records)
        lock.timer = self._scheduler.schedule(self.config.record_lock_duration_ms, lambda: self._lock_expired(lock))

    def _validate(self, member_id: str, batch: AcknowledgementBatch, allow_renew: bool
                  ) -> list[tuple[int, AcknowledgeType, InFlightRecord]]:
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
        single = kinds[0] if len(kinds) == 1 else None
        records, in_write = self._records, self._pending
        out: list[tuple[int, AcknowledgeType, InFlightRecord]] = []
        for index, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
            kind = kinds[index] if single is None else single
            record = records.get(offset)
            if record is not None and offset not in in_write:
                lock = record.lock
                if record.state == RecordState.ACQUIRED and lock is not None and lock.member_id == member_id:
                    out.append((offset, kind, record))
                    continue
                if kind == AcknowledgeType.GAP and record.state == RecordState.ARCHIVED:
                    out.append((offset, kind, record))
                    continue
            elif record is None and kind == AcknowledgeType.GAP and offset < self.end_offset:
                continue  # done before, or absent from the log
            raise ShareAcknowledgeError(ErrorCode.INVALID_RECORD_STATE,
                                        f"offset {offset} is not acquired by member {member_id}")
        return out

    def _apply(self, record: InFlightRecord, kind: AcknowledgeType) -> None:
        if kind == AcknowledgeType.ACCEPT:
            record.state = RecordState.ACKNOWLEDGED
            record.lock = None
        elif kind == AcknowledgeType.RELEASE:
            self._make_available(record)
        else:  # REJECT, GAP
            record.state = RecordState.ARCHIVED
            record.lock = None

    def commit(self, pending: PendingAcknowledgement) -> None:
        """The acknowledgement is durable: finish it (timers of emptied locks cancelled, start offset moved)."""
        self._pending.difference_update(entry[0] for entry in pending.previous)
        for entry in pending.previous:
            if entry[3] is not None:
                entry[3].in_write -= 1
        for lock in {entry[3] for entry in pending.previous}:
            if lock is not None:
                lock.cancel_if_empty()
        self._advance_start()
        self._notify()

    def rollback(self, pending: PendingAcknowledgement) -> None:
        """The write failed: the records go back to their holder, or, when the lock expired meanwhile,
        to AVAILABLE (or ARCHIVED at the limit) as the expiry would have left them."""
        for offset, state, delivery_count, lock in pending.previous:
            self._pending.discard(offset)
            record = self._records[offset]
            record.state = state
            record.delivery_count = delivery_count
            record.lock = lock
            if lock is None:
                continue
            lock.in_write -= 1
            if lock.expired:
                self._make_available(record)
            else:
                lock.held += 1
        self._advance_start()
        self._notify()

    # -- start offset and durable state -----------------------------------------------------------------
    def _advance_start(self) -> None:
        offset = self.start_offset
        while offset < self.end_offset:
            record = self._records.get(offset)
            if record is not None and (record.state not in _DONE or offset in self._pending):
                break
            self._records.pop(offset, None)
            offset += 1
        self.start_offset = offset

    def persistent_state(self) -> ShareGroupPartitionState:
        """What to write: the start offset (past the pending acknowledgement's done records) and runs of
        in-flight records with their state and delivery count. ACQUIRED is written AVAILABLE (a lock dies
        with its leader); the tail that was never delivered is left out (it is read again from the log)."""
        runs: list[PersisterStateBatch] = []
        start = self._durable_start()
        for offset in range(start, self.end_offset):
            record = self._records.get(offset)
            if record is None:
                continue
            state = RecordState.AVAILABLE if record.state == RecordState.ACQUIRED else record.state
            last = runs[-1] if runs else None
            if (last is not None and last.last_offset == offset - 1 and last.delivery_state == state
                    and last.delivery_count == record.delivery_count):
                runs[-1] = PersisterStateBatch(last.first_offset, offset, state, record.delivery_count)
            else:
                runs.append(PersisterStateBatch(offset, offset, state, record.delivery_count))
        while runs and runs[-1].delivery_state == RecordState.AVAILABLE and runs[-1].delivery_count == 0:
            runs.pop()
        return ShareGroupPartitionState(self.state_epoch, start, self.leader_epoch, tuple(runs))

    def _durable_start(self) -> int:
        """The start offset once the pending acknowledgement is durable: it is written with the write."""
        offset = self.start_offset
        while offset < self.end_offset:
            record = self._records.get(offset)
            if record is not None and record.state not in _DONE:
                break
            offset += 1
        return offset

    def close(self) -> None:
        """The partition leaves this broker: cancel every lock timer (the records' state is in the persister)."""
        for record in self._records.values():
            if record.lock is not None and record.lock.timer is not None:
                record.lock.timer.cancel()
                record.lock.timer = None
