"""The log cleaner: which compacted logs to clean, how far, and the cleaner checkpoint.

Kafka's LogCleaner + LogCleanerManager, synchronous: the broker calls
``LogCleaner.clean_once(logs)`` from a background thread (one pass over the
filthiest log) and can force ``clean_log(log)``. The record-level work is in
``storage.compaction``.

Selection (``cleanable_logs`` / ``grab_filthiest_log``), as Kafka:

* only logs whose ``cleanup.policy`` contains ``compact``;
* the dirty section starts at the offset recorded in the log dir's
  ``cleaner-offset-checkpoint`` (reset to the log start offset if it is
  before it or past the log end) and ends at the first uncleanable offset:
  the smallest of the last stable offset (no undecided transaction is
  cleaned), the active segment's base offset and the base offset of the first
  segment whose largest timestamp is newer than ``now - min.compaction.lag.ms``;
* a log is cleanable when its dirty ratio (dirty bytes / (clean + dirty
  bytes), counting whole segments) exceeds ``min.cleanable.dirty.ratio``, or
  when ``max.compaction.lag.ms`` has expired for its oldest dirty segment and
  it has dirty bytes; the filthiest one (highest ratio) is cleaned.

After a pass the checkpoint records the offset the pass reached (Kafka's
``doneCleaning``), written atomically in Kafka's text format.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from storage.compaction import (
    BatchFilter,
    CleanedTransactionMetadata,
    CleanerStats,
    aborted_transactions,
    active_producers_from_headers,
    build_offset_map,
    clean_segments,
    group_segments_by_size,
    last_records_of,
)
from storage.log import Log
from storage.log_segment import LogSegment
from storage.offset_map import DEFAULT_DEDUPE_BUFFER_SIZE, DEFAULT_LOAD_FACTOR, OffsetMap
from storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from storage.segment_list import overlapping as segments_overlapping

log = logging.getLogger(__name__)


class LogCleaningAbortedError(Exception):
    """The broker asked to stop cleaning this log (deletion, truncation, shutdown)."""


# ---------------------------------------------------------------- log accessors


def last_records_of_active_producers(
    log_: Log, now_ms: int, expiration_ms: int
) -> dict[int, tuple[int | None, int]] | None:
    """(last data offset, epoch) per producer from the log's own producer state, if it has one.

    Without one the cleaner replays the batch headers instead (``active_producers_from_headers``).
    """
    psm = log_.producer_state
    if psm is None:
        return None
    with log_.lock:  # appends mutate the producer map
        return last_records_of(psm, now_ms, expiration_ms)


# ---------------------------------------------------------------- selection


@dataclass
class LogToClean:
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable_offsets(log_: Log, last_clean_offset: int | None, now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, whether the checkpoint must be reset)."""
    start = int(log_.log_start_offset)
    checkpointed = start if last_clean_offset is None else last_clean_offset
    if checkpointed < start or checkpointed > int(log_.log_end_offset):
        first_dirty, force_update = start, last_clean_offset is not None
    else:
        first_dirty, force_update = checkpointed, False
    segments = log_.log_segments()
    active_base = segments[-1].base_offset
    candidates = [log_.last_stable_offset, active_base]
    lag = max(int(log_.config.min_compaction_lag_ms), 0)
    if lag > 0:
        for segment in segments_overlapping(segments[:-1], first_dirty, active_base):
            if segment.largest_timestamp > now_ms - lag:
                candidates.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates)), force_update


def log_to_clean(log_: Log, last_clean_offset: int | None, now_ms: int) -> tuple[LogToClean, bool]:
    """The log's clean and cleanable sizes; the bool says the checkpoint must be reset."""
    first_dirty, first_uncleanable, force_update = cleanable_offsets(log_, last_clean_offset, now_ms)
    segments = log_.log_segments()
    # Whole segments count: cleanable bytes stop at the segment holding the
    # first uncleanable offset.
    holding = segments_overlapping(segments, first_uncleanable, first_uncleanable + 1)
    uncleanable_base = holding[0].base_offset if holding else segments[0].base_offset
    clean = sum(s.size for s in segments if s.base_offset < first_dirty)
    cleanable = sum(s.size for s in segments_overlapping(segments, first_dirty, uncleanable_base))
    need_now = _max_compaction_delay(log_, segments, first_dirty, now_ms) > 0
    return LogToClean(log_, first_dirty, first_uncleanable, clean, cleanable, need_now), force_update


def _max_compaction_delay(log_: Log, segments: Sequence[LogSegment], first_dirty: int, now_ms: int) -> int:
    max_lag = int(getattr(log_.config, "max_compaction_lag_ms", 0))
    dirty = segments_overlapping(segments[:-1], first_dirty, segments[-1].base_offset)
    firsts = []
    for segment in dirty:
        first = next(iter(segment.batches()), None)
        if first is not None and first[1].max_timestamp > 0:
            firsts.append(first[1].max_timestamp)
    if not firsts:
        return 0
    clean_until = now_ms - max(max_lag, 0)
    earliest = min(firsts)
    return clean_until - earliest if earliest < clean_until else 0


# ---------------------------------------------------------------- the cleaner


@dataclass
class CleanResult:
    topic_partition: tuple[str, int]
    first_dirty_offset: int
    end_offset: int  # first offset not cleaned; what the checkpoint now says
    groups: int
    stats: CleanerStats


class LogCleaner:
    """Compacts logs; safe to call from one background thread while the log appends."""

    def __init__(
        self,
        *,
        dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        io_buffer_load_factor: float = DEFAULT_LOAD_FACTOR,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        time_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.offset_map = OffsetMap(dedupe_buffer_size, io_buffer_load_factor)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.time_ms = time_ms
        self._lock = threading.Lock()
        self._aborted: set[str] = set()
        #: Kafka's LogCleaningPaused: partitions no pass may start on (a count: pauses nest).
        self._paused: Counter[tuple[str, int]] = Counter()
        #: The partition a pass runs on now; ``_state`` is notified when it ends.
        self._cleaning: tuple[str, int] | None = None
        self._state = threading.Condition()

    # -------------------------------------------------------- checkpoints

    @staticmethod
    def checkpoint_file(log_: Log) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(Path(log_.dir).parent / CLEANER_OFFSET_CHECKPOINT)

    def last_clean_offset(self, log_: Log) -> int | None:
        return self.checkpoint_file(log_).read_or_empty().get((log_.topic, log_.partition))

    def update_checkpoint(self, log_: Log, offset: int) -> None:
        with self._lock:  # several logs of one log dir share the file
            checkpoint = self.checkpoint_file(log_)
            offsets = checkpoint.read_or_empty()
            offsets[(log_.topic, log_.partition)] = offset
            checkpoint.write(offsets)

    def maybe_truncate_checkpoint(self, log_: Log, offset: int) -> None:
        """After the log was truncated below the checkpointed offset."""
        last = self.last_clean_offset(log_)
        if last is not None and last > offset:
            self.update_checkpoint(log_, offset)

    def alter_checkpoint_dir(self, tp: tuple[str, int], source_dir: Path, dest_dir: Path) -> None:
        """A log moved to another log dir: its cleaned offset moves from the one's checkpoint to the other's."""
        with self._lock:
            source = OffsetCheckpointFile(source_dir / CLEANER_OFFSET_CHECKPOINT)
            offsets = source.read_or_empty()
            offset = offsets.pop(tp, None)
            if offset is None:
                return
            source.write(offsets)
            dest = OffsetCheckpointFile(dest_dir / CLEANER_OFFSET_CHECKPOINT)
            dest.write({**dest.read_or_empty(), tp: offset})

    def remove_checkpoint(self, log_: Log) -> None:
        with self._lock:
            checkpoint = self.checkpoint_file(log_)
            offsets = checkpoint.read_or_empty()
            if offsets.pop((log_.topic, log_.partition), None) is not None:
                checkpoint.write(offsets)

    # -------------------------------------------------------- aborting

    def abort_cleaning(self, log_: Log) -> None:
        """Make a pass running on ``log_`` stop at its next batch (the files stay intact)."""
        self._aborted.add(str(log_.dir))

    def resume_cleaning(self, log_: Log) -> None:
        self._aborted.discard(str(log_.dir))

    def pause_cleaning(self, tp: tuple[str, int]) -> None:
        """No pass starts on the partition until ``resume_paused_cleaning``; one running stops at its
        next batch (``await_pause`` waits for that). Any thread: it never blocks."""
        with self._state:
            self._paused[tp] += 1

    def await_pause(self, tp: tuple[str, int]) -> None:
        """Blocking, after ``pause_cleaning``: until no pass runs on the partition (Kafka's
        abortAndPauseCleaning waits the same way), so its log can be replaced."""
        with self._state:
            self._state.wait_for(lambda: self._cleaning != tp)

    def resume_paused_cleaning(self, tp: tuple[str, int]) -> None:
        with self._state:
            self._paused[tp] -= 1
            if self._paused[tp] <= 0:
                del self._paused[tp]

    def is_paused(self, tp: tuple[str, int]) -> bool:
        return tp in self._paused

    @contextmanager
    def _cleaning_of(self, log_: Log) -> Iterator[None]:
        """Mark the pass on ``log_`` as running (refused while paused); unmark and notify at its end."""
        tp = (log_.topic, log_.partition)
        with self._state:
            if tp in self._paused:
                raise LogCleaningAbortedError(f"cleaning of {Path(log_.dir).name} is paused")
            self._cleaning = tp
        try:
            yield
        finally:
            with self._state:
                self._cleaning = None
                self._state.notify_all()

    def _check_done(self, log_: Log) -> Callable[[], None]:
        key, tp = str(log_.dir), (log_.topic, log_.partition)

        def check() -> None:
            if key in self._aborted or tp in self._paused:
                raise LogCleaningAbortedError(f"cleaning of {Path(key).name} aborted")

        return check

    # -------------------------------------------------------- selection

    def cleanable_logs(self, logs: Iterable[Log], now_ms: int | None = None) -> list[LogToClean]:
        """Compacted logs that need cleaning now, filthiest first."""
        now = self.time_ms() if now_ms is None else now_ms
        found = []
        for log_ in logs:
            if not log_.config.compact or str(log_.dir) in self._aborted:
                continue
            if self.is_paused((log_.topic, log_.partition)):
                continue
            ltc, force_update = log_to_clean(log_, self.last_clean_offset(log_), now)
            if force_update:
                self.update_checkpoint(log_, ltc.first_dirty_offset)
            if ltc.total_bytes <= 0:
                continue
            ratio_ok = ltc.cleanable_ratio > float(log_.config.min_cleanable_dirty_ratio)
            if ratio_ok or (ltc.need_compaction_now and ltc.cleanable_bytes > 0):
                found.append(ltc)
        found.sort(key=lambda ltc: ltc.cleanable_ratio, reverse=True)
        return found

    def grab_filthiest_log(self, logs: Iterable[Log], now_ms: int | None = None) -> LogToClean | None:
        candidates = self.cleanable_logs(logs, now_ms)
        return candidates[0] if candidates else None

    def clean_once(self, logs: Iterable[Log]) -> CleanResult | None:
        """Clean the filthiest log, if any is dirty enough; None when there was nothing to do."""
        now = self.time_ms()
        ltc = self.grab_filthiest_log(logs, now)
        return None if ltc is None else self.clean(ltc, now)

    def clean_log(self, log_: Log) -> CleanResult | None:
        """Clean ``log_`` now whatever its dirty ratio (tombstone expiry, tests, admin)."""
        now = self.time_ms()
        ltc, _ = log_to_clean(log_, self.last_clean_offset(log_), now)
        return self.clean(ltc, now)

    # -------------------------------------------------------- one pass

    def clean(self, ltc: LogToClean, now_ms: int) -> CleanResult | None:
        """One pass on ``ltc``'s log; raises LogCleaningAbortedError when aborted or paused."""
        with self._cleaning_of(ltc.log):
            return self._clean(ltc, now_ms)

    def _clean(self, ltc: LogToClean, now_ms: int) -> CleanResult | None:
        log_ = ltc.log
        config = log_.config
        check_done = self._check_done(log_)
        segments = log_.log_segments()
        dirty = segments_overlapping(segments, ltc.first_dirty_offset, ltc.first_uncleanable_offset)
        if ltc.first_dirty_offset >= ltc.first_uncleanable_offset:
            dirty = []
        build_offset_map(
            dirty, ltc.first_dirty_offset, ltc.first_uncleanable_offset, self.offset_map,
            aborted_transactions(log_, ltc.first_dirty_offset, ltc.first_uncleanable_offset), check_done,
        )
        # A pass with no dirty data still re-cleans the clean section (expired tombstones).
        end_offset = max(self.offset_map.latest_offset + 1, ltc.first_dirty_offset)
        # Everything below end_offset is judged by the map (absent key = no newer version).
        self.offset_map.update_latest_offset(end_offset - 1)
        to_clean = [s for s in segments_overlapping(segments, 0, end_offset) if s is not segments[-1]]
        if not to_clean:
            return None
        groups = group_segments_by_size(
            to_clean, int(config.segment_bytes), int(config.segment_index_bytes), ltc.first_uncleanable_offset
        )
        active = last_records_of_active_producers(log_, now_ms, self.producer_id_expiration_ms)
        if active is None:
            active = active_producers_from_headers(segments, now_ms, self.producer_id_expiration_ms)
        # Every batch of the groups is filtered, up to the segment after the last one.
        clean_upper = segments[len(to_clean)].base_offset
        batch_filter = BatchFilter(
            offset_map=self.offset_map,
            now_ms=now_ms,
            delete_retention_ms=int(config.delete_retention_ms),
            transactions=CleanedTransactionMetadata(aborted_transactions(log_, to_clean[0].base_offset, clean_upper)),
            last_records=active,
            upper_bound_offset=ltc.first_uncleanable_offset,
        )
        log.info(
            "cleaning %s: %d segments in %d groups, dirty [%d, %d), up to %d",
            Path(log_.dir).name, len(to_clean), len(groups), ltc.first_dirty_offset,
            ltc.first_uncleanable_offset, end_offset,
        )
        for group in groups:
            clean_segments(log_, group, batch_filter, check_done)
        self.update_checkpoint(log_, end_offset)
        return CleanResult((log_.topic, log_.partition), ltc.first_dirty_offset, end_offset, len(groups), batch_filter.stats)
