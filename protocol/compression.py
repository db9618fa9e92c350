"""Record-batch compression codecs, by Kafka's ids (attributes bits 0-2).

All four codecs go through ``cramjam`` (Rust-backed, MIT), except gzip
*decompression*, which uses the standard library's ``zlib``: its
``decompressobj(max_length=...)`` is the only API at hand that stops inflating
at a byte limit, and a gzip bomb must not be inflated to find out it is one.

Every decompression is bounded by ``max_size`` (default
:data:`MAX_DECOMPRESSED_SIZE`). For the formats whose output cannot be stopped
midway through cramjam (snappy, LZ4 frames, zstd frames) the framing is walked
first to compute an upper bound on the output (snappy's length preamble, LZ4's
block maximum per compressed block, zstd's block maximum per compressed block
and the exact size of raw/RLE blocks); anything that could exceed the limit is
refused before a byte is inflated. In practice the bound is tight: encoders
fill every block but the last.

What is written is what the Java client writes, so Java consumers read our
batches:

* gzip: one standard gzip member.
* snappy: xerial's block framing (``\\x82SNAPPY\\x00``, version 1, compatible
  version 1, then big-endian-length-prefixed raw snappy blocks of up to 32 KiB
  of input). Reading accepts that framing (whatever its version fields say:
  some producers write them little-endian) and bare raw snappy.
* lz4: the standard LZ4 frame (KIP-57: magic >= 1 uses a correct header
  checksum), independent 64 KiB blocks, no checksums, no content size: the
  Java client's exact flags, because Kafka's Java reader refuses linked blocks.
* zstd: standard frames; frames without a content size (librdkafka streams
  its output) decompress too.

Every failure, including an unknown codec id (5-7), raises
``CorruptRecordError``. Kafka's ``CompressionType.forId`` throws an
IllegalArgumentException there, which its produce path reports as
UNKNOWN_SERVER_ERROR; the batch is undecodable client input, so we answer
CORRUPT_MESSAGE instead of blaming the server.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import cramjam

from protocol.buffers import Buffer
from protocol.errors import CorruptRecordError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

#: Default ceiling on one batch's decompressed records. Kafka's own limits
#: (message.max.bytes, 1 MiB by default) apply to the compressed batch; this
#: caps what a hostile ratio can make of it.
MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

_UINT32_BE = struct.Struct(">I")
_INT32_BE = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")


def codec_name(codec: int) -> str:
    return CODEC_NAMES.get(codec, f"unknown({codec})")


def _unknown_codec(codec: int) -> CorruptRecordError:
    return CorruptRecordError(f"unknown compression type id {codec}")


def _too_large(codec: int, size: int, max_size: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{codec_name(codec)} data would decompress to {size} bytes or more, over the {max_size}-byte limit"
    )


# ---------------------------------------------------------------- gzip

def _gzip_compress(data: Buffer) -> bytes:
    # Level 6: what java.util.zip's default compression level means.
    return bytes(cramjam.gzip.compress(data, level=6))


def _gzip_decompress(data: Buffer, max_size: int) -> bytes:
    """Inflate one or more concatenated gzip members, at most ``max_size`` bytes."""
    out = bytearray()
    pending = memoryview(data)
    if not pending:
        raise CorruptRecordError("empty gzip data")
    try:
        while pending:
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out += inflater.decompress(pending, max_size + 1 - len(out))
            if len(out) > max_size:
                raise _too_large(GZIP, len(out), max_size)
            if not inflater.eof:
                raise CorruptRecordError("truncated gzip data")
            # Java's GZIPInputStream reads concatenated members; so do we.
            pending = memoryview(inflater.unused_data)
    except zlib.error as exc:
        raise CorruptRecordError(f"invalid gzip data: {exc}") from None
    return bytes(out)


# ---------------------------------------------------------------- snappy

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16
#: SnappyOutputStream's default block size (uncompressed bytes per block).
XERIAL_BLOCK_SIZE = 32 * 1024
_XERIAL_HEADER = XERIAL_MAGIC + _INT32_BE.pack(1) + _INT32_BE.pack(1)


def _snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        parts.append(_INT32_BE.pack(len(block)))
        parts.append(bytes(block))
    return b"".join(parts)


def _raw_snappy_length(block: Buffer) -> int:
    """The uncompressed length a raw snappy block declares in its preamble."""
    try:
        return int(cramjam.snappy.decompress_raw_len(block))
    except Exception as exc:  # cramjam raises its own error types
        raise CorruptRecordError(f"invalid snappy block: {exc}") from None


def _raw_snappy_decompress(block: Buffer) -> bytes:
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:
        raise CorruptRecordError(f"invalid snappy block: {exc}") from None


def _snappy_decompress(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data)
    if view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        declared = _raw_snappy_length(view)
        if declared > max_size:
            raise _too_large(SNAPPY, declared, max_size)
        return _raw_snappy_decompress(view)
    if len(view) < XERIAL_HEADER_SIZE:
        raise CorruptRecordError("truncated xerial snappy header")
    # The version fields are not checked: there has only ever been one block
    # format, and some producers write these two ints little-endian.
    blocks = []
    total = 0
    pos = XERIAL_HEADER_SIZE
    while pos < len(view):
        if len(view) - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        (size,) = _INT32_BE.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise CorruptRecordError(f"xerial snappy block of {size} bytes overruns the data")
        block = view[pos : pos + size]
        pos += size
        total += _raw_snappy_length(block)
        if total > max_size:
            raise _too_large(SNAPPY, total, max_size)
        blocks.append(block)
    return b"".join([_raw_snappy_decompress(block) for block in blocks])


# ---------------------------------------------------------------- lz4 frames

LZ4_MAGIC = 0x184D2204
_LZ4_MAGIC_BYTES = _UINT32_LE.pack(LZ4_MAGIC)
_SKIPPABLE_MIN = 0x184D2A50
_SKIPPABLE_MAX = 0x184D2A5F
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
#: FLG: version 01, independent blocks, no block checksum, no content size,
#: no content checksum. BD: 64 KiB maximum block size. As the Java client.
_LZ4_FLG = 0x60
_LZ4_BD = 0x40
_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_UNCOMPRESSED_BIT = 0x80000000

_PRIME32_1 = 0x9E3779B1
_PRIME32_2 = 0x85EBCA77
_PRIME32_3 = 0xC2B2AE3D
_PRIME32_4 = 0x27D4EB2F
_PRIME32_5 = 0x165667B1
_MASK32 = 0xFFFFFFFF


def _rotl32(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK32


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 of fewer than 16 bytes: all an LZ4 frame descriptor ever needs."""
    if len(data) >= 16:
        raise ValueError("xxh32_short handles inputs under 16 bytes only")
    acc = (seed + _PRIME32_5 + len(data)) & _MASK32
    pos = 0
    while pos + 4 <= len(data):
        (word,) = _UINT32_LE.unpack_from(data, pos)
        acc = (acc + word * _PRIME32_3) & _MASK32
        acc = (_rotl32(acc, 17) * _PRIME32_4) & _MASK32
        pos += 4
    for byte in data[pos:]:
        acc = (acc + byte * _PRIME32_5) & _MASK32
        acc = (_rotl32(acc, 11) * _PRIME32_1) & _MASK32
    acc ^= acc >> 15
    acc = (acc * _PRIME32_2) & _MASK32
    acc ^= acc >> 13
    acc = (acc * _PRIME32_3) & _MASK32
    acc ^= acc >> 16
    return acc


def _lz4_frame_header() -> bytes:
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    header_checksum = (xxh32_short(descriptor) >> 8) & 0xFF
    return _LZ4_MAGIC_BYTES + descriptor + bytes((header_checksum,))


_LZ4_FRAME_HEADER = _lz4_frame_header()
_LZ4_END_MARK = b"\x00\x00\x00\x00"


def _lz4_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_LZ4_FRAME_HEADER]
    for start in range(0, len(view), _LZ4_BLOCK_SIZE):
        chunk = view[start : start + _LZ4_BLOCK_SIZE]
        block = cramjam.lz4.compress_block(chunk, store_size=False)
        if len(block) < len(chunk):
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(bytes(block))
        else:  # incompressible: the frame format stores such blocks as they are
            parts.append(_UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BIT))
            parts.append(bytes(chunk))
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _lz4_frame_bound(view: memoryview, pos: int) -> tuple[int, int]:
    """(upper bound on the output, end position) of the LZ4 frame at ``pos``."""
    if len(view) - pos < 7:
        raise CorruptRecordError("truncated lz4 frame header")
    flg, bd = view[pos + 4], view[pos + 5]
    if flg >> 6 != 1:
        raise CorruptRecordError(f"unsupported lz4 frame version {flg >> 6}")
    block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x07)
    if block_max is None:
        raise CorruptRecordError(f"invalid lz4 block maximum size id in BD byte {bd:#x}")
    block_checksum = bool(flg & 0x10)
    content_checksum = bool(flg & 0x04)
    pos += 6
    content_size = None
    if flg & 0x08:
        if len(view) - pos < 8:
            raise CorruptRecordError("truncated lz4 content size")
        (content_size,) = struct.unpack_from("<Q", view, pos)
        pos += 8
    if flg & 0x01:
        pos += 4  # dictionary id
    pos += 1  # header checksum (cramjam verifies it)
    bound = 0
    while True:
        if len(view) - pos < 4:
            raise CorruptRecordError("truncated lz4 block header")
        (word,) = _UINT32_LE.unpack_from(view, pos)
        pos += 4
        if word == 0:
            break
        size = word & ~_LZ4_UNCOMPRESSED_BIT
        if size > block_max:
            raise CorruptRecordError(f"lz4 block of {size} bytes exceeds the frame's {block_max}")
        bound += size if word & _LZ4_UNCOMPRESSED_BIT else block_max
        pos += size + (4 if block_checksum else 0)
        if pos > len(view):
            raise CorruptRecordError("truncated lz4 block")
    pos += 4 if content_checksum else 0
    if pos > len(view):
        raise CorruptRecordError("truncated lz4 content checksum")
    # The declared content size only ever rejects: a hostile frame could understate it.
    if content_size is not None and content_size > bound:
        raise CorruptRecordError(f"lz4 frame declares {content_size} bytes, more than its blocks can hold")
    return bound, pos


def _walk_frames(
    codec: int, view: memoryview, magic: int, frame_bound: Callable[[memoryview, int], tuple[int, int]], max_size: int
) -> None:
    """Check every (possibly skippable) frame in ``view``; refuse a possible bomb."""
    if not view:
        raise CorruptRecordError(f"empty {codec_name(codec)} data")
    total = 0
    pos = 0
    while pos < len(view):
        if len(view) - pos < 8:
            raise CorruptRecordError(f"truncated {codec_name(codec)} frame")
        (word,) = _UINT32_LE.unpack_from(view, pos)
        if _SKIPPABLE_MIN <= word <= _SKIPPABLE_MAX:
            (size,) = _UINT32_LE.unpack_from(view, pos + 4)
            pos += 8 + size
            continue
        if word != magic:
            raise CorruptRecordError(f"bad {codec_name(codec)} frame magic {word:#010x}")
        bound, pos = frame_bound(view, pos)
        total += bound
        if total > max_size:
            raise _too_large(codec, total, max_size)
    if pos > len(view):
        raise CorruptRecordError(f"truncated {codec_name(codec)} skippable frame")


def _checked_output(codec: int, out: cramjam.Buffer, max_size: int) -> bytes:
    if len(out) > max_size:  # the bound should already have refused this
        raise _too_large(codec, len(out), max_size)
    return bytes(out)


def _lz4_decompress(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data)
    _walk_frames(LZ4, view, LZ4_MAGIC, _lz4_frame_bound, max_size)
    try:
        out = cramjam.lz4.decompress(view)
    except Exception as exc:
        raise CorruptRecordError(f"invalid lz4 data: {exc}") from None
    return _checked_output(LZ4, out, max_size)


# ---------------------------------------------------------------- zstd frames

ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)
_ZSTD_FCS_SIZES = (0, 2, 4, 8)


def _zstd_compress(data: Buffer) -> bytes:
    # Level 3: zstd's own default, which the Java client also uses.
    return bytes(cramjam.zstd.compress(data, level=3))


def _zstd_frame_header(view: memoryview, pos: int) -> tuple[int | None, bool, int]:
    """(content size or None, has checksum, first block position) of the frame at ``pos``."""
    if len(view) - pos < 6:
        raise CorruptRecordError("truncated zstd frame header")
    descriptor = view[pos + 4]
    if descriptor & 0x08:
        raise CorruptRecordError("zstd frame header has its reserved bit set")
    single_segment = bool(descriptor & 0x20)
    pos += 5 if single_segment else 6  # the window descriptor is absent in single-segment frames
    pos += _ZSTD_DICT_ID_SIZES[descriptor & 0x03]
    fcs_flag = descriptor >> 6
    fcs_size = 1 if fcs_flag == 0 and single_segment else _ZSTD_FCS_SIZES[fcs_flag]
    content_size = None
    if fcs_size:
        if len(view) - pos < fcs_size:
            raise CorruptRecordError("truncated zstd frame content size")
        content_size = int.from_bytes(view[pos : pos + fcs_size], "little")
        if fcs_size == 2:
            content_size += 256
        pos += fcs_size
    return content_size, bool(descriptor & 0x04), pos


def _zstd_frame_bound(view: memoryview, pos: int) -> tuple[int, int]:
    """(upper bound on the output, end position) of the zstd frame at ``pos``.

    The bound relies only on what no decoder can exceed (128 KiB per
    compressed block, the stated size of raw and RLE blocks), never on the
    frame's declared content size, which a hostile frame could understate.
    """
    content_size, has_checksum, pos = _zstd_frame_header(view, pos)
    bound = 0
    while True:
        if len(view) - pos < 3:
            raise CorruptRecordError("truncated zstd block header")
        header = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
        pos += 3
        block_type = (header >> 1) & 0x03
        size = header >> 3
        if size > _ZSTD_BLOCK_MAX:
            raise CorruptRecordError(f"zstd block of {size} bytes exceeds 128 KiB")
        if block_type == 0:  # raw
            bound += size
            pos += size
        elif block_type == 1:  # RLE: one byte, repeated ``size`` times
            bound += size
            pos += 1
        elif block_type == 2:
            bound += _ZSTD_BLOCK_MAX
            pos += size
        else:
            raise CorruptRecordError("reserved zstd block type")
        if pos > len(view):
            raise CorruptRecordError("truncated zstd block")
        if header & 0x01:
            break
    pos += 4 if has_checksum else 0
    if pos > len(view):
        raise CorruptRecordError("truncated zstd frame checksum")
    if content_size is not None and content_size > bound:
        raise CorruptRecordError(f"zstd frame declares {content_size} bytes, more than its blocks can hold")
    return bound, pos


def _zstd_decompress(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data)
    _walk_frames(ZSTD, view, ZSTD_MAGIC, _zstd_frame_bound, max_size)
    try:
        out = cramjam.zstd.decompress(view)
    except Exception as exc:
        raise CorruptRecordError(f"invalid zstd data: {exc}") from None
    return _checked_output(ZSTD, out, max_size)


# ---------------------------------------------------------------- dispatch

_COMPRESSORS: dict[int, Callable[[Buffer], bytes]] = {
    GZIP: _gzip_compress,
    SNAPPY: _snappy_compress,
    LZ4: _lz4_compress,
    ZSTD: _zstd_compress,
}

_DECOMPRESSORS: dict[int, Callable[[Buffer, int], bytes]] = {
    GZIP: _gzip_decompress,
    SNAPPY: _snappy_decompress,
    LZ4: _lz4_decompress,
    ZSTD: _zstd_decompress,
}


def compress(codec: int, data: Buffer) -> bytes:
    """Compress a batch's encoded records the way the Java client does."""
    if codec == NONE:
        return bytes(data)
    compressor = _COMPRESSORS.get(codec)
    if compressor is None:  # a caller's mistake, not bad input
        raise ValueError(f"unknown compression type id {codec}")
    return compressor(data)


def decompress(codec: int, data: Buffer, max_size: int = MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress a batch's records; CorruptRecordError on anything wrong or too big."""
    if codec == NONE:
        return bytes(data)
    decompressor = _DECOMPRESSORS.get(codec)
    if decompressor is None:
        raise _unknown_codec(codec)
    return decompressor(data, max_size)
