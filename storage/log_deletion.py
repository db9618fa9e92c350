"""The Log's removal of segments: the retention pass, deletion after ``file.delete.delay.ms``,
and the cleaner's crash-safe swap of cleaned segments.

Kafka's ``UnifiedLog.deleteOldSegments`` and ``LocalLog``'s ``removeAndDeleteSegments`` and
``replaceSegments``. A mixin of :class:`~storage.log.Log` (never used without it): each method
takes the Log's lock, as every mutation of a Log does, and works on the Log's segment list.
Which segments a retention rule lets go is ``storage.log_retention``'s to say; this module
deletes them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from storage.checkpoints import fsync_dir
from storage.log_config import LogConfig
from storage.log_retention import (
    RetentionBreach,
    deletable_segments,
    log_start_offset_breach,
    retention_ms_breach,
    retention_size_breach,
)
from storage.log_segment import CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, SWAP_FILE_SUFFIX, LogSegment, now_ms
from storage.producer_state import ProducerStateManager
from storage.segment_list import SegmentList

log = logging.getLogger(__name__)


class SegmentDeletion:
    # The Log's slots hold the state; the mixin adds none.
    __slots__ = ()

    dir: Path
    config: LogConfig
    segments: SegmentList
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    producer_state: ProducerStateManager | None
    lock: threading.RLock
    pending_deletes: list[tuple[int, LogSegment]]

    if TYPE_CHECKING:  # the Log's, which the methods here call
        @property
        def name(self) -> str: ...

        @property
        def size(self) -> int: ...

        def roll(self, expected_next_offset: int | None = None, now: int | None = None) -> LogSegment: ...

        def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str = "") -> bool: ...

    # --- retention ------------------------------------------------------------------------
    def delete_old_segments(self, now: int | None = None) -> int:
        """One retention pass (Kafka's deleteOldSegments): by time and size where
        ``cleanup.policy`` has delete, then below the log start offset; returns the number
        of segments deleted. The rules are ``storage.log_retention``'s."""
        now = now_ms() if now is None else now
        deleted = 0
        if self.config.delete:
            deleted += self._delete_segments_breaching(retention_ms_breach(self.config, now), now)
            deleted += self._delete_segments_breaching(retention_size_breach(self.config, self.size), now)
        return deleted + self._delete_segments_breaching(log_start_offset_breach(self.log_start_offset), now)

    def _delete_segments_breaching(self, breach: RetentionBreach | None, now: int | None) -> int:
        if breach is None:
            return 0
        with self.lock:
            doomed = deletable_segments(self.segments.values(), self.high_watermark, self.log_end_offset,
                                        breach.predicate)
            if not doomed:
                return 0
            if len(doomed) == len(self.segments):
                self.roll(now=now)  # never delete the active segment: roll past it first
            self.remove_and_delete_segments(doomed, breach.reason, now)
            first = self.segments.values()[0]
            if first.base_offset > self.log_start_offset:
                self.maybe_increment_log_start_offset(first.base_offset, breach.reason)
            if self.producer_state is not None:
                self.producer_state.delete_snapshots_before(first.base_offset)
            log.info("%s: deleted %d segment(s) (%s)", self.name, len(doomed), breach.reason)
            return len(doomed)

    # --- segment deletion and replacement --------------------------------------------------
    def remove_and_delete_segments(self, segments: Sequence[LogSegment], reason: str, now: int | None = None) -> None:
        """Take segments out of the log, rename them ``.deleted``, delete after file.delete.delay.ms."""
        with self.lock:
            for segment in segments:
                self.segments.remove(segment.base_offset)
            self._schedule_delete(segments, reason, now)

    def _schedule_delete(self, segments: Sequence[LogSegment], reason: str, now: int | None = None) -> None:
        due = (now_ms() if now is None else now) + self.config.file_delete_delay_ms
        for segment in segments:
            if not segment.has_suffix(DELETED_FILE_SUFFIX):
                segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
            log.info("%s: scheduling %s for deletion (%s)", self.name, segment, reason)
            self.pending_deletes.append((due, segment))

    def delete_pending_segments(self, now: int | None = None) -> int:
        """Delete ``.deleted`` files whose delay is over; returns how many segments went."""
        now = now_ms() if now is None else now
        with self.lock:
            due = [s for t, s in self.pending_deletes if t <= now]
            self.pending_deletes[:] = [(t, s) for t, s in self.pending_deletes if t > now]
        for segment in due:
            segment.delete_if_exists()
        return len(due)

    def replace_segments(self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]) -> None:
        """Swap cleaned segments in for old ones (Kafka's replaceSegments), crash-safe.

        ``new_segments`` are written with the ``.cleaned`` suffix. Steps, each
        durable before the next: fsync the new segments; ``.cleaned`` → ``.swap``;
        put them in the segment list; rename the old ones ``.deleted``;
        ``.swap`` → final name. A crash at any point is completed or undone by
        the loader (``.cleaned`` files dropped, ``.swap`` files replace the
        segments their range covers).
        """
        with self.lock:
            new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
            new_ids = {id(s) for s in new_sorted}
            old_sorted = [s for s in sorted(old_segments, key=lambda s: s.base_offset)
                          if self.segments.get(s.base_offset) is s and id(s) not in new_ids]
            for segment in new_sorted:
                segment.on_become_inactive_segment()
                segment.flush()
            for segment in reversed(new_sorted):
                if segment.has_suffix(CLEANED_FILE_SUFFIX):
                    segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
            fsync_dir(self.dir)
            new_bases = {s.base_offset for s in new_sorted}
            for segment in new_sorted:
                self.segments.add(segment)
            for segment in old_sorted:
                if segment.base_offset not in new_bases:
                    self.segments.remove(segment.base_offset)
            self._schedule_delete(old_sorted, "replaced by cleaned segments")
            fsync_dir(self.dir)
            for segment in new_sorted:
                if segment.has_suffix(SWAP_FILE_SUFFIX):
                    segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
            fsync_dir(self.dir)
