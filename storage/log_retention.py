"""Retention: which segments may go by time, size and log start offset (Kafka's deleteOldSegments rules).

This module sits below ``storage.log``: it decides over the segments and
offsets it is given, never a Log. ``Log.delete_old_segments`` (``storage.log_deletion``:
the retention pass LogManager runs) and ``Log.delete_records`` act on its answers.

A segment is deletable only when all of it is below the high watermark, and
only from the oldest segment on: the scan stops at the first that is kept. The
active segment is never deleted: when everything has expired, the log rolls
first so the expired data lives in an inactive segment. Deleted segments are
renamed ``.deleted`` and removed after ``file.delete.delay.ms``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from storage.log_config import LogConfig
from storage.log_segment import LogSegment

#: Whether a segment may go, given the segment after it (None for the last one).
Predicate = Callable[[LogSegment, "LogSegment | None"], bool]


class RetentionBreach(NamedTuple):
    """One retention rule, as it stands now: which segments breach it, and the reason logged."""

    predicate: Predicate
    reason: str


def retention_ms_breach(config: LogConfig, now: int) -> RetentionBreach | None:
    """``retention.ms``: segments whose largest timestamp is older than it; None when unlimited."""
    retention_ms = config.retention_ms
    if retention_ms < 0:
        return None

    def breached(segment: LogSegment, _next: LogSegment | None) -> bool:
        return now - segment.largest_timestamp > retention_ms

    return RetentionBreach(breached, f"retention time {retention_ms}ms breach")


def retention_size_breach(config: LogConfig, log_size: int) -> RetentionBreach | None:
    """``retention.bytes``: the oldest segments while the log is over it; None when it is not."""
    retention_bytes = config.retention_bytes
    if retention_bytes < 0 or log_size < retention_bytes:
        return None
    excess = log_size - retention_bytes

    def breached(segment: LogSegment, _next: LogSegment | None) -> bool:
        nonlocal excess
        if excess - segment.size >= 0:
            excess -= segment.size
            return True
        return False

    return RetentionBreach(breached, f"retention size {retention_bytes} bytes breach")


def log_start_offset_breach(log_start_offset: int) -> RetentionBreach:
    """Segments wholly below the log start offset (moved by DeleteRecords or retention)."""

    def breached(_segment: LogSegment, next_segment: LogSegment | None) -> bool:
        return next_segment is not None and next_segment.base_offset <= log_start_offset

    return RetentionBreach(breached, f"log start offset {log_start_offset} breach")


def deletable_segments(
    segments: Sequence[LogSegment], high_watermark: int, log_end_offset: int, predicate: Predicate
) -> list[LogSegment]:
    """The oldest ``segments`` (ordered) that lie below the high watermark and satisfy ``predicate``."""
    deletable = []
    for i, segment in enumerate(segments):
        next_segment = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = next_segment.base_offset if next_segment is not None else log_end_offset
        last_and_empty = next_segment is None and segment.size == 0
        if high_watermark >= upper_bound and not last_and_empty and predicate(segment, next_segment):
            deletable.append(segment)
        else:
            break
    return deletable
