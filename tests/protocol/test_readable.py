"""protocol.readable: the one bounds-checked reader of the embedded formats."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from protocol.readable import Readable


class _Malformed(Exception):
    pass


def _reader(data: bytes, flexible: bool = False) -> Readable:
    return Readable(data, _Malformed, "test data", flexible)


def test_fixed_width_fields_are_big_endian_and_signed() -> None:
    r = _reader(b"\xff\xfe" + b"\x00\x00\x01\x00" + b"\x80" + bytes(7))
    assert (r.int16(), r.int32(), r.int64()) == (-2, 256, -(1 << 63))
    assert r.pos == 14


def test_non_flexible_lengths() -> None:
    r = _reader(b"\x00\x02hi" + b"\xff\xff" + b"\x00\x00\x00\x03abc" + b"\x00\x00\x00\x02")
    assert r.string() == "hi"
    assert r.nullable_string() is None
    assert r.bytes_() == b"abc"
    assert r.array_length() == 2


def test_flexible_lengths_are_uvarints_plus_one_and_tagged_fields_are_skipped() -> None:
    # "hi" (length 2 + 1), a null string (0), two tagged fields (tag, size, data), then an int16.
    r = _reader(b"\x03hi" + b"\x00" + b"\x02" + b"\x00\x01x" + b"\x05\x02yz" + b"\x00\x07", flexible=True)
    assert r.string() == "hi"
    assert r.nullable_string() is None
    r.skip_tagged_fields()
    assert r.int16() == 7


def test_uvarint_over_several_bytes() -> None:
    assert _reader(b"\xac\x02").uvarint() == 300


@pytest.mark.parametrize(("data", "read", "message"), [
    (b"\x00", Readable.int16, "test data is truncated"),
    (b"\x00\x05abc", Readable.string, "test data is truncated"),
    (b"\xff\xff", Readable.string, "test data: null in a non-nullable string"),
    (b"\x00\x02\xff\xfe", Readable.string, "test data: string is not UTF-8"),
    (b"\xff\xff\xff\xff", Readable.bytes_, "test data: null in a non-nullable bytes field"),
    (b"\x7f\xff\xff\xff", Readable.array_length, "test data: invalid array length 2147483647"),
    (b"\xff" * 6, Readable.uvarint, "test data: varint too long"),
])
def test_malformed_data_raises_the_callers_error(data: bytes, read: Callable[[Readable], object], message: str) -> None:
    with pytest.raises(_Malformed, match=message):
        read(_reader(data))
