"""TimeIndex: the sparse ``.timeindex`` file mapping timestamps to offsets.

Each 12-byte entry is (timestamp int64, relative offset int32), big-endian.
Entries are written at the offset index's interval when the segment's maximum
timestamp has grown, plus one final entry when the segment rolls, so the last
entry holds the segment's largest timestamp (what time-based retention
judges). The offset of an entry is the last offset of the batch that carried
that timestamp, as in Kafka.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

from storage.abstract_index import AbstractIndex
from storage.errors import CorruptIndexError

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    __slots__ = ('_last_entry',)

    ENTRY_SIZE = 12

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int = -1, writable: bool = True) -> None:
        super().__init__(path, base_offset, max_index_size, writable)
        self._last_entry = self._read_last_entry()

    def _timestamp(self, slot: int) -> int:
        return _ENTRY.unpack_from(self._mmap, slot * 12)[0]  # type: ignore[arg-type,no-any-return]

    def _relative(self, slot: int) -> int:
        return _ENTRY.unpack_from(self._mmap, slot * 12)[1]  # type: ignore[arg-type,no-any-return]

    def entry(self, slot: int) -> TimestampOffset:
        with self.lock:
            if not 0 <= slot < self._entries:
                raise IndexError(f"slot {slot} out of range (entries={self._entries}) in {self.path}")
            timestamp, relative = _ENTRY.unpack_from(self._mmap, slot * 12)  # type: ignore[arg-type]
            return TimestampOffset(timestamp, self.base_offset + relative)

    def _read_last_entry(self) -> TimestampOffset:
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(self._entries - 1)

    @property
    def last_entry(self) -> TimestampOffset:
        return self._last_entry

    def is_full(self) -> bool:
        # One slot stays free for the entry written when the segment rolls.
        return self._entries >= self._max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is a new maximum."""
        if not skip_full_check and self.is_full():
            raise CorruptIndexError(f"time index {self.path} is full")
        if self._entries and offset < self._last_entry.offset:
            raise CorruptIndexError(
                f"attempt to append offset {offset} to time index {self.path} whose last offset is {self._last_entry.offset}"
            )
        if self._entries and timestamp < self._last_entry.timestamp:
            raise CorruptIndexError(
                f"attempt to append timestamp {timestamp} to time index {self.path} whose last timestamp is {self._last_entry.timestamp}"
            )
        if self._entries == 0 or timestamp > self._last_entry.timestamp:
            with self.lock:
                self._ensure_room()
                self._write_slot(self._entries * 12, _ENTRY.pack(timestamp, self.relative_offset(offset)))
                self._entries += 1
                self._last_entry = TimestampOffset(timestamp, offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (-1, baseOffset)."""
        with self.lock:
            slot = self._largest_lower_bound_slot(target_timestamp, self._timestamp)
            return TimestampOffset(NO_TIMESTAMP, self.base_offset) if slot < 0 else self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        # Offsets in the time index never decrease, so a binary search finds the cut.
        with self.lock:
            slot = self._smallest_upper_bound_slot(offset - self.base_offset, self._relative)
            self.truncate_to_entries(self._entries if slot < 0 else slot)

    def truncate_to_entries(self, entries: int) -> None:
        super().truncate_to_entries(entries)
        self._last_entry = self._read_last_entry()

    def sanity_check(self) -> None:
        self._check_length()
        if self._entries == 0:
            return
        if self._last_entry.offset < self.base_offset:
            raise CorruptIndexError(f"corrupt time index {self.path}: last offset below the base offset")
        if self._last_entry.timestamp < self.entry(0).timestamp:
            raise CorruptIndexError(f"corrupt time index {self.path}: last timestamp below the first")
