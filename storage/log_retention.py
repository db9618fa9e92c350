"""Retention: deleting old segments by time, size and log start offset (Kafka's deleteOldSegments).

A segment is deletable only when all of it is below the high watermark. The
active segment is never deleted: when everything has expired, the log rolls
first so the expired data lives in an inactive segment. Deleted segments are
renamed ``.deleted`` and removed after ``file.delete.delay.ms``.
"""

from __future__ import annotations

import logging
from typing import Callable

from storage.log import Log, now_ms
from storage.log_segment import LogSegment

log = logging.getLogger(__name__)

Predicate = Callable[[LogSegment, "LogSegment | None"], bool]


def delete_old_segments(target: Log, now: int | None = None) -> int:
    """One retention pass; returns the number of segments deleted."""
    now = now_ms() if now is None else now
    if target.config.delete:
        return (
            delete_retention_ms_breached_segments(target, now)
            + delete_retention_size_breached_segments(target, now)
            + delete_log_start_offset_breached_segments(target, now)
        )
    return delete_log_start_offset_breached_segments(target, now)


def delete_retention_ms_breached_segments(target: Log, now: int | None = None) -> int:
    retention_ms = target.config.retention_ms
    if retention_ms < 0:
        return 0
    now = now_ms() if now is None else now

    def breached(segment: LogSegment, _next: LogSegment | None) -> bool:
        return now - segment.largest_timestamp > retention_ms

    return _delete_old_segments(target, breached, f"retention time {retention_ms}ms breach", now)


def delete_retention_size_breached_segments(target: Log, now: int | None = None) -> int:
    retention_bytes = target.config.retention_bytes
    if retention_bytes < 0:
        return 0
    excess = [target.size - retention_bytes]
    if excess[0] < 0:
        return 0

    def breached(segment: LogSegment, _next: LogSegment | None) -> bool:
        if excess[0] - segment.size >= 0:
            excess[0] -= segment.size
            return True
        return False

    return _delete_old_segments(target, breached, f"retention size {retention_bytes} bytes breach", now)


def delete_log_start_offset_breached_segments(target: Log, now: int | None = None) -> int:
    def breached(segment: LogSegment, next_segment: LogSegment | None) -> bool:
        return next_segment is not None and next_segment.base_offset <= target.log_start_offset

    return _delete_old_segments(target, breached, f"log start offset {target.log_start_offset} breach", now)


def deletable_segments(target: Log, predicate: Predicate) -> list[LogSegment]:
    segments = target.log_segments()
    deletable = []
    for i, segment in enumerate(segments):
        next_segment = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = next_segment.base_offset if next_segment is not None else target.log_end_offset
        last_and_empty = next_segment is None and segment.size == 0
        if target.high_watermark >= upper_bound and not last_and_empty and predicate(segment, next_segment):
            deletable.append(segment)
        else:
            break
    return deletable


def _delete_old_segments(target: Log, predicate: Predicate, reason: str, now: int | None) -> int:
    with target.lock:
        doomed = deletable_segments(target, predicate)
        if not doomed:
            return 0
        if len(doomed) == len(target.segments):
            target.roll(now=now)  # never delete the active segment: roll past it first
        target.remove_and_delete_segments(doomed, reason, now)
        first = target.segments.first_segment
        assert first is not None
        if first.base_offset > target.log_start_offset:
            target.maybe_increment_log_start_offset(first.base_offset, reason)
        state = target.producer_state
        if state is not None and hasattr(state, "delete_snapshots_before"):
            state.delete_snapshots_before(first.base_offset)
        log.info("%s: deleted %d segment(s) (%s)", target.name, len(doomed), reason)
        return len(doomed)
