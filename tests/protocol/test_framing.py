"""FrameDecoder: any split of the byte stream yields the same frames; bad sizes are typed errors."""

import random
import struct

import pytest

from protocol.errors import ProtocolError
from protocol.framing import FrameDecoder


def _stream(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def test_every_split_gives_the_same_frames() -> None:
    rng = random.Random(7)
    payloads = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300))) for _ in range(50)]
    data = _stream(payloads)
    for _ in range(30):
        decoder, got, pos = FrameDecoder(1000), [], 0
        while pos < len(data):
            step = rng.randrange(1, 40)
            got += [bytes(f) for f in decoder.feed(data[pos : pos + step])]
            pos += step
        assert got == payloads
        assert decoder.buffered == 0


def test_frames_are_writable_and_independent() -> None:
    decoder = FrameDecoder(100)
    first, second = decoder.feed(_stream([b"abc", b"def"]))
    first[0] = ord("x")  # the produce path patches offsets in place
    assert bytes(first) == b"xbc" and bytes(second) == b"def"
    later = decoder.feed(_stream([b"ghi"]))
    assert bytes(first) == b"xbc" and bytes(later[0]) == b"ghi"


@pytest.mark.parametrize("size", [-1, -(2**31), 101])
def test_negative_or_oversized_frames_are_refused(size: int) -> None:
    with pytest.raises(ProtocolError):
        FrameDecoder(100).feed(struct.pack(">i", size) + b"x")


def test_partial_frame_waits_for_the_rest() -> None:
    decoder = FrameDecoder(100)
    assert decoder.feed(struct.pack(">i", 10) + b"12345") == []
    assert decoder.buffered == 5
    assert [bytes(f) for f in decoder.feed(b"67890")] == [b"1234567890"]


def test_buffered_reads_give_the_same_frames_and_fill_large_frames_in_place() -> None:
    """recv_buffer/received (asyncio's BufferedProtocol): any read sizes, same frames;
    a large frame's bytes land in the frame itself, not in the scratch buffer."""
    from protocol.framing import DIRECT_FILL_MIN

    rng = random.Random(11)
    sizes = [0, 5, 300, DIRECT_FILL_MIN * 3 + 17, 40, DIRECT_FILL_MIN + 1, 2]
    payloads = [rng.randbytes(n) for n in sizes]
    data = _stream(payloads)
    for _ in range(20):
        scratch = bytearray(4096)
        decoder, got, pos, direct_reads = FrameDecoder(1 << 20, scratch), [], 0, 0
        while pos < len(data):
            target = decoder.recv_buffer()
            n = min(len(target), rng.randrange(1, 9000), len(data) - pos)
            target[:n] = data[pos : pos + n]
            direct_reads += target.obj is not scratch
            pos += n
            got += [bytes(f) for f in decoder.received(n)]
        assert got == payloads
        assert decoder.buffered == 0
        assert direct_reads > 0


def test_after_a_large_frame_only_a_header_sized_read_goes_through_scratch() -> None:
    """A client sending 1 MiB requests: all but a few KiB of each lands in its own frame."""
    from protocol.framing import AFTER_LARGE_READ, DIRECT_FILL_MIN

    payloads = [bytes([i]) * (DIRECT_FILL_MIN * 4) for i in range(3)]
    data, pos = _stream(payloads), 0
    decoder, got, through_scratch = FrameDecoder(1 << 20, bytearray(1 << 16)), [], 0
    while pos < len(data):
        target = decoder.recv_buffer()
        n = min(len(target), len(data) - pos)
        target[:n] = data[pos : pos + n]
        if len(target.obj) == 1 << 16:  # the scratch buffer, not a frame
            through_scratch += n
        pos += n
        got += [bytes(f) for f in decoder.received(n)]
    assert got == payloads
    assert through_scratch <= (1 << 16) + 2 * AFTER_LARGE_READ
