"""Sans-IO framing: a byte stream in, size-prefixed Kafka frames out.

Every Kafka request and response is an int32 size followed by that many bytes.
``FrameDecoder.feed`` takes whatever the transport delivered and returns the
frames completed by it, without their size prefix.

Each frame is a memoryview over its own bytearray: writable, so the produce
path can patch base offsets in place, and never reused, so slices of it
(records fields) stay valid for as long as anyone holds them.

A transport that lets the protocol choose where received bytes go (asyncio's
``BufferedProtocol``) uses ``recv_buffer`` / ``received`` instead of ``feed``:
while a large frame is being filled the socket reads straight into that
frame's bytearray, so a 1 MiB produce request is never copied in user space;
otherwise it reads into a scratch buffer that may be shared by every decoder
of one event loop (nothing is left in it between calls).
"""

from __future__ import annotations

from protocol.errors import ProtocolError

_SIZE_BYTES = 4
#: Frames smaller than this are filled through the scratch buffer (one read may
#: then bring several); larger ones are read into their own buffer to the end.
DIRECT_FILL_MIN = 64 * 1024
#: After a large frame, the next read takes only this much through the scratch
#: buffer: a client sending large requests likely sends another, whose bytes
#: past its header should land in it directly rather than be copied.
AFTER_LARGE_READ = 4096
#: Size of the scratch buffer small frames are read through.
SCRATCH_SIZE = 256 * 1024


class FrameSizeError(ProtocolError):
    """A size prefix the decoder will not act on: negative, or over its maximum."""


class FrameDecoder:
    def __init__(self, max_frame_size: int, scratch: bytearray | None = None,
                 limit_name: str = "socket.request.max.bytes") -> None:
        self.max_frame_size = max_frame_size
        #: The setting ``max_frame_size`` comes from, named when a frame exceeds it.
        self.limit_name = limit_name
        self._size_prefix = bytearray()
        self._frame: bytearray | None = None
        self._filled = 0
        self._scratch = scratch
        self._direct = False  # the last recv_buffer was the frame itself
        self._last_large = False

    def recv_buffer(self) -> memoryview:
        """Where the next read should land: the rest of a large frame, or the scratch buffer."""
        frame = self._frame
        if frame is not None and len(frame) >= DIRECT_FILL_MIN:
            self._direct = True
            return memoryview(frame)[self._filled :]
        self._direct = False
        if self._scratch is None:
            self._scratch = bytearray(SCRATCH_SIZE)
        if self._last_large and frame is None:
            return memoryview(self._scratch)[:AFTER_LARGE_READ]
        return memoryview(self._scratch)

    def received(self, nbytes: int) -> list[memoryview]:
        """The frames completed by ``nbytes`` read into the last ``recv_buffer``."""
        if not self._direct:
            assert self._scratch is not None
            frames = self.feed(memoryview(self._scratch)[:nbytes])
            if frames:
                self._last_large = len(frames[-1]) >= DIRECT_FILL_MIN
            return frames
        frame = self._frame
        assert frame is not None
        self._filled += nbytes
        if self._filled < len(frame):
            return []
        self._frame, self._filled, self._direct = None, 0, False
        self._last_large = True
        return [memoryview(frame)]

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
            raise FrameSizeError(f"invalid frame size {size}")
        if size > self.max_frame_size:
            raise FrameSizeError(
                f"frame of {size} bytes is larger than the maximum of {self.max_frame_size} ({self.limit_name})"
            )
