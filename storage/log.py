"""Log: one partition's log (Kafka's UnifiedLog + LocalLog) over its SegmentList.

Threading: the storage layer is synchronous. Mutations (append, roll, flush,
truncation, retention, segment replacement) hold ``self.lock``; reads take no
lock and work on a snapshot of the segment list (copy-on-write) plus the log
end offset read once. The broker runs these calls in a worker thread where
they could block its event loop (a roll fsyncs the old segment synchronously,
unlike Kafka's asynchronous roll flush).

``Log.open`` is the way in: it loads (and if needed recovers) the directory
through ``storage.log_loader``, which knows segments, not Logs, and builds the
Log on what the loader returns. The modules a Log leans on sit below it and are
handed its parts: ``log_append`` (checks before a write), ``log_offsets``
(ListOffsets searches), ``log_retention`` (which segments may go). The Log's
removal of segments (the retention pass, delayed deletion, the cleaner's swap)
is ``log_deletion``'s ``SegmentDeletion``, a mixin the Log is built on.
``log_cleaner`` and ``log_manager`` work on whole Logs from above.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from protocol.buffers import Buffer
from protocol.record_batch import (
    RecordBatchHeader,
    patch_base_offset_and_epoch,
    patch_max_timestamp,
)
from protocol.request_constants import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from storage.checkpoints import fsync_dir
from storage.errors import KafkaStorageError, OffsetOutOfRangeError, UnexpectedAppendOffsetError
from storage.leader_epoch_cache import UNDEFINED_EPOCH_OFFSET, LeaderEpochFileCache
from storage.log_append import AppendOrigin, LogAppendInfo, analyze_and_validate
from storage.log_config import LogConfig
from storage.log_deletion import SegmentDeletion
from storage.log_loader import load_log, rebuild_producer_state
from storage.log_offsets import TimestampAndOffset, TimestampSearch, legacy_offsets_before, offset_of_max_timestamp
from storage.log_retention import log_start_offset_breach
from storage.log_segment import FetchDataInfo, LogOffsetMetadata, LogSegment, now_ms
from storage.producer_state import EndTxnMarker, ProducerStateManager, VerificationGuard
from storage.segment_list import SegmentList
from storage.transaction_index import AbortedTxn

__all__ = ["FetchIsolation", "Log", "TimestampAndOffset", "now_ms", "parse_topic_partition"]

log = logging.getLogger(__name__)

class FetchIsolation(enum.Enum):
    """How far a read may go: the log end (followers), the HW (READ_UNCOMMITTED
    consumers) or the last stable offset (READ_COMMITTED, with aborted txns)."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


F = TypeVar("F", bound=Callable[..., Any])
#: (log directory, what failed, the error): reports a failed disk.
IoErrorReporter = Callable[[Path, str, BaseException], object]


def storage_errors(method: F) -> F:
    """An OSError under a log call (disk full, I/O error) becomes KAFKA_STORAGE_ERROR for clients."""

    @functools.wraps(method)
    def wrapper(self: Log, *args: Any, **kwargs: Any) -> Any:
        if self.offline:
            raise KafkaStorageError(f"{self.dir.name}: the log directory {self.dir.parent} is offline")
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            report = self.on_io_error
            if report is None:
                log.error("%s: I/O error in %s: %s", self.dir.name, method.__name__, exc)
            else:  # the directory goes offline: the channel logs it once
                report(self.dir.parent, f"{self.dir.name}: {method.__name__} failed", exc)
            raise KafkaStorageError(f"{self.dir.name}: {method.__name__} failed: {exc}") from exc

    return wrapper  # type: ignore[return-value]


def _max_timestamp(batches: Sequence[tuple[int, RecordBatchHeader]]) -> int:
    # A produce request carries one batch per partition: no generator for that case.
    return batches[-1][1].max_timestamp if len(batches) == 1 else max(h.max_timestamp for _, h in batches)


#: A log directory renamed ``<topic>-<partition>.<uniqueId><suffix>``: a future replica
#: (a move between log dirs) or a log waiting to be deleted.
FUTURE_DIR_SUFFIX = "-future"
DELETE_DIR_SUFFIX = "-delete"


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """``my-topic-3`` → ("my-topic", 3); topics may contain dashes, partitions cannot.

    A future or doomed log's name, ``my-topic-3.<uniqueId>-future`` or ``-delete``, names
    the same partition (Kafka's parseTopicPartitionName)."""
    if dir_name.endswith((FUTURE_DIR_SUFFIX, DELETE_DIR_SUFFIX)):
        dir_name = dir_name.rpartition(".")[0]
    topic, sep, partition = dir_name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{dir_name!r} is not a <topic>-<partition> directory name")
    return topic, int(partition)


class Log(SegmentDeletion):
    # A produce reads these per-partition objects (with the segment, file and indexes)
    # once per batch: slots keep each attribute inside the object, fewer cache misses
    # when 1,000 partitions take turns (docs/benchmarks.md, "second pass"). Slots sit in
    # memory in the order named, and this is the layout measured there: kept, not sorted.
    __slots__ = (  # noqa: RUF023
        'dir', 'topic', 'partition', 'config', 'segments', 'log_start_offset', 'recovery_point',
        'log_end_offset', 'high_watermark', 'leader_epoch_cache', 'producer_state', 'lock',
        'last_flush_ms', 'pending_deletes', '_timestamp_search', '_dir_dirty', 'closed',
        '_end_snapshot', 'offline', 'on_io_error',
    )

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        segments: SegmentList,
        log_start_offset: int,
        recovery_point: int,
        log_end_offset: int,
        leader_epoch_cache: LeaderEpochFileCache,
        producer_state: ProducerStateManager | None = None,
    ) -> None:
        self.dir = Path(dir)
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        self.config = config
        self.segments = segments
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.log_end_offset = log_end_offset
        self.high_watermark = log_start_offset
        self.leader_epoch_cache = leader_epoch_cache
        #: Optional ProducerStateManager (storage.producer_state); None disables
        #: idempotence/transaction checks for this log.
        self.producer_state = producer_state
        self.lock = threading.RLock()
        self.last_flush_ms = now_ms()
        self.pending_deletes: list[tuple[int, LogSegment]] = []
        self._timestamp_search = TimestampSearch()
        self._dir_dirty = True
        self.closed = False
        #: (log end offset, active segment, its size) as the last append left them,
        #: set in one assignment: a read bounded by the log end (the HW, on a lone
        #: broker) learns the byte position of its bound without an index lookup.
        self._end_snapshot: tuple[int, LogSegment, int] | None = None
        #: True once its log directory went offline: every call answers KafkaStorageError.
        self.offline = False
        #: Who hears of an OSError under a call (the log directory failure channel), if anyone.
        self.on_io_error: IoErrorReporter | None = None

    @classmethod
    def open(
        cls,
        dir: Path | str,
        config: LogConfig | None = None,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = False,
        producer_state: ProducerStateManager | bool | None = None,
    ) -> Log:
        """Load (and if needed recover) the log in ``dir``; see ``log_loader.load_log``.

        ``producer_state``: a ProducerStateManager to attach (or True to create
        one in ``dir``); None leaves the Log without producer state.
        """
        dir, config = Path(dir), config or LogConfig()
        loaded = load_log(dir, config, log_start_offset, recovery_point, had_clean_shutdown, producer_state)
        opened = cls(dir, config, loaded.segments, loaded.log_start_offset, loaded.recovery_point,
                     loaded.log_end_offset, loaded.leader_epoch_cache, loaded.producer_state)
        # After the producer state's replay: transactions decided below the HW are stable again.
        opened.update_high_watermark(loaded.high_watermark)
        return opened

    # --- state ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def active_segment(self) -> LogSegment:
        segment = self.segments.last_segment
        assert segment is not None, "a log always has an active segment"
        return segment

    def log_segments(self) -> list[LogSegment]:
        """The current segments, oldest first (a snapshot; safe to iterate)."""
        return list(self.segments.values())

    @property
    def size(self) -> int:
        return self.segments.size_in_bytes()

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None:
        """(epoch, end offset) of the largest epoch at most ``leader_epoch`` in this log, None when
        the log knows no such epoch (Kafka's UnifiedLog.endOffsetForEpoch). Lock-free like every
        read: the cache swaps its entry list whole, so one read of it is consistent."""
        epoch, end_offset = self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)
        return None if end_offset == UNDEFINED_EPOCH_OFFSET else (epoch, end_offset)

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the HW, or the first offset of the oldest unstable transaction below it."""
        unstable = None if self.producer_state is None else self.producer_state.first_unstable_offset()
        return self.high_watermark if unstable is None else min(self.high_watermark, unstable)

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, bounded by [logStartOffset, logEndOffset]; returns it."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        if self.producer_state is not None:
            self.producer_state.on_high_watermark_updated(self.high_watermark)
        return self.high_watermark

    def __repr__(self) -> str:
        return (f"Log({self.name}, logStartOffset={self.log_start_offset}, "
                f"logEndOffset={self.log_end_offset}, segments={len(self.segments)})")

    # --- append -----------------------------------------------------------------------
    @storage_errors
    def append_as_leader(
        self,
        records: bytearray | memoryview | bytes,
        leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        now: int | None = None,
        roll_checked: bool = False,
        verification_guard: VerificationGuard | None = None,
    ) -> LogAppendInfo:
        """Validate, assign offsets, stamp the epoch (and LogAppendTime), write once.

        ``records`` is patched in place (pass a bytearray or writable memoryview;
        ``bytes`` are copied first). Records themselves are never parsed.
        ``roll_checked``: the caller holds ``self.lock`` and ``append_would_block``
        answered False for exactly these bytes at ``now``, so the roll test is not asked twice.
        ``verification_guard``: the broker verifies transactions (KIP-890 part 1); see
        ``ProducerStateManager.validate_append``.
        """
        buf = bytearray(records) if isinstance(records, bytes) else records
        now = now_ms() if now is None else now
        with self.lock:
            analyzed = analyze_and_validate(buf, self.config, origin, now, self.producer_state, assign_offsets=True,
                                            topic_partition=self.name, verification_guard=verification_guard)
            if analyzed.duplicate is not None or not analyzed.batches:
                return analyzed.to_append_info(self.log_start_offset)
            if analyzed.valid_bytes < len(buf):
                buf = memoryview(buf)[: analyzed.valid_bytes]
            offset = self.log_end_offset
            log_append_time = now if self.config.log_append_time else -1
            batches: list[tuple[int, RecordBatchHeader]] = []
            for pos, header in analyzed.batches:
                patch_base_offset_and_epoch(buf, pos, offset, header.batch_length, leader_epoch)
                # Built positionally: namedtuple._replace was ~7% of a 1,000-partition produce.
                header = RecordBatchHeader(offset, header.batch_length, leader_epoch, *header[3:])
                if log_append_time >= 0:
                    patch_max_timestamp(buf, pos, header.size_in_bytes, now, 1)
                    header = header._replace(max_timestamp=now, attributes=header.attributes | 0x08)
                batches.append((pos, header))
                offset += header.last_offset_delta + 1
            self._append(buf, batches, now, roll_checked)
            self.leader_epoch_cache.assign(leader_epoch, batches[0][1].base_offset)
            analyzed.batches = batches
            info = analyzed.to_append_info(self.log_start_offset, log_append_time)
            self._after_append(batches, analyzed.markers)
            return info

    @storage_errors
    def append_as_follower(self, records: bytearray | memoryview | bytes, now: int | None = None) -> LogAppendInfo:
        """Append batches replicated from the leader, keeping their offsets and epochs."""
        now = now_ms() if now is None else now
        with self.lock:
            info = self._append_as_follower_locked(records, now, roll_checked=False)
        assert info is not None
        return info

    @storage_errors
    def try_append_as_follower(self, records: bytearray | memoryview | bytes,
                               now: int | None = None) -> LogAppendInfo | None:
        """``append_as_follower`` when it cannot block: the lock is free now and the append
        needs no roll and no ``flush.messages`` flush. None (nothing appended) otherwise: the
        caller appends on the append thread. For a follower appending on its event loop."""
        now = now_ms() if now is None else now
        if not self.lock.acquire(blocking=False):
            return None
        try:
            return self._append_as_follower_locked(records, now, roll_checked=True)
        finally:
            self.lock.release()

    def _append_as_follower_locked(self, records: bytearray | memoryview | bytes, now: int,
                                   roll_checked: bool) -> LogAppendInfo | None:
        """Under the lock. ``roll_checked``: refuse (None) an append that would roll or flush."""
        analyzed = analyze_and_validate(
            records, self.config, AppendOrigin.REPLICATION, now, self.producer_state, assign_offsets=False
        )
        if not analyzed.batches:
            return analyzed.to_append_info(self.log_start_offset)
        if analyzed.valid_bytes < len(records):
            records = memoryview(records)[: analyzed.valid_bytes]
        batches = analyzed.batches
        first, last = batches[0][1], batches[-1][1]
        if first.base_offset < self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"{self.name}: follower append starts at {first.base_offset}, below the log end {self.log_end_offset}"
            )
        if roll_checked and self._roll_or_flush_due(len(records), _max_timestamp(batches), last.last_offset, now):
            return None
        self._append(records, batches, now, roll_checked)
        for _, header in batches:
            self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        self._after_append(batches, analyzed.markers)
        return analyzed.to_append_info(self.log_start_offset)

    def append_would_block(self, size: int, max_timestamp: int, last_offset_delta: int, now: int | None = None) -> bool:
        """Whether appending one batch of ``size`` bytes now could fsync: a roll, or a
        ``flush.messages`` flush. The broker appends on its event loop only when not.

        Conservative by construction: it asks the same roll test the append uses.
        """
        now = now_ms() if now is None else now
        if self.config.log_append_time:  # the append stamps ``now``: roll on what it will write
            max_timestamp = now
        return self._roll_or_flush_due(size, max_timestamp, self.log_end_offset + last_offset_delta, now)

    def _roll_or_flush_due(self, size: int, max_timestamp: int, last_offset: int, now: int) -> bool:
        """An append of ``size`` bytes ending at ``last_offset`` would roll the active segment or
        reach ``flush.messages``: the roll test the append itself asks."""
        config = self.config
        if last_offset + 1 - self.recovery_point >= config.flush_messages:
            return True
        return self.active_segment.should_roll(size, max_timestamp, last_offset, now, config)

    def _append(self, buf: Buffer, batches: Sequence[tuple[int, RecordBatchHeader]], now: int,
                roll_checked: bool = False) -> None:
        size = batches[-1][0] + batches[-1][1].size_in_bytes - batches[0][0]
        first, last = batches[0][1], batches[-1][1]
        segment = self.active_segment
        if not roll_checked and segment.should_roll(size, _max_timestamp(batches), last.last_offset, now, self.config):
            segment = self.roll(first.base_offset, now)
        segment.append(buf, batches)
        self.log_end_offset = last.next_offset
        self._end_snapshot = (last.next_offset, segment, segment.size)

    def _after_append(
        self, batches: Sequence[tuple[int, RecordBatchHeader]], markers: dict[int, EndTxnMarker | None]
    ) -> None:
        state = self.producer_state
        if state is not None:
            for index, (_, header) in enumerate(batches):
                completed = state.update(header, marker=markers.get(index))
                if completed is not None and completed.is_aborted:
                    self.active_segment.update_txn_index(
                        completed.producer_id, completed.first_offset, completed.last_offset,
                        state.last_stable_offset(completed),
                    )
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()

    # --- roll and flush -----------------------------------------------------------------
    @storage_errors
    def roll(self, expected_next_offset: int | None = None, now: int | None = None) -> LogSegment:
        """Start a new active segment; the old one is trimmed and fsynced (synchronously)."""
        with self.lock:
            new_offset = max(expected_next_offset or 0, self.log_end_offset)
            active = self.active_segment
            if active.base_offset == new_offset and active.size == 0:
                return active  # nothing to roll away from
            active.on_become_inactive_segment()
            if self.producer_state is not None:
                self.producer_state.take_snapshot(new_offset)
            segment = LogSegment.open(
                self.dir, new_offset, self.config, create=True,
                now_ms=now_ms() if now is None else now, rolling_jitter_ms=self.config.random_segment_jitter(),
            )
            self.segments.add(segment)
            self._dir_dirty = True
            log.info("%s: rolled new log segment at offset %d", self.name, new_offset)
            self.flush(new_offset)
            return segment

    @storage_errors
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recoveryPoint, offset); advance the recovery point."""
        with self.lock:
            offset = self.log_end_offset if offset is None else offset
            if offset <= self.recovery_point:
                return
            for segment in self.segments.range(self.recovery_point, offset):
                segment.flush()
            # Epochs of the offsets now flushed must survive a power loss too.
            self.leader_epoch_cache.sync()
            if self._dir_dirty:  # a new segment's directory entry must be durable too
                fsync_dir(self.dir)
                self._dir_dirty = False
            self.recovery_point = offset
            self.last_flush_ms = now_ms()

    def flush_if_due(self, now: int | None = None) -> bool:
        """``flush.ms``: flush when the last flush is older than it (the scheduler calls this)."""
        now = now_ms() if now is None else now
        if self.log_end_offset > self.recovery_point and now - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    # --- read ---------------------------------------------------------------------------
    @storage_errors
    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
        isolation: FetchIsolation | None = None,
    ) -> FetchDataInfo:
        """Whole batches of one segment from the batch containing ``offset``.

        ``max_offset`` (HW or LSO) excludes the batch containing it and all after;
        ``isolation`` sets it from the log end, HW or LSO, and TXN_COMMITTED also
        returns the aborted transactions overlapping the batches read.
        Raises OffsetOutOfRangeError outside [logStartOffset, logEndOffset].
        """
        if isolation is not None and max_offset is None:
            if isolation is FetchIsolation.LOG_END:
                max_offset = self.log_end_offset
            elif isolation is FetchIsolation.HIGH_WATERMARK:
                max_offset = self.high_watermark
            else:
                max_offset = self.last_stable_offset
        info = self._read(offset, max_bytes, max_offset, min_one_message)
        if isolation is FetchIsolation.TXN_COMMITTED:
            upper = info.next_offset if info.next_offset is not None else self.log_end_offset
            aborted = self.collect_aborted_transactions(offset, upper) if info.records else []
            info = dataclasses.replace(info, aborted_transactions=aborted)
        return info

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [start_offset, upper_bound_offset), from the txn indexes."""
        found: list[AbortedTxn] = []
        for segment in self.segments.segments_from(start_offset):
            result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            found += result.aborted_transactions
            if result.is_complete:
                break
        return found

    def _read(self, offset: int, max_bytes: int, max_offset: int | None, min_one_message: bool) -> FetchDataInfo:
        end_snapshot = self._end_snapshot
        end_offset = self.log_end_offset
        segments = self.segments
        if offset == end_offset or (max_offset is not None and offset >= max_offset and offset <= end_offset):
            active: LogSegment = segments.last_segment  # type: ignore[assignment]  # a log always has one
            return FetchDataInfo(LogOffsetMetadata(offset, active.base_offset, active.size), None)
        if offset > end_offset or offset < self.log_start_offset:
            raise OffsetOutOfRangeError(
                f"{self.name}: offset {offset} is out of range [{self.log_start_offset}, {end_offset}]"
            )
        segment = segments.floor_segment(offset)
        max_segment = None if max_offset is None else segments.floor_segment(max_offset)
        while segment is not None:
            max_position = bound_offset = None
            if max_segment is segment:
                if end_snapshot is not None and end_snapshot[1] is segment and end_snapshot[0] == max_offset:
                    max_position, bound_offset = end_snapshot[2], max_offset
                else:
                    found = segment.translate_offset(max_offset)  # type: ignore[arg-type]
                    max_position = segment.size if found is None else found[0]
            info = segment.read(offset, max_bytes, max_position, min_one_message, bound_offset)
            if info is not None:
                return info
            segment = segments.higher_segment(segment.base_offset)
        return FetchDataInfo(LogOffsetMetadata(offset), None)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: -1 latest, -2 earliest, -3 max timestamp, -4 earliest local, or a time
        (the first record whose timestamp is >= it, found by ``storage.log_offsets``)."""
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = self.log_start_offset
            return TimestampAndOffset(-1, start, self.leader_epoch_cache.epoch_for_offset(start))
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, self.log_end_offset, self.leader_epoch_cache.latest_epoch)
        segments = self.segments.values()  # copy-on-write: safe to iterate
        if timestamp == MAX_TIMESTAMP:
            return offset_of_max_timestamp(segments, self.log_start_offset)
        return self._timestamp_search.offset_for(segments, self.log_start_offset, timestamp)

    def legacy_fetch_offsets_before(self, timestamp: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0: segment start offsets (and the log end offset) before a time, descending."""
        return legacy_offsets_before(self.segments.values(), self.log_start_offset, self.log_end_offset, now_ms(),
                                     timestamp, max_num_offsets)

    # --- log start offset, truncation -------------------------------------------------------
    def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str = "") -> bool:
        """Move the log start offset forward (never past the HW); True if it moved."""
        with self.lock:
            if new_log_start_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"{self.name}: cannot move the log start offset to {new_log_start_offset}, "
                    f"beyond the high watermark {self.high_watermark}"
                )
            if new_log_start_offset <= self.log_start_offset:
                return False
            log.info("%s: incrementing log start offset to %d (%s)", self.name, new_log_start_offset, reason)
            self.log_start_offset = new_log_start_offset
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            if self.producer_state is not None:
                self.producer_state.on_log_start_offset_incremented(new_log_start_offset)
            return True

    @storage_errors
    def delete_records(self, offset: int, now: int | None = None) -> int:
        """DeleteRecords: move the log start offset and drop the segments below it."""
        self.maybe_increment_log_start_offset(offset, "client delete records request")
        self._delete_segments_breaching(log_start_offset_breach(self.log_start_offset), now)
        return self.log_start_offset

    @storage_errors
    def truncate_to(self, target_offset: int) -> bool:
        """Follower truncation: remove every batch at or after ``target_offset``."""
        with self.lock:
            if target_offset < 0:
                raise ValueError("cannot truncate to a negative offset")
            if target_offset >= self.log_end_offset:
                # No batch goes, but an epoch this broker recorded when it was elected and wrote
                # nothing in may sit at the log end and conflict with the leader's (Kafka does the same).
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
                return False
            if target_offset < self.active_segment.base_offset and target_offset <= self.log_start_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            doomed = [s for s in self.segments.values() if s.base_offset > target_offset]
            self.remove_and_delete_segments(doomed, "truncation")
            self._end_snapshot = None
            self.active_segment.truncate_to(target_offset)
            self.active_segment.resize_indexes(self.config.segment_index_bytes)
            self.log_end_offset = self.active_segment.read_next_offset()
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self.high_watermark = min(self.high_watermark, self.log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            if self.producer_state is not None:
                rebuild_producer_state(self.producer_state, self.segments, self.log_start_offset, self.log_end_offset)
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        with self.lock:
            self._end_snapshot = None
            self.remove_and_delete_segments(self.log_segments(), "truncate fully")
            self.segments.add(LogSegment.open(self.dir, new_offset, self.config, create=True))
            self._dir_dirty = True
            self.log_start_offset = self.recovery_point = self.log_end_offset = new_offset
            self.high_watermark = new_offset
            self.leader_epoch_cache.clear_and_flush()
            if self.producer_state is not None:
                self.producer_state.truncate_fully_and_start_at(new_offset)

    # --- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Flush, snapshot producer state, trim indexes, release files."""
        with self.lock:
            if self.closed:
                return
            self.flush()
            if self.producer_state is not None:
                self.producer_state.take_snapshot(self.log_end_offset)
            for segment in self.segments:
                segment.close()
            for _, segment in self.pending_deletes:
                segment.close_handlers()
            self.closed = True

    def close_without_flush(self) -> None:
        """Release files as a crash would leave them (tests, failed log dirs)."""
        with self.lock:
            for segment in self.segments:
                segment.close_handlers()
            for _, segment in self.pending_deletes:
                segment.close_handlers()
            self.closed = True

    def delete(self) -> None:
        """Remove the whole partition directory (topic deletion)."""
        with self.lock:
            self.close_without_flush()
            shutil.rmtree(self.dir, ignore_errors=True)
