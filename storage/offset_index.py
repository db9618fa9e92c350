"""OffsetIndex: the sparse ``.index`` file mapping offsets to positions in the ``.log``.

Each 8-byte entry is (relative offset int32, position int32), big-endian. An
entry is written for a batch once ``index.interval.bytes`` have been appended
since the previous entry; its offset is the batch's LAST offset and its
position the batch's start, as in Kafka. So the batch containing offset ``o``
starts at or after ``lookup(o).position``.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

from storage.abstract_index import AbstractIndex
from storage.errors import CorruptIndexError

_ENTRY = struct.Struct(">ii")


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    __slots__ = ('_last_offset',)

    ENTRY_SIZE = 8

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int = -1, writable: bool = True) -> None:
        super().__init__(path, base_offset, max_index_size, writable)
        self._last_offset = self._read_last_offset()

    def _relative(self, slot: int) -> int:
        return _ENTRY.unpack_from(self._mmap, slot * 8)[0]  # type: ignore[arg-type,no-any-return]

    def _position(self, slot: int) -> int:
        return _ENTRY.unpack_from(self._mmap, slot * 8)[1]  # type: ignore[arg-type,no-any-return]

    def entry(self, slot: int) -> OffsetPosition:
        with self.lock:
            if not 0 <= slot < self._entries:
                raise IndexError(f"slot {slot} out of range (entries={self._entries}) in {self.path}")
            relative, position = _ENTRY.unpack_from(self._mmap, slot * 8)  # type: ignore[arg-type]
            return OffsetPosition(self.base_offset + relative, position)

    def _read_last_offset(self) -> int:
        return self.base_offset if self._entries == 0 else self.entry(self._entries - 1).offset

    @property
    def last_offset(self) -> int:
        return self._last_offset

    def append(self, offset: int, position: int) -> None:
        if self._entries > 0 and offset <= self._last_offset:
            raise CorruptIndexError(
                f"attempt to append offset {offset} to index {self.path} whose last offset is {self._last_offset}"
            )
        with self.lock:
            self._ensure_room()
            self._write_slot(self._entries * 8, _ENTRY.pack(self.relative_offset(offset), position))
            self._entries += 1
            self._last_offset = offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (baseOffset, 0)."""
        with self.lock:
            slot = self._largest_lower_bound_slot(target_offset - self.base_offset, self._relative)
            return OffsetPosition(self.base_offset, 0) if slot < 0 else self.entry(slot)

    def lookup_by_position(self, position: int) -> OffsetPosition:
        """The entry with the largest position <= ``position``, or (baseOffset, 0).

        Positions grow with offsets, so the same binary search applies; reads use
        it to find a batch boundary close to their byte limit.
        """
        with self.lock:
            slot = self._largest_lower_bound_slot(position, self._position)
            return OffsetPosition(self.base_offset, 0) if slot < 0 else self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        with self.lock:
            slot = self._largest_lower_bound_slot(offset - self.base_offset, self._relative)
            if slot < 0:
                keep = 0
            elif self.base_offset + self._relative(slot) == offset:
                keep = slot
            else:
                keep = slot + 1
            self.truncate_to_entries(keep)

    def truncate_to_entries(self, entries: int) -> None:
        super().truncate_to_entries(entries)
        self._last_offset = self._read_last_offset()

    def sanity_check(self, log_size: int | None = None) -> None:
        """Kafka's checks (whole entries, last offset past the base) plus position bound."""
        self._check_length()
        if self._entries and self._last_offset <= self.base_offset:
            raise CorruptIndexError(
                f"corrupt index {self.path}: last offset {self._last_offset} <= base offset {self.base_offset}"
            )
        if self._entries and log_size is not None and self.entry(self._entries - 1).position >= log_size:
            raise CorruptIndexError(f"corrupt index {self.path}: points past the end of the log ({log_size} bytes)")
