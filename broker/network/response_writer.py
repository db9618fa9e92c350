"""A connection's outgoing frames, in order, with record bytes sent by sendfile.

uvloop's transports do not implement sendfile, and a loopback socket takes only
a few hundred KiB at once, so a fetch response of several MiB used to be sent
as: sendfile what the socket takes, pread the rest into memory (a copy), queue
it in the transport (another copy). Here, once the socket is full in the middle
of a FileRange, the connection's output switches to *direct mode*: everything
not yet sent (the rest of that range and every later frame) waits in our own
queue, and is written with ``sendfile`` / ``writev`` on the socket whenever it
is writable again, so record bytes go from the page cache to the socket and are
never copied through Python. When the queue is empty, output goes back through
the transport.

A queued range holds its own duplicate of the segment's fd: a segment closed
meanwhile (retention, topic deletion) would otherwise leave a number the next
``open`` may reuse, and the queue would send another file's bytes. With the
duplicate, the bytes sent are the segment's, as in Kafka, whose open file
channels outlive a deleted segment's name.

A TLS connection has no socket fd here (``sock_fd`` None): its bytes must go
through the SSL transport to be encrypted, so every range is read (pread) and
written to the transport, the copy sendfile saves on plain connections. The
branch already taken when a transport has bytes buffered serves it, so plain
connections pay no extra check.

The bytes before a range (the frame's size and header, a partition's header) are
written on the socket with MSG_MORE, so they leave in the range's first segment:
written through the transport they were a segment of their own, and on loopback
each segment is a pass through the receiver's TCP stack and a wake-up of its
reader (a follower woke for a fetch answer's ~100-byte head, then again for its
records).

Ordering holds because direct mode starts only when the transport has nothing
buffered (checked before each sendfile), and while it lasts nothing is given
to the transport. Writability is watched on a duplicate of the socket's fd: the
event loop refuses a watcher on a fd its transport owns.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import socket
from collections.abc import Callable, Sequence

from protocol.buffers import Buffer, Chunk, FileRange, HasFileno

#: At most this many buffers per writev (Linux's IOV_MAX is 1024).
_WRITEV_MAX = 64
#: File ranges up to this size are read (one pread) and written with the frame's
#: other bytes in one writev: a fetch answer for many partitions holding a few
#: records each then costs one socket write instead of two per partition.
SMALL_RANGE = 32 * 1024
#: At most this many record bytes leave one connection per pass of the event loop: a consumer
#: that reads as fast as the broker sends would otherwise keep one callback sending its whole
#: answer (tens of MB) while every other client waits.
SEND_QUANTUM = 4 << 20
#: A connection closing after an error waits at most this long for its client to
#: read what was already answered.
CLOSE_AFTER_S = 30.0


class ResponseWriter:
    def __init__(self, transport: asyncio.Transport, sock_fd: int | None,
                 on_progress: Callable[[], None], on_error: Callable[[OSError], None]) -> None:
        self._transport = transport
        self._sock_fd = sock_fd
        self._on_progress = on_progress
        self._on_error = on_error
        #: Direct mode's queue: memoryviews and ranges of fds the queue owns.
        self._pending: collections.deque[memoryview | _QueuedRange] = collections.deque()
        self._pending_bytes = 0
        self._watch_fd: int | None = None
        #: A socket object on a duplicate of the fd, for sendmsg's flags; made on first use.
        self._direct_socket: socket.socket | None = None
        self._closed = False
        self._close_when_drained = False

    @property
    def backlog(self) -> int:
        """Bytes written but not yet on the socket (ours in direct mode, plus the transport's)."""
        return self._pending_bytes + self._transport.get_write_buffer_size()

    def prepare(self, chunks: list[Chunk]) -> list[Chunk]:
        """One encoded frame ready to write: small file ranges read into memory.

        Raises OSError, before anything of the frame is written, when a segment it
        reads from was closed (deleted) since the response was built.
        """
        out: list[Chunk] = []
        for chunk in chunks:
            if isinstance(chunk, FileRange):
                _check_open(chunk.file)
                if chunk.length <= SMALL_RANGE:
                    chunk = _pread_all(chunk)
            out.append(chunk)
        return out

    def write(self, chunks: list[Chunk]) -> None:
        """Queue one or more encoded frames; raises OSError when records cannot be read."""
        try:
            self._write(self.prepare(chunks))
        except ValueError as exc:  # a segment file closed under us (partition deleted)
            raise OSError(str(exc)) from exc

    def close_when_sent(self) -> None:
        """End the connection once everything queued has left (what was answered is delivered),
        or after CLOSE_AFTER_S if the client stops reading."""
        if self._pending:
            self._close_when_drained = True
            asyncio.get_running_loop().call_later(CLOSE_AFTER_S, self._transport.close)
        else:
            self._transport.close()  # the transport sends its own buffer first

    def _write(self, chunks: list[Chunk]) -> None:
        if self._closed:
            return
        if self._pending:
            self._enqueue(chunks, 0)
            return
        parts: list[Buffer] = []
        for index, chunk in enumerate(chunks):
            if not isinstance(chunk, FileRange):
                parts.append(chunk)
                continue
            if self._sock_fd is None or self._transport.get_write_buffer_size():
                if parts:
                    self._transport.writelines(parts)
                    parts = []
                self._transport.write(_pread_all(chunk))
                continue
            if parts:
                unsent = self._send_more(parts)
                parts = []
                if unsent:  # the socket is full: the rest waits in direct mode's queue
                    self._enqueue(unsent, 0)
                    self._enqueue(chunks, index)
                    self._watch()
                    return
            sent = _sendfile_some(self._sock_fd, chunk, SEND_QUANTUM)
            if sent < chunk.length:
                self._enqueue([FileRange(chunk.file, chunk.offset + sent, chunk.length - sent)], 0)
                self._enqueue(chunks, index + 1)
                self._watch()
                return
        if parts:
            self._transport.writelines(parts)

    def _send_more(self, parts: list[Buffer]) -> list[memoryview]:
        """Write ``parts`` on the socket, held for the bytes that follow (MSG_MORE); what it did
        not take. The socket is writable here: the transport has nothing buffered."""
        sock = self._direct_socket
        if sock is None:
            assert self._sock_fd is not None
            sock = self._direct_socket = socket.socket(fileno=os.dup(self._sock_fd))
        views = [memoryview(part).cast("B") for part in parts]
        if len(views) > _WRITEV_MAX:
            views = [memoryview(b"".join(views))]
        try:
            n = sock.sendmsg(views, (), socket.MSG_MORE)
        except BlockingIOError:
            n = 0
        return _unsent(views, n)

    def close(self) -> None:
        """Drop whatever is queued and stop watching (the connection is going away)."""
        self._closed = True
        if self._direct_socket is not None:
            self._direct_socket.close()
            self._direct_socket = None
        for chunk in self._pending:
            if isinstance(chunk, _QueuedRange):
                chunk.file.close()
        self._pending.clear()
        self._pending_bytes = 0
        self._unwatch()

    # -- direct mode --------------------------------------------------------------------
    def _enqueue(self, chunks: Sequence[Chunk], start: int) -> None:
        for chunk in chunks[start:]:
            if isinstance(chunk, FileRange):
                self._pending.append(_QueuedRange(_OwnFd.of(chunk.file), chunk.offset, chunk.length))
                self._pending_bytes += chunk.length
            elif len(chunk):
                view = memoryview(chunk).cast("B")
                self._pending.append(view)
                self._pending_bytes += len(view)

    def _watch(self) -> None:
        if self._watch_fd is None and self._sock_fd is not None:
            self._watch_fd = os.dup(self._sock_fd)
            asyncio.get_running_loop().add_writer(self._watch_fd, self._on_writable)

    def _unwatch(self) -> None:
        fd, self._watch_fd = self._watch_fd, None
        if fd is not None:
            asyncio.get_running_loop().remove_writer(fd)
            os.close(fd)

    def _on_writable(self) -> None:
        try:
            drained = self._send_pending()
        except (OSError, ValueError) as exc:  # ValueError: a segment file closed under us
            self.close()
            self._on_error(exc if isinstance(exc, OSError) else OSError(str(exc)))
            return
        if drained:
            self._unwatch()
            if self._close_when_drained:
                self._transport.close()
                return
        self._on_progress()

    def _send_pending(self) -> bool:
        """Send what the socket takes now; True once nothing is left."""
        fd, pending = self._sock_fd, self._pending
        assert fd is not None
        budget = self._pending_bytes - SEND_QUANTUM  # what may stay queued once this pass is over
        while pending:
            if self._pending_bytes <= budget:
                return False  # the socket may take more: the next pass of the loop sends it
            head = pending[0]
            try:
                if isinstance(head, _QueuedRange):
                    n = os.sendfile(fd, head.file.fileno(), head.offset, head.length)
                    if n == 0:  # the segment shrank under us: the frame cannot be completed
                        raise OSError(f"short read from segment: {head.length} bytes missing")
                    self._consume_file(head, n)
                else:
                    buffers: list[memoryview] = []
                    for chunk in pending:
                        if isinstance(chunk, _QueuedRange) or len(buffers) == _WRITEV_MAX:
                            break
                        buffers.append(chunk)
                    self._consume_buffers(buffers, os.writev(fd, buffers))
            except BlockingIOError:
                return False
        return True

    def _consume_file(self, head: _QueuedRange, n: int) -> None:
        self._pending_bytes -= n
        if n < head.length:
            self._pending[0] = _QueuedRange(head.file, head.offset + n, head.length - n)
        else:
            self._pending.popleft()
            head.file.close()

    def _consume_buffers(self, written: list[memoryview], n: int) -> None:
        """``n`` bytes of ``written`` (the queue's leading buffers, in order) have left."""
        self._pending_bytes -= n
        pending = self._pending
        for head in written:
            if not n:
                return
            if n < len(head):
                pending[0] = head[n:]
                return
            n -= len(head)
            pending.popleft()


class _OwnFd:
    """A duplicate of a segment's fd, owned by one queued range."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def of(cls, file: HasFileno) -> _OwnFd:
        _check_open(file)
        return cls(os.dup(file.fileno()))

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclasses.dataclass(frozen=True, slots=True)
class _QueuedRange(FileRange):
    """A FileRange waiting in direct mode's queue, reading from a duplicate fd the queue owns."""

    file: _OwnFd


def _check_open(file: HasFileno) -> None:
    # A closed segment's fd number may already belong to another file.
    if getattr(file, "closed", False):
        raise OSError(f"segment {getattr(file, 'path', file)} was closed before its bytes were sent")


def _unsent(views: list[memoryview], n: int) -> list[memoryview]:
    """What is left of ``views`` once their first ``n`` bytes have been sent."""
    for i, view in enumerate(views):
        if n < len(view):
            return [view[n:], *views[i + 1:]]
        n -= len(view)
    return []


def _sendfile_some(sock_fd: int, chunk: FileRange, limit: int) -> int:
    """Bytes of ``chunk`` the socket accepted without blocking, at most about ``limit``."""
    file_fd, sent = chunk.file.fileno(), 0
    while sent < chunk.length and sent < limit:
        try:
            n = os.sendfile(sock_fd, file_fd, chunk.offset + sent, chunk.length - sent)
        except BlockingIOError:
            break
        if n == 0:
            raise OSError(f"short read from segment: {sent} of {chunk.length}")
        sent += n
    return sent


def _pread_all(chunk: FileRange) -> bytes:
    data = os.pread(chunk.file.fileno(), chunk.length, chunk.offset)
    if len(data) != chunk.length:
        # The segment was truncated under us; a short frame would desynchronise
        # the client, so the connection must close.
        raise OSError(f"short read from segment: {len(data)} of {chunk.length}")
    return data

