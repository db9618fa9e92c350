"""Sans-IO framing: a byte stream in, size-prefixed Kafka frames out.

Every Kafka request and response is an int32 size followed by that many bytes.
``FrameDecoder.feed`` takes whatever the transport delivered and returns the
frames completed by it, without their size prefix.

Each frame is a memoryview over its own bytearray: writable, so the produce
path can patch base offsets in place, and never reused, so slices of it
(records fields) stay valid for as long as anyone holds them.
"""

from __future__ import annotations

from protocol.errors import ProtocolError

_SIZE_BYTES = 4


class FrameDecoder:
    def __init__(self, max_frame_size: int) -> None:
        self.max_frame_size = max_frame_size
        self._size_prefix = bytearray()
        self._frame: bytearray | None = None
        self._filled = 0

    @property
    def buffered(self) -> int:
        """Bytes received that belong to a frame not yet complete."""
        return len(self._size_prefix) + self._filled

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        frames: list[memoryview] = []
        view = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else memoryview(data)
        pos, end = 0, len(view)
        while pos < end:
            if self._frame is not None:
                pos = self._fill(view, pos, end, frames)
                continue
            if self._size_prefix or end - pos < _SIZE_BYTES:
                take = min(_SIZE_BYTES - len(self._size_prefix), end - pos)
                self._size_prefix += view[pos : pos + take]
                pos += take
                if len(self._size_prefix) < _SIZE_BYTES:
                    break
                size = int.from_bytes(self._size_prefix, "big", signed=True)
                self._size_prefix.clear()
            else:
                size = int.from_bytes(view[pos : pos + _SIZE_BYTES], "big", signed=True)
                pos += _SIZE_BYTES
            self._check_size(size)
            if end - pos >= size:  # the common case: the whole frame is here
                frames.append(memoryview(bytearray(view[pos : pos + size])))
                pos += size
            else:
                self._frame = bytearray(size)
                self._filled = 0
        return frames

    def _fill(self, view: memoryview, pos: int, end: int, frames: list[memoryview]) -> int:
        frame = self._frame
        assert frame is not None
        take = min(len(frame) - self._filled, end - pos)
        frame[self._filled : self._filled + take] = view[pos : pos + take]
        self._filled += take
        if self._filled == len(frame):
            frames.append(memoryview(frame))
            self._frame, self._filled = None, 0
        return pos + take

    def _check_size(self, size: int) -> None:
        if size < 0:
            raise ProtocolError(f"invalid frame size {size}")
        if size > self.max_frame_size:
            raise ProtocolError(
                f"frame of {size} bytes is larger than the maximum of {self.max_frame_size} "
                "(socket.request.max.bytes)"
            )
