"""The share partitions this broker leads, and the two things share consumers do with them: fetch and acknowledge.

Kafka's SharePartitionManager. One :class:`SharePartition` per (share group,
topic partition) this broker leads, made on first use from the state the
``Persister`` holds; when it holds none, or no start offset (the group
coordinator initializes a share partition's state without one), the start is
the one ``share.auto.offset.reset`` picks. Records are read only through the
replica manager's fetch (the same read, long poll and read_committed bound as
Fetch), then acquired for the member. An acknowledgement is applied, written through ``Persister.write_state``
and only then answered; a failed write rolls it back, so nothing answered is
lost and nothing is ACKNOWLEDGED that no consumer acknowledged. Writes to one
share partition go one at a time; the acknowledgements applied while one is in
flight share the next (group commit).
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from coordinator.common.scheduler import Scheduler
from coordinator.share.persister import Persister, PersisterError, ShareGroupPartitionState
from coordinator.share.share_partition import (
    AbortedTransaction,
    AcknowledgementBatch,
    AcquiredRecords,
    FetchedBatch,
    PendingAcknowledgement,
    ShareAcknowledgeError,
    SharePartition,
    SharePartitionConfig,
)
from protocol.buffers import FileRange
from protocol.errors import ErrorCode
from protocol.record_batch import RecordBatchHeader
from replication.fetch_params import FetchParams
from replication.partition import LogReadResult
from replication.replica_manager_lookups import ListOffsetsResult

log = logging.getLogger(__name__)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
#: The replica id of a consumer's read (not a follower's).
CONSUMER_REPLICA_ID = -1
#: The most a share fetch reads of one partition (a batch larger than this is still read whole, as Fetch does).
SHARE_READ_MAX_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """The group configs a share partition follows (Kafka's defaults)."""

    partition: SharePartitionConfig = field(default_factory=SharePartitionConfig)
    auto_offset_reset: str = "latest"  # share.auto.offset.reset
    isolation_level: int = READ_UNCOMMITTED  # share.isolation.level


class LeaderView(Protocol):
    """What the manager reads of a hosted partition."""

    @property
    def is_leader(self) -> bool: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...


class ShareReplicaReader(Protocol):
    """The replica manager, as the share partitions read it."""

    def get_partition(self, topic: str, partition_index: int) -> LeaderView | None: ...

    def fetch_messages(self, params: FetchParams, partitions: Sequence[ShareRead]
                       ) -> list[LogReadResult] | Awaitable[list[LogReadResult]]: ...

    def fetch_offset_for_timestamp(self, tp: tuple[str, int], timestamp: int, isolation_level: int | None,
                                   current_leader_epoch: int, fetch_only_from_leader: bool = True
                                   ) -> ListOffsetsResult: ...


@dataclass(frozen=True, slots=True)
class ShareTarget:
    """A topic partition a share request names, with the topic's name resolved by the caller."""

    topic_id: uuid.UUID
    topic: str
    partition: int


@dataclass(slots=True)
class ShareFetchResult:
    """One partition of a ShareFetch answer."""

    error_code: int = ErrorCode.NO_ERROR
    error_message: str | None = None
    #: The batches up to the last one acquired from, as a range of their segment file (sent uncopied).
    records: FileRange | bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ShareRead:
    """One partition of the replica manager read (its FetchPartition)."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


_ISO_DURATION = re.compile(r"p(?:(\d+)d)?(?:t(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?)?")


def _duration_ms(text: str) -> int | None:
    """An ISO-8601 duration of days, hours, minutes and seconds (as Java's Duration.parse takes them) in ms."""
    match = _ISO_DURATION.fullmatch(text.lower())
    if match is None:
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def _batches_worth_acquiring(headers: Iterable[tuple[int, RecordBatchHeader]], end_offset: int, budget: int
                             ) -> tuple[list[FetchedBatch], list[int]]:
    """The batches of a read (its batch headers with their file positions) an acquisition of at most
    ``budget`` records can use, and where each ends: every batch before ``end_offset`` (records in flight,
    maybe AVAILABLE again), then new batches until they hold ``budget`` records (whole batches are
    acquired, so the one that reaches it is kept). Headers past those are never read."""
    batches: list[FetchedBatch] = []
    ends: list[int] = []
    new_records = 0
    for pos, header in headers:
        if new_records >= budget:
            break
        batches.append(FetchedBatch(header.base_offset, header.last_offset, header.producer_id,
                                    header.is_transactional, header.is_control))
        ends.append(pos + header.size_in_bytes)
        if header.last_offset >= end_offset:
            new_records += header.last_offset - max(header.base_offset, end_offset) + 1
    return batches, ends


class SharePartitionError(Exception):
    def __init__(self, error_code: int, message: str | None = None) -> None:
        super().__init__(message or str(error_code))
        self.error_code = error_code
        self.message = message


_Key = tuple[str, uuid.UUID, int]

#: A persister's error as a share consumer is told it (Kafka's SharePartition maps them so): the share
#: coordinator being away is one retriable error, a newer leader epoch means this broker no longer leads.
_CLIENT_ERRORS = {
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_LEADER_OR_FOLLOWER,
}


def client_error(persister_code: int) -> int:
    try:
        code = ErrorCode(persister_code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return _CLIENT_ERRORS.get(code, code)


#: Persister errors after which the cached share partition is stale and is read again on next use.
_RELOAD_ON = (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH)


class SharePartitionManager:
    def __init__(self, replica_manager: ShareReplicaReader, persister: Persister, scheduler: Scheduler,
                 settings: Callable[[str], ShareGroupSettings] = lambda group_id: ShareGroupSettings()) -> None:
        self._replicas = replica_manager
        self._persister = persister
        self._scheduler = scheduler
        self._settings = settings
        self._partitions: dict[_Key, SharePartition] = {}
        self._loading: dict[_Key, asyncio.Future[SharePartition]] = {}
        self._write_locks: dict[_Key, asyncio.Lock] = {}
        #: Acknowledgements applied in memory and waiting for the next write of their share partition.
        self._queued: dict[_Key, list[tuple[PendingAcknowledgement, asyncio.Future[tuple[int, str | None]]]]] = {}
        #: Writes of state changed by lock expiry or release (no acknowledgement to carry them), one per
        #: share partition at a time; cancelled by ``close``.
        self._flushes: dict[_Key, asyncio.Task[None]] = {}
        #: Fetches waiting for a share partition to have something to acquire.
        self._waiters: dict[_Key, set[asyncio.Event]] = {}

    # -- share partitions ---------------------------------------------------------------------------------
    def cached(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        return self._partitions.get((group_id, topic_id, partition))

    def _leader(self, target: ShareTarget) -> LeaderView:
        view = self._replicas.get_partition(target.topic, target.partition)
        if view is None:
            raise SharePartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not view.is_leader:
            raise SharePartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return view

    async def share_partition(self, group_id: str, target: ShareTarget) -> SharePartition:
        """The share partition, read from the persister on first use here or after a leader change."""
        view = self._leader(target)
        key = (group_id, target.topic_id, target.partition)
        current = self._partitions.get(key)
        if current is not None and current.leader_epoch == view.leader_epoch:
            return current
        if current is not None:
            self._evict(key)
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.get_running_loop().create_future()
            self._loading[key] = loading
            try:
                loading.set_result(await self._load(group_id, target, view))
            except asyncio.CancelledError:
                loading.cancel()
                raise
            except Exception as exc:
                loading.set_exception(exc)
                loading.exception()  # read: a failed load is reported to each waiter, not logged as lost
            finally:
                del self._loading[key]
        sp = await asyncio.shield(loading)
        self._partitions.setdefault(key, sp)
        return self._partitions[key]

    async def _load(self, group_id: str, target: ShareTarget, view: LeaderView) -> SharePartition:
        settings = self._settings(group_id)
        epoch = view.leader_epoch
        try:
            state = await self._persister.read_state(group_id, target.topic_id, target.partition, epoch)
        except PersisterError as exc:
            raise SharePartitionError(client_error(exc.error_code), exc.message) from exc
        if state is None:
            state = ShareGroupPartitionState(0, self._reset_offset(settings, view, target), epoch, ())
        elif state.start_offset < 0:
            # Initialized by the group coordinator without a start offset (-1): share.auto.offset.reset
            # picks it, at the state epoch the initialization set.
            state = ShareGroupPartitionState(state.state_epoch, self._reset_offset(settings, view, target), epoch,
                                             ())
        sp = SharePartition(group_id, target.topic_id, target.partition, self._scheduler, settings.partition, state)
        sp.leader_epoch = epoch
        key = (group_id, target.topic_id, target.partition)
        sp.listener = lambda: self._wake(key)
        sp.on_unwritten_change = lambda: self._schedule_flush(key)
        if sp.start_offset < view.log_start_offset:
            sp.move_start_to(view.log_start_offset)
        return sp

    def _reset_offset(self, settings: ShareGroupSettings, view: LeaderView, target: ShareTarget) -> int:
        """Where share.auto.offset.reset starts a share partition: earliest, latest, or by_duration:<ISO-8601
        duration> (the first record at most that old; the latest when there is none)."""
        latest = view.last_stable_offset if settings.isolation_level == READ_COMMITTED else view.high_watermark
        reset = settings.auto_offset_reset.lower()
        if reset == "earliest":
            return view.log_start_offset
        duration_ms = _duration_ms(reset.removeprefix("by_duration:")) if reset.startswith("by_duration:") else None
        if duration_ms is None:
            return latest
        found = self._replicas.fetch_offset_for_timestamp((target.topic, target.partition),
                                                          self._scheduler.now_ms() - duration_ms,
                                                          settings.isolation_level, -1)
        return found.offset if found.error_code == ErrorCode.NO_ERROR and found.offset >= 0 else latest

    def _evict(self, key: _Key) -> None:
        sp = self._partitions.pop(key, None)
        if sp is not None:
            sp.close()

    def close(self) -> None:
        """The broker stops: every lock timer and pending flush goes (the durable state is the persister's)."""
        for key in list(self._partitions):
            self._evict(key)
        for task in self._flushes.values():
            task.cancel()
        self._flushes.clear()

    def _schedule_flush(self, key: _Key) -> None:
        """Write the share partition's state soon (Kafka writes on lock expiry too): delivery counts and
        records archived at the delivery limit survive a restart."""
        if key in self._flushes:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous caller): the next acknowledgement's write carries the change
        task = loop.create_task(self._flush(key))
        self._flushes[key] = task
        task.add_done_callback(lambda done: self._flushes.pop(key, None) if self._flushes.get(key) is done else None)

    async def _flush(self, key: _Key) -> None:
        await asyncio.sleep(0)  # let the changes of this turn of the loop join the write
        sp = self._partitions.get(key)
        if sp is None:
            return
        async with self._write_locks.setdefault(key, asyncio.Lock()):
            outcome = await self._write_queued(key, sp)
        if outcome[0] != ErrorCode.NO_ERROR:
            log.info("[GroupId %s] Share partition %s-%d state not written (%s): the next write carries it",
                     key[0], key[1], key[2], outcome[1] or outcome[0])

    # -- fetch ---------------------------------------------------------------------------------------------
    async def fetch(self, group_id: str, member_id: str, targets: Sequence[ShareTarget], *, max_wait_ms: int,
                    min_bytes: int, max_bytes: int, max_records: int, record_limit: bool = False
                    ) -> dict[ShareTarget, ShareFetchResult]:
        """Read what the member may acquire of each partition and acquire it (whole batches, up to
        ``max_records`` across the partitions; with ``record_limit`` never more, batches split). A
        partition that cannot be read answers its error. When no partition has anything to acquire (every
        one at its record lock limit), wait up to ``max_wait_ms`` for one to free records."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000
        while True:
            results, readable = await self._readable(group_id, targets)
            remaining = deadline - loop.time()
            waiting_for_room = any(r.error_code == ErrorCode.NO_ERROR for r in results.values())
            if readable or remaining <= 0 or not waiting_for_room:
                break
            await self._wait_for_change(group_id, targets, remaining)
        # Max bytes is a soft limit (a first batch larger than it is sent whole), but a fetch for no bytes at
        # all gets no records, as Kafka answers it.
        if not readable or max_bytes <= 0:
            return results
        isolation = self._settings(group_id).isolation_level
        # A fetch acquires at most max_records: reading far past them only costs (the file read and the
        # batch headers are proportional to the bytes read), so each partition's read is bounded.
        read_bytes = min(max_bytes, SHARE_READ_MAX_BYTES)
        reads = [ShareRead(t.topic, t.partition, sp.next_fetch_offset(), read_bytes) for t, sp in readable]
        params = FetchParams(replica_id=CONSUMER_REPLICA_ID, max_wait_ms=max(int(remaining * 1000), 0),
                             min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation)
        answered = self._replicas.fetch_messages(params, reads)
        read_results = answered if isinstance(answered, list) else await answered
        budget = max_records
        for (target, sp), read, result in zip(readable, reads, read_results, strict=True):
            # No await from here on: acquisitions are made in one step (``fetch_offset`` says where each
            # read started, for records released or acquired by others since).
            out = results[target]
            self._acquire_read(sp, member_id, (read, result), (budget, record_limit),
                               isolation == READ_COMMITTED, out)
            budget -= sum(r.last_offset - r.first_offset + 1 for r in out.acquired)
        return results

    async def _readable(self, group_id: str, targets: Sequence[ShareTarget]
                        ) -> tuple[dict[ShareTarget, ShareFetchResult], list[tuple[ShareTarget, SharePartition]]]:
        """Each target's result so far (its error, or its leader), and the partitions worth reading."""
        results: dict[ShareTarget, ShareFetchResult] = {}
        readable: list[tuple[ShareTarget, SharePartition]] = []
        for target in targets:
            try:
                sp = await self.share_partition(group_id, target)
            except SharePartitionError as exc:
                results[target] = ShareFetchResult(exc.error_code, exc.message)
                continue
            view = self._leader(target)
            results[target] = ShareFetchResult(leader_id=view.leader_id, leader_epoch=view.leader_epoch)
            if sp.can_acquire():
                readable.append((target, sp))
        return results, readable

    async def _wait_for_change(self, group_id: str, targets: Sequence[ShareTarget], timeout_s: float) -> None:
        woken = asyncio.Event()
        keys = [(group_id, t.topic_id, t.partition) for t in targets]
        for key in keys:
            self._waiters.setdefault(key, set()).add(woken)
        try:
            await asyncio.wait_for(woken.wait(), timeout_s)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(woken)
                    if not waiting:
                        del self._waiters[key]

    def _wake(self, key: _Key) -> None:
        for woken in self._waiters.pop(key, ()):
            woken.set()

    def _acquire_read(self, sp: SharePartition, member_id: str, found: tuple[ShareRead, LogReadResult],
                      limit: tuple[int, bool], read_committed: bool, out: ShareFetchResult) -> None:
        """Acquire from what a read found (the read and its result); ``limit``: (records left to acquire,
        whether strictly). Only the batch headers the acquisition needs are read (as a Fetch read reads
        headers to find its end); the records go out as a range of the segment file, never copied here."""
        read, result = found
        budget, record_limit = limit
        if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and result.log_start_offset > read.fetch_offset:
            sp.move_start_to(result.log_start_offset)  # retention removed the head: the group reads on
            return
        if result.error_code != ErrorCode.NO_ERROR or result.info is None:
            out.error_code = result.error_code
            return
        found_slice = result.info.records
        if budget <= 0 or found_slice is None or found_slice.size <= 0:
            return
        start = found_slice.position
        try:
            batches, ends = _batches_worth_acquiring(found_slice.file.batch_headers(start, start + found_slice.size),
                                                     sp.end_offset, budget)
        except OSError:  # the segment was deleted (retention) since the read: nothing to acquire this time
            return
        aborted = None
        if read_committed:
            aborted = [AbortedTransaction(a.producer_id, a.first_offset)
                       for a in result.info.aborted_transactions or ()]
        out.acquired = sp.acquire(member_id, batches, budget, aborted, fetch_offset=read.fetch_offset,
                                  record_limit=record_limit)
        if out.acquired:
            last = out.acquired[-1].last_offset
            # Send the batches up to the last one acquired from: the member keeps only acquired records.
            upto = next((end for batch, end in zip(batches, ends, strict=True) if batch.last_offset >= last),
                        start + found_slice.size)
            out.records = FileRange(found_slice.file, start, upto - start)

    # -- acknowledge and release ------------------------------------------------------------------------------
    async def acknowledge(self, group_id: str, member_id: str,
                          acks: Sequence[tuple[ShareTarget, Sequence[AcknowledgementBatch]]],
                          allow_renew: bool = False) -> dict[ShareTarget, tuple[int, str | None]]:
        """Apply and persist each partition's acknowledgements; (error code, message) per partition,
        answered only once its write is durable (or failed and was rolled back). ``allow_renew``: the
        request's version knows RENEW."""
        outcomes = await asyncio.gather(*(self._acknowledge_one(group_id, member_id, t, b, allow_renew)
                                          for t, b in acks))
        return {target: outcome for (target, _), outcome in zip(acks, outcomes, strict=True)}

    async def _acknowledge_one(self, group_id: str, member_id: str, target: ShareTarget,
                               batches: Sequence[AcknowledgementBatch], allow_renew: bool) -> tuple[int, str | None]:
        key = (group_id, target.topic_id, target.partition)
        try:
            sp = await self.share_partition(group_id, target)
            pending = sp.acknowledge(member_id, batches, allow_renew)
        except (SharePartitionError, ShareAcknowledgeError) as exc:
            return exc.error_code, exc.message
        if not pending.changed:  # renewals, gaps over done records: nothing durable to write
            sp.commit(pending)
            return ErrorCode.NO_ERROR, None
        answer: asyncio.Future[tuple[int, str | None]] = asyncio.get_running_loop().create_future()
        self._queued.setdefault(key, []).append((pending, answer))
        async with self._write_locks.setdefault(key, asyncio.Lock()):
            if not answer.done():
                await self._write_queued(key, sp)
        return answer.result()

    async def _write_queued(self, key: _Key, sp: SharePartition) -> tuple[int, str | None]:
        """One write for every acknowledgement applied since the last one started (group commit): the
        state written holds them all, so they are answered together, after it is durable."""
        batch = self._queued.pop(key, [])
        outcome: tuple[int, str | None] = (ErrorCode.NO_ERROR, None)
        if self._partitions.get(key) is not sp:
            outcome = (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)  # replaced while these waited their turn
        else:
            try:
                await self._persister.write_state(key[0], key[1], key[2], sp.persistent_state())
            except PersisterError as exc:
                outcome = (client_error(exc.error_code), exc.message)
                if exc.error_code in _RELOAD_ON:
                    self._evict(key)
        for pending, answer in batch:
            if outcome[0] == ErrorCode.NO_ERROR:
                sp.commit(pending)
            else:
                sp.rollback(pending)
            answer.set_result(outcome)
        return outcome

    def release(self, group_id: str, member_id: str, partitions: Sequence[tuple[uuid.UUID, int]]) -> int:
        """The member gives up what it holds in ``partitions`` (session closed, partitions forgotten):
        those records are AVAILABLE again at once instead of when their locks time out."""
        released = 0
        for topic_id, partition in partitions:
            sp = self._partitions.get((group_id, topic_id, partition))
            if sp is not None:
                released += sp.release_member(member_id)
        return released
