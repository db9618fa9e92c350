"""Compression codecs: round trips, other implementations' output, bombs, garbage."""

from __future__ import annotations

import gzip
import random
import struct

import lz4.frame
import pytest
import snappy
import zstandard
from kafka import codec as kafka_codec

from protocol import compression
from protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress
from protocol.errors import CorruptRecordError, ErrorCode

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
_rng = random.Random(1234)
PAYLOADS = {
    "empty": b"",
    "one byte": b"x",
    "text": b"the quick brown fox jumps over the lazy dog " * 50,
    "random": _rng.randbytes(5000),
    # Several 32 KiB snappy blocks, 64 KiB lz4 blocks and 128 KiB zstd blocks.
    "mixed large": _rng.randbytes(70_000) + b"abcdefgh" * 40_000 + _rng.randbytes(100_000),
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("name", list(PAYLOADS))
def test_round_trip(codec: int, name: str) -> None:
    data = PAYLOADS[name]
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_accepts_any_buffer(codec: int) -> None:
    data = PAYLOADS["text"]
    compressed = compress(codec, bytearray(data))
    assert decompress(codec, memoryview(bytearray(compressed))) == data
    assert decompress(codec, bytearray(compressed)) == data


# ---------------------------------------------------------------- gzip

def test_gzip_reads_stdlib_output_and_concatenated_members() -> None:
    data = PAYLOADS["mixed large"]
    assert decompress(GZIP, gzip.compress(data)) == data
    assert decompress(GZIP, gzip.compress(b"first ") + gzip.compress(b"second")) == b"first second"


def test_gzip_output_is_standard() -> None:
    data = PAYLOADS["text"]
    assert gzip.decompress(compress(GZIP, data)) == data


# ---------------------------------------------------------------- snappy

def test_snappy_reads_raw_snappy() -> None:
    data = PAYLOADS["mixed large"]
    assert decompress(SNAPPY, snappy.compress(data)) == data


def test_snappy_reads_xerial_framing_from_kafka_python() -> None:
    data = PAYLOADS["mixed large"]
    framed = kafka_codec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=32 * 1024)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(SNAPPY, framed) == data


def test_snappy_reads_xerial_framing_with_little_endian_version_fields() -> None:
    data = PAYLOADS["text"]
    block = snappy.compress(data)
    framed = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert decompress(SNAPPY, framed) == data


def test_snappy_writes_xerial_framing_like_the_java_client() -> None:
    data = PAYLOADS["mixed large"]
    framed = compress(SNAPPY, data)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # Blocks of at most 32 KiB of input, each a raw snappy block with a big-endian length.
    pos, out = 16, []
    while pos < len(framed):
        (size,) = struct.unpack_from(">i", framed, pos)
        block = framed[pos + 4 : pos + 4 + size]
        out.append(snappy.decompress(block))
        assert len(out[-1]) <= 32 * 1024
        pos += 4 + size
    assert b"".join(out) == data
    assert kafka_codec.snappy_decode(framed) == data


def test_snappy_xerial_block_overrunning_the_data_is_corrupt() -> None:
    framed = compress(SNAPPY, PAYLOADS["text"])
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, framed[:-1])
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, framed[:18])


# ---------------------------------------------------------------- lz4

@pytest.mark.parametrize(
    "options",
    [
        {},
        {"block_linked": False},
        {"block_linked": True, "content_checksum": True},
        {"block_checksum": True, "store_size": False},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "store_size": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX256KB, "compression_level": 9},
    ],
)
def test_lz4_reads_frames_from_the_lz4_package(options: dict) -> None:
    data = PAYLOADS["mixed large"]
    assert decompress(LZ4, lz4.frame.compress(data, **options)) == data


def test_lz4_reads_concatenated_frames() -> None:
    assert decompress(LZ4, lz4.frame.compress(b"one ") + lz4.frame.compress(b"two")) == b"one two"


def test_lz4_writes_the_java_clients_frame_flags() -> None:
    data = PAYLOADS["mixed large"]
    frame = compress(LZ4, data)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    # FLG: version 1, independent blocks, no checksums, no size; BD: 64 KiB blocks.
    assert frame[4] == 0x60 and frame[5] == 0x40
    # The lz4 library checks the header checksum (KIP-57: the correct one).
    assert lz4.frame.decompress(frame) == data
    assert kafka_codec.lz4_decode(frame) == data


def test_lz4_stores_incompressible_blocks_uncompressed() -> None:
    data = random.Random(5).randbytes(100_000)
    frame = compress(LZ4, data)
    (first_block,) = struct.unpack_from("<I", frame, 7)
    assert first_block & 0x80000000 and first_block & 0x7FFFFFFF == 64 * 1024
    assert lz4.frame.decompress(frame) == data


def test_lz4_frame_header_checksum_is_xxh32() -> None:
    # The lz4 library writes the checksum for every descriptor it produces; ours must agree.
    for options in ({}, {"store_size": False}, {"block_checksum": True}, {"block_linked": False}):
        frame = lz4.frame.compress(b"abc", **options)
        descriptor_end = 6 + (8 if frame[4] & 0x08 else 0)
        expected = (compression.xxh32_short(frame[4:descriptor_end]) >> 8) & 0xFF
        assert frame[descriptor_end] == expected


# ---------------------------------------------------------------- zstd

def test_zstd_reads_frames_with_and_without_content_size() -> None:
    data = PAYLOADS["mixed large"]
    assert decompress(ZSTD, zstandard.ZstdCompressor().compress(data)) == data
    streaming = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    frame = streaming.compress(data) + streaming.flush()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(ZSTD, frame) == data


def test_zstd_reads_checksummed_and_concatenated_frames() -> None:
    compressor = zstandard.ZstdCompressor(write_checksum=True, level=10)
    frames = compressor.compress(b"left ") + compressor.compress(b"right")
    assert decompress(ZSTD, frames) == b"left right"


def test_zstd_output_is_standard() -> None:
    data = PAYLOADS["mixed large"]
    assert zstandard.ZstdDecompressor().decompress(compress(ZSTD, data)) == data


# ---------------------------------------------------------------- bombs

def _zstd_rle_bomb(blocks: int) -> bytes:
    """A zstd frame of 128 KiB RLE blocks, with no content size in its header."""
    header = struct.pack("<I", compression.ZSTD_MAGIC) + bytes((0x00, 0x58))  # window 8 MiB
    block = (128 * 1024) << 3 | 1 << 1  # RLE, not last
    last = block | 1
    body = b"".join(struct.pack("<I", block)[:3] + b"\x00" for _ in range(blocks - 1))
    return header + body + struct.pack("<I", last)[:3] + b"\x00"


def test_a_small_zstd_rle_frame_decompresses() -> None:
    # Validates the hand-made frame the bomb test below relies on.
    assert decompress(ZSTD, _zstd_rle_bomb(3)) == bytes(3 * 128 * 1024)


def test_zstd_bomb_is_refused_under_the_default_limit_without_inflating() -> None:
    bomb = _zstd_rle_bomb(600)  # 75 MiB from 2.4 KB
    assert len(bomb) < 3000
    with pytest.raises(CorruptRecordError, match="limit") as info:
        decompress(ZSTD, bomb)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_bombs_are_refused(codec: int) -> None:
    zeros = bytes(4 * 1024 * 1024)
    compressed = compress(codec, zeros)
    assert decompress(codec, compressed, max_size=len(zeros)) == zeros
    with pytest.raises(CorruptRecordError, match="limit"):
        decompress(codec, compressed, max_size=len(zeros) - 1)


@pytest.mark.parametrize(
    ("codec", "make"),
    [
        (LZ4, lambda data: lz4.frame.compress(data)),
        (LZ4, lambda data: lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX4MB, store_size=False)),
        (SNAPPY, lambda data: snappy.compress(data)),
        (GZIP, lambda data: gzip.compress(data)),
        (ZSTD, lambda data: zstandard.ZstdCompressor(write_content_size=False).compress(data)),
    ],
    ids=["lz4", "lz4-4mb-blocks", "raw-snappy", "gzip", "zstd-no-size"],
)
def test_bombs_from_other_encoders_are_refused(codec: int, make) -> None:
    with pytest.raises(CorruptRecordError, match="limit"):
        decompress(codec, make(bytes(2 * 1024 * 1024)), max_size=1024 * 1024)


# ---------------------------------------------------------------- garbage

@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_ids(codec: int) -> None:
    with pytest.raises(CorruptRecordError, match="unknown compression type"):
        decompress(codec, b"anything")
    with pytest.raises(ValueError):
        compress(codec, b"anything")


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_raises_corrupt_record_error_only(codec: int) -> None:
    rng = random.Random(codec)
    data = PAYLOADS["text"] + rng.randbytes(300)
    compressed = compress(codec, data)
    for _ in range(300):
        mutated = bytearray(compressed)
        choice = rng.random()
        if choice < 0.4:
            mutated[rng.randrange(len(mutated))] ^= 1 << rng.randrange(8)
        elif choice < 0.7:
            del mutated[rng.randrange(len(mutated)) :]
        else:
            mutated = bytearray(rng.randbytes(rng.randrange(64)))
        try:
            out = decompress(codec, mutated, max_size=1 << 20)
        except CorruptRecordError:
            continue
        # Some codecs carry no checksum: a mutation may decode to other bytes,
        # but never beyond the limit and never by raising something else.
        assert len(out) <= 1 << 20
