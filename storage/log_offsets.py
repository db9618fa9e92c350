"""ListOffsets lookups over a log's segments: by time, and the largest timestamp.

This module sits below ``storage.log``: it is given the segments and the log
start offset, never the Log. ``Log.fetch_offset_by_timestamp`` answers the
special timestamps that are offsets the log keeps (earliest, latest) and asks
here for the rest.

By time, as Kafka: the first segment whose largest timestamp reaches the
target (a binary search over the running maximum of the segments' largest
timestamps), then its time index, offset index and batch headers find the
first batch whose maxTimestamp reaches it, and that batch's records give the
first record with timestamp >= target (records are decoded only here).

ListOffsets v0 answers a list instead (``legacy_offsets_before``): the
segments' start offsets, dated by each segment file's last modification, as
Kafka 3.9's ``legacyFetchOffsetsBefore`` did; no record is read.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from protocol.record_batch import RecordBatchHeader
from protocol.records import iter_records
from protocol.request_constants import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from storage.log_segment import LogSegment


@dataclass(frozen=True)
class TimestampAndOffset:
    """A ListOffsets answer: timestamp (-1 when not by time), offset, leader epoch."""

    timestamp: int
    offset: int
    leader_epoch: int | None


class TimestampSearch:
    """The first record at or after a time in one log's segments; one per Log.

    Keeps the running maximum of the inactive segments' largest timestamps,
    keyed by SegmentList's internal list: that list is replaced (never changed
    in place) on every roll or deletion, so a new list means a stale maximum.
    Both are kept in one tuple, replaced in one assignment: lookups take no lock.
    """

    __slots__ = ("_prefix_max",)

    def __init__(self) -> None:
        self._prefix_max: tuple[list[LogSegment], list[int]] | None = None

    def offset_for(self, segments: list[LogSegment], log_start_offset: int, timestamp: int) -> TimestampAndOffset | None:
        """The first record at or above ``log_start_offset`` whose timestamp is >= ``timestamp``."""
        for segment in segments[self._first_segment_reaching(segments, timestamp):]:
            if segment.max_timestamp_so_far < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, log_start_offset)
            if found is None:
                continue
            position, header = found
            for record in iter_records(segment.read_batch(position, header)):
                if record.timestamp >= timestamp and record.offset >= log_start_offset:
                    return TimestampAndOffset(record.timestamp, record.offset, _epoch_of(header))
        return None

    def _first_segment_reaching(self, segments: list[LogSegment], timestamp: int) -> int:
        """Index of the first segment whose largest timestamp may be >= ``timestamp``."""
        cache = self._prefix_max
        if cache is None or cache[0] is not segments:
            running, prefix = -1, []
            for segment in segments[:-1]:
                running = max(running, segment.max_timestamp_so_far)
                prefix.append(running)
            cache = self._prefix_max = (segments, prefix)
        return bisect.bisect_left(cache[1], timestamp)


def offset_of_max_timestamp(segments: list[LogSegment], log_start_offset: int) -> TimestampAndOffset | None:
    """The record with the largest timestamp (the first of them), as ListOffsets' MAX_TIMESTAMP."""
    best = None
    for segment in segments:
        ts = segment.max_timestamp_so_far
        if ts >= 0 and (best is None or ts > best.max_timestamp_so_far):
            best = segment
    if best is None:
        return None
    found = best.find_offset_by_timestamp(best.max_timestamp_so_far, log_start_offset)
    if found is None:
        return None
    position, header = found
    for record in iter_records(best.read_batch(position, header)):
        if record.timestamp == header.max_timestamp:
            return TimestampAndOffset(record.timestamp, record.offset, _epoch_of(header))
    return TimestampAndOffset(header.max_timestamp, header.base_offset, _epoch_of(header))


def _epoch_of(header: RecordBatchHeader) -> int | None:
    return header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None


def legacy_offsets_before(segments: list[LogSegment], log_start_offset: int, log_end_offset: int, now_ms: int,
                          timestamp: int, max_num_offsets: int) -> list[int]:
    """ListOffsets v0: up to ``max_num_offsets`` offsets, descending, "before" ``timestamp``.

    The candidates are each segment's start (never below the log start
    offset), dated by the segment file's last modification, and the log end
    offset dated now when the active segment holds data. LATEST starts from
    the newest candidate, EARLIEST from the oldest; a time starts from the
    newest candidate dated at or before it. Dates are file times, not record
    timestamps: that is the old API's meaning, kept as Kafka 3.9 kept it.
    """
    candidates = [(max(segment.base_offset, log_start_offset), segment.last_modified_ms()) for segment in segments]
    if segments and segments[-1].size > 0:
        candidates.append((log_end_offset, now_ms))
    if timestamp == LATEST_TIMESTAMP:
        start = len(candidates) - 1
    elif timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        start = 0 if candidates else -1
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp:
            start -= 1
    # Walking back from ``start`` yields at most start + 1 offsets; a negative
    # maximum (Kafka fails the partition on one) asks for none.
    count = max(0, min(max_num_offsets, start + 1))
    return sorted((candidates[start - i][0] for i in range(count)), reverse=True)
