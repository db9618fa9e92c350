"""ListOffsets lookups on a Log: earliest, latest, max timestamp, or by time.

By time, as Kafka: the first segment whose largest timestamp reaches the
target (a binary search over the running maximum of the segments' largest
timestamps), then its time index, offset index and batch headers find the
first batch whose maxTimestamp reaches it, and that batch's records give the
first record with timestamp >= target (records are decoded only here).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.record_batch import RecordBatchHeader
from protocol.records import iter_records
from storage.log_segment import LogSegment

if TYPE_CHECKING:
    from storage.log import Log

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


@dataclass(frozen=True)
class TimestampAndOffset:
    """A ListOffsets answer: timestamp (-1 when not by time), offset, leader epoch."""

    timestamp: int
    offset: int
    leader_epoch: int | None


def fetch_offset_by_timestamp(log: "Log", timestamp: int) -> TimestampAndOffset | None:
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        start = log.log_start_offset
        return TimestampAndOffset(-1, start, log.leader_epoch_cache.epoch_for_offset(start))
    if timestamp == LATEST_TIMESTAMP:
        return TimestampAndOffset(-1, log.log_end_offset, log.leader_epoch_cache.latest_epoch)
    segments = log.segments.values()  # copy-on-write: safe to iterate
    if timestamp == MAX_TIMESTAMP:
        return _offset_of_max_timestamp(log, segments)
    for segment in segments[_first_segment_reaching(log, segments, timestamp):]:
        if segment.max_timestamp_so_far < timestamp:
            continue
        found = segment.find_offset_by_timestamp(timestamp, log.log_start_offset)
        if found is None:
            continue
        position, header = found
        for record in iter_records(segment.read_batch(position, header)):
            if record.timestamp >= timestamp and record.offset >= log.log_start_offset:
                return TimestampAndOffset(record.timestamp, record.offset, _epoch_of(header))
    return None


def _first_segment_reaching(log: "Log", segments: list[LogSegment], timestamp: int) -> int:
    """Index of the first segment whose largest timestamp may be >= ``timestamp``.

    ``segments`` is SegmentList' internal list, replaced (never changed in
    place) on every roll or deletion, so it keys the cached running maximum of
    the inactive segments' largest timestamps.
    """
    cache = log._timestamp_prefix_max
    if cache is None or cache[0] is not segments:
        running, prefix = -1, []
        for segment in segments[:-1]:
            running = max(running, segment.max_timestamp_so_far)
            prefix.append(running)
        cache = log._timestamp_prefix_max = (segments, prefix)
    return bisect.bisect_left(cache[1], timestamp)


def _offset_of_max_timestamp(log: "Log", segments: list[LogSegment]) -> TimestampAndOffset | None:
    best = None
    for segment in segments:
        ts = segment.max_timestamp_so_far
        if ts >= 0 and (best is None or ts > best.max_timestamp_so_far):
            best = segment
    if best is None:
        return None
    found = best.find_offset_by_timestamp(best.max_timestamp_so_far, log.log_start_offset)
    if found is None:
        return None
    position, header = found
    for record in iter_records(best.read_batch(position, header)):
        if record.timestamp == header.max_timestamp:
            return TimestampAndOffset(record.timestamp, record.offset, _epoch_of(header))
    return TimestampAndOffset(header.max_timestamp, header.base_offset, _epoch_of(header))


def _epoch_of(header: RecordBatchHeader) -> int | None:
    return header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None
