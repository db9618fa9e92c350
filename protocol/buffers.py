"""Buffers the codecs hand to the transport without copying record data.

A FetchResponse carries up to megabytes of record batches that already sit in
segment files; the codecs never parse or copy them. Encoders accept a
``RecordsData`` value for every ``records`` field and emit it as separate
chunks, so the transport can ``writelines`` in-memory buffers and ``sendfile``
a ``FileRange``.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, TypeAlias


class HasFileno(Protocol):
    def fileno(self) -> int: ...


@dataclasses.dataclass(frozen=True, slots=True)
class FileRange:
    """``length`` bytes of ``file`` starting at byte ``offset``.

    ``file`` is anything with ``fileno()`` (an open segment file); the codecs
    only use ``length``. The transport reads or sendfiles the bytes when the
    frame is written, so the file must stay open until then.
    """

    file: HasFileno
    offset: int
    length: int

    def __post_init__(self) -> None:
        if self.offset < 0 or self.length < 0:
            raise ValueError(f"FileRange offset and length must be >= 0, got {self.offset}, {self.length}")

    def __len__(self) -> int:
        return self.length


# A contiguous in-memory buffer.
Buffer: TypeAlias = bytes | bytearray | memoryview

# What a ``records`` field accepts when encoding: one buffer, one file range,
# or a sequence of them concatenated on the wire. Decoding always yields a
# memoryview slice of the received frame (or None).
RecordsPart: TypeAlias = Buffer | FileRange
RecordsData: TypeAlias = RecordsPart | list[RecordsPart] | tuple[RecordsPart, ...]

# One element of an encoded frame, as returned by the encode entry points.
Chunk: TypeAlias = bytes | bytearray | memoryview | FileRange


def records_length(records: RecordsData) -> int:
    """The number of bytes ``records`` occupies on the wire."""
    if isinstance(records, (list, tuple)):
        return sum(_part_length(part) for part in records)
    return _part_length(records)


def _part_length(part: RecordsPart) -> int:
    if isinstance(part, FileRange):
        return part.length
    if isinstance(part, memoryview):
        return part.nbytes
    if isinstance(part, (bytes, bytearray)):
        return len(part)
    raise TypeError(f"records must be bytes, bytearray, memoryview or FileRange, not {type(part).__name__}")


def frame_length(chunks: list[Chunk]) -> int:
    """Total bytes of an encoded frame (including its size prefix)."""
    return sum(c.length if isinstance(c, FileRange) else (c.nbytes if isinstance(c, memoryview) else len(c)) for c in chunks)


def join_chunks(chunks: list[Chunk]) -> bytes:
    """Concatenate in-memory chunks (tests and small control paths; copies)."""
    out = bytearray()
    for chunk in chunks:
        if isinstance(chunk, FileRange):
            raise TypeError("cannot join a FileRange without reading the file")
        out += chunk
    return bytes(out)
