"""SegmentList: a partition's segments ordered by base offset.

Updates replace the list (copy-on-write), so readers that grabbed it keep a
consistent view while an appender rolls or retention deletes segments.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from storage.log_segment import LogSegment


class SegmentList:
    __slots__ = ('_bases', '_segments')

    def __init__(self) -> None:
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def values(self) -> list[LogSegment]:
        return self._segments

    def base_offsets(self) -> list[int]:
        return self._bases

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Insert ``segment``; returns a segment it replaced (same base offset)."""
        segments, bases = list(self._segments), list(self._bases)
        i = bisect.bisect_left(bases, segment.base_offset)
        replaced = None
        if i < len(bases) and bases[i] == segment.base_offset:
            replaced = segments[i]
            segments[i] = segment
        else:
            segments.insert(i, segment)
            bases.insert(i, segment.base_offset)
        self._segments, self._bases = segments, bases
        return replaced

    def remove(self, base_offset: int) -> None:
        i = bisect.bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            self._segments = self._segments[:i] + self._segments[i + 1 :]
            self._bases = self._bases[:i] + self._bases[i + 1 :]

    def clear(self) -> None:
        self._segments, self._bases = [], []

    def get(self, base_offset: int) -> LogSegment | None:
        i = bisect.bisect_left(self._bases, base_offset)
        return self._segments[i] if i < len(self._bases) and self._bases[i] == base_offset else None

    @property
    def first_segment(self) -> LogSegment | None:
        return self._segments[0] if self._segments else None

    @property
    def last_segment(self) -> LogSegment | None:
        return self._segments[-1] if self._segments else None

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        i = bisect.bisect_right(self._bases, offset)
        return self._segments[i - 1] if i else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        i = bisect.bisect_right(self._bases, offset)
        return self._segments[i] if i < len(self._segments) else None

    def segments_from(self, offset: int) -> list[LogSegment]:
        """Segments that may hold offsets >= ``offset`` (starting at its floor segment)."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        return self._segments[i:]

    def range(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """Segments overlapping [from_offset, to_offset)."""
        return overlapping(self._segments, from_offset, to_offset, self._bases)

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)


def overlapping(
    segments: Sequence[LogSegment], from_offset: int, to_offset: int, bases: Sequence[int] | None = None
) -> list[LogSegment]:
    """Of ``segments`` (ordered), those holding offsets in [from_offset, to_offset): from the
    floor segment of ``from_offset`` to the last one starting below ``to_offset``."""
    if bases is None:
        bases = [s.base_offset for s in segments]
    i = max(bisect.bisect_right(bases, from_offset) - 1, 0)
    j = bisect.bisect_left(bases, to_offset)
    return list(segments[i:j])
