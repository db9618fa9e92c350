"""Runtime helpers the generated codecs call off their straight-line fast path.

Most of a generated codec is inline ``struct`` calls; only the rare or bulky
cases (multi-byte varints, records, skipping unknown tagged fields) call into
here. Decoders read from a ``memoryview`` at a position and return the new
position; encoders append to a ``bytearray`` and move it into ``chunks`` when
record data must stay a separate, uncopied chunk.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final, TypeVar
from uuid import UUID

from protocol.buffers import Buffer, Chunk, FileRange, RecordsData, RecordsPart, join_chunks, records_length
from protocol.errors import ErrorCode, ProtocolError

UUID_ZERO = UUID(int=0)
_new = object.__new__  # generated decoders fill slots directly
ZERO16 = bytes(16)

# Everything a garbled frame can make the generated decoders raise. The entry
# points turn these into ProtocolError; checking each case inline would slow
# the hot path for frames that are almost always well formed.
LOW_LEVEL_ERRORS = (
    IndexError,
    struct.error,
    UnicodeDecodeError,
    ValueError,
    TypeError,
    OverflowError,
    MemoryError,
    RecursionError,
    KeyError,
    AttributeError,
)

# Records smaller than this are copied into the frame: a separate chunk costs
# more (writelines bookkeeping, a syscall vector entry) than copying them.
INLINE_RECORDS_LIMIT = 1024

_INT32 = struct.Struct(">i")


class _Unset(enum.Enum):
    """Marks a constructor argument not given, for fields with mutable defaults.

    A one-member enum rather than a plain sentinel object: a type checker
    narrows ``value is UNSET`` to ``_Unset`` and the ``else`` branch to the
    field's own type, so the generated constructors type-check as written and
    the attributes keep their declared types.
    """

    UNSET = 0

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset.UNSET


def read_uvarint_tail(buf: memoryview, pos: int, first: int) -> tuple[int, int]:
    """Finish an unsigned varint whose first byte (already consumed) was ``first``.

    Kafka bounds an unsigned varint to 5 bytes; a longer one is garbage.
    """
    value = first & 0x7F
    shift = 7
    while True:
        if shift > 28:
            raise ProtocolError("unsigned varint longer than 5 bytes")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte & 0x80:
        return read_uvarint_tail(buf, pos + 1, byte)
    return byte, pos + 1


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def uvarint(value: int) -> bytes:
    """The unsigned varint encoding of ``0 <= value < 2**32``."""
    if value < 0x80:
        return _ONE_BYTE[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if value >> 32 or value < 0:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def skip_tagged_field(buf: memoryview, pos: int) -> int:
    """Skip one unknown tagged field (tag and size already positioned at ``pos``).

    Returns the position after it. Unknown tags come from newer peers and are
    ignored, as Kafka does.
    """
    _tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    end = pos + size
    if end > len(buf):
        raise ProtocolError("tagged field runs past the end of the frame")
    return end


def truncated(what: str) -> ProtocolError:
    return ProtocolError(f"{what} runs past the end of the frame")


def put_records(b: bytearray, chunks: list[Chunk], records: RecordsData, compact: bool) -> bytearray:
    """Write a non-null records field: its length, then the data as chunks.

    Returns the bytearray the caller continues to append to (a new one when the
    data went out as separate chunks).
    """
    # Exact-class tests first: they are the common cases and cheaper than
    # isinstance. A type checker does not narrow on ``__class__``, so each of
    # these branches rebinds the value once under the type its test proved.
    cls = records.__class__
    inline: Buffer = b""
    parts: Sequence[RecordsPart] | None
    if cls is memoryview:
        view: memoryview = records  # type: ignore[assignment]  # proved by the class test
        # Chunks are byte-format views, so that len() of any chunk is its size.
        if view.itemsize != 1:
            view = view.cast("B")
        size = view.nbytes
        inline = view
        parts = None if size < INLINE_RECORDS_LIMIT else (view,)
    elif cls is bytes or cls is bytearray:
        data: bytes | bytearray = records  # type: ignore[assignment]  # proved by the class test
        size = len(data)
        inline = data
        parts = None if size < INLINE_RECORDS_LIMIT else (data,)
    elif cls is FileRange:
        file_range: FileRange = records  # type: ignore[assignment]  # proved by the class test
        size = file_range.length
        parts = (file_range,)
    elif isinstance(records, (list, tuple)):
        parts = [p.cast("B") if isinstance(p, memoryview) and p.itemsize != 1 else p for p in records]
        size = records_length(parts)
    elif isinstance(records, (bytes, bytearray)):  # subclasses
        size = len(records)
        parts = (records,)
    elif isinstance(records, memoryview):
        records = records.cast("B")
        size = records.nbytes
        parts = (records,)
    else:
        raise TypeError(f"records must be bytes-like, FileRange or a list of them, not {type(records).__name__}")
    if compact:
        b += uvarint(size + 1)
    else:
        b += _INT32.pack(size)
    if parts is None:
        b += inline
        return b
    if b:
        chunks.append(b)
    chunks.extend(parts)
    return bytearray()


class UnsupportedVersionError(ProtocolError):
    """An API key or version this broker does not implement, or a field the
    chosen version cannot carry (Kafka's UnsupportedVersionException)."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("error_code", ErrorCode.UNSUPPORTED_VERSION)
        super().__init__(message, **kwargs)


Decoder = Callable[[memoryview, int], tuple[Any, int]]
Encoder = Callable[[Any, bytearray, list[Chunk]], bytearray]
M = TypeVar("M", bound="Message")


class Struct_:
    """Base of every generated struct class (slots only, no behaviour)."""

    __slots__ = ()


class Message(Struct_):
    """Base of every generated request, response and header class.

    ``encode``/``decode`` handle the body alone; ``protocol.api`` adds the
    header and the size prefix.
    """

    __slots__ = ()
    API_KEY: ClassVar[int | None]
    VALID_VERSIONS: ClassVar[range]
    FLEXIBLE_MIN_VERSION: ClassVar[int | None]
    _DECODERS: ClassVar[dict[int, Decoder]]
    _ENCODERS: ClassVar[dict[int, Encoder]]

    def encode(self, version: int) -> list[Chunk]:
        """This message's body at ``version`` as chunks (records stay uncopied)."""
        encoder = self._ENCODERS.get(version)
        if encoder is None:
            raise UnsupportedVersionError(f"{type(self).__name__} has no version {version}", api_key=self.API_KEY, api_version=version)
        chunks: list[Chunk] = []
        tail = run_encoder(encoder, self, bytearray(), chunks, self.API_KEY, version)
        if tail:
            chunks.append(tail)
        return chunks

    def to_bytes(self, version: int) -> bytes:
        """This message's body as one bytes object (copies record data)."""
        return join_chunks(self.encode(version))

    @classmethod
    def decode(cls: type[M], data: Buffer, version: int) -> M:
        """Decode a body that spans all of ``data``; raises ProtocolError."""
        decoder = cls._DECODERS.get(version)
        if decoder is None:
            raise UnsupportedVersionError(f"{cls.__name__} has no version {version}", api_key=cls.API_KEY, api_version=version)
        buf = data if isinstance(data, memoryview) else memoryview(data)
        if buf.itemsize != 1 or buf.ndim != 1:
            buf = buf.cast("B")
        message: M = decode_exact(decoder, buf, 0, cls.__name__, cls.API_KEY, version)
        return message


def decode_exact(decoder: Decoder, buf: memoryview, pos: int, what: str, api_key: int | None, version: int) -> Any:
    """Run a generated decoder that must consume ``buf`` to its end.

    Trailing bytes after a complete body are an error: a correct peer never
    sends them, and they mean the peer used a different schema than the
    version it announced, so the decoded values cannot be trusted.
    """
    try:
        obj, end = decoder(buf, pos)
    except ProtocolError as exc:
        exc.api_key, exc.api_version = api_key, version
        raise
    except LOW_LEVEL_ERRORS as exc:
        raise ProtocolError(f"malformed {what}: {type(exc).__name__}: {exc}", api_key=api_key, api_version=version) from None
    if end != len(buf):
        raise ProtocolError(f"{len(buf) - end} unexpected bytes after {what}", api_key=api_key, api_version=version)
    return obj


def run_encoder(encoder: Encoder, obj: Any, b: bytearray, chunks: list[Chunk], api_key: int | None, version: int) -> bytearray:
    """Run a generated encoder, reporting bad field values as ProtocolError."""
    try:
        return encoder(obj, b, chunks)
    except ProtocolError as exc:
        exc.api_key, exc.api_version = api_key, version
        raise
    except LOW_LEVEL_ERRORS as exc:
        raise ProtocolError(
            f"cannot encode {type(obj).__name__} v{version}: {type(exc).__name__}: {exc}",
            error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
            api_key=api_key,
            api_version=version,
        ) from None
