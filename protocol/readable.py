"""Bounds-checked reads of Kafka's primitive types from one buffer (Kafka's ``Readable``).

For the formats that travel inside other data rather than as protocol
messages (the consumer protocol's subscriptions and assignments, the keys and
values of ``__consumer_offsets`` records): big-endian integers, strings and
bytes with an int16/int32 length, or, in a flexible version, an unsigned
varint length plus one and tagged fields. Whoever reads names the error a
malformed buffer raises, so each format keeps its own.
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Readable:
    __slots__ = ("data", "error", "flexible", "pos", "what")

    def __init__(self, data: bytes, error: type[Exception], what: str, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        #: Raised with a message naming ``what`` when the data is malformed.
        self.error = error
        self.what = what
        self.flexible = flexible

    def take(self, n: int) -> bytes:
        start = self.pos
        if n < 0 or start + n > len(self.data):
            raise self.error(f"{self.what} is truncated")
        self.pos = start + n
        return self.data[start:start + n]

    def int16(self) -> int:
        value: int = _I16.unpack(self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self.take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _I64.unpack(self.take(8))[0]
        return value

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 35:
                raise self.error(f"{self.what}: varint too long")

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        n = self._length(False)
        if n < 0:
            return None
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"{self.what}: string is not UTF-8: {exc}") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise self.error(f"{self.what}: null in a non-nullable string")
        return s

    def bytes_(self) -> bytes:
        n = self._length(True)
        if n < 0:
            raise self.error(f"{self.what}: null in a non-nullable bytes field")
        return self.take(n)

    def array_length(self) -> int:
        n = self._length(True)
        if n < 0 or n > len(self.data):
            raise self.error(f"{self.what}: invalid array length {n}")
        return n

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())
