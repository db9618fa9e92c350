"""ResponseWriter: queued file ranges keep their own fd, so a segment closed meanwhile
(retention, topic deletion) never lets another file's bytes reach a client."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
from pathlib import Path

import pytest

from broker.network.response_writer import ResponseWriter
from protocol.buffers import FileRange
from storage.file_records import FileRecords


async def _small_window_client(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)  # fixed: the socket fills up
    client.connect(("127.0.0.1", port))
    client.setblocking(False)
    return await asyncio.open_connection(sock=client)


def test_a_queued_range_is_sent_from_its_segment_after_the_segment_is_closed(tmp_path: Path) -> None:
    payload = os.urandom(6 << 20)
    (tmp_path / "00.log").write_bytes(payload)

    async def scenario() -> tuple[bytes, int]:
        received = bytearray()
        done = asyncio.Event()
        queued: list[int] = []

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            segment = FileRecords(tmp_path / "00.log")
            sock_fd = writer.transport.get_extra_info("socket").fileno()
            out = ResponseWriter(writer.transport, sock_fd, lambda: None, lambda exc: None)  # type: ignore[arg-type]
            out.write([b"head", FileRange(segment, 0, len(payload)), b"tail"])
            queued.append(out.backlog)
            segment.close()  # e.g. retention deleted it while the client was slow
            # The freed fd number is likely reused at once by a file of other bytes.
            decoy = os.open(tmp_path / "decoy", os.O_CREAT | os.O_RDWR)
            os.write(decoy, b"\0" * len(payload))
            for _ in range(2000):  # bounded
                if out.backlog == 0:
                    break
                await asyncio.sleep(0.005)
            os.close(decoy)
            writer.close()
            done.set()

        server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        reader, writer = await _small_window_client(server.sockets[0].getsockname()[1])
        while chunk := await reader.read(1 << 20):
            received += chunk
        await done.wait()
        writer.close()
        server.close()
        return bytes(received), queued[0]

    got, queued = asyncio.run(scenario())
    assert queued > 0  # the range was still queued when its segment closed
    assert got == b"head" + payload + b"tail"


def test_a_range_of_an_already_closed_segment_is_refused(tmp_path: Path) -> None:
    (tmp_path / "00.log").write_bytes(b"x" * 100)
    segment = FileRecords(tmp_path / "00.log")
    segment.close()

    async def scenario() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        _reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
        sock_fd = writer.transport.get_extra_info("socket").fileno()
        out = ResponseWriter(writer.transport, sock_fd, lambda: None, lambda exc: None)  # type: ignore[arg-type]
        try:
            with pytest.raises(OSError, match="closed"):
                out.write([b"head", FileRange(segment, 0, 100)])
        finally:
            writer.close()
            server.close()

    asyncio.run(scenario())


def test_direct_mode_sends_buffers_and_ranges_in_order_across_partial_writes(tmp_path: Path) -> None:
    # A range large enough to fill the socket starts direct mode; then many small buffers
    # (more than one writev takes) and more ranges, so writes stop mid-buffer, on buffer
    # boundaries and mid-range, and each must resume exactly where the last one stopped.
    payload = os.urandom(4 << 20)
    (tmp_path / "00.log").write_bytes(payload)
    rng = random.Random(14)
    frames: list[list[bytes | tuple[int, int]]] = [[b"first", (0, len(payload))]]
    for _ in range(40):
        frame: list[bytes | tuple[int, int]] = [os.urandom(rng.randrange(1, 3000)) for _ in range(rng.randrange(1, 90))]
        start = rng.randrange(len(payload) - (256 << 10))
        frame.insert(rng.randrange(len(frame) + 1), (start, rng.randrange(64 << 10, 256 << 10)))
        frames.append(frame)
    expected = b"".join(part if isinstance(part, bytes) else payload[part[0]:part[0] + part[1]]
                        for frame in frames for part in frame)

    async def scenario() -> bytes:
        received = bytearray()
        done = asyncio.Event()

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            segment = FileRecords(tmp_path / "00.log")
            sock_fd = writer.transport.get_extra_info("socket").fileno()
            out = ResponseWriter(writer.transport, sock_fd, lambda: None, lambda exc: None)  # type: ignore[arg-type]
            for frame in frames:
                out.write([part if isinstance(part, bytes) else FileRange(segment, *part) for part in frame])
            for _ in range(4000):  # bounded
                if out.backlog == 0:
                    break
                await asyncio.sleep(0.005)
            segment.close()
            writer.close()
            done.set()

        server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        reader, writer = await _small_window_client(server.sockets[0].getsockname()[1])
        while chunk := await reader.read(rng.randrange(1000, 70_000)):
            received += chunk
        await done.wait()
        writer.close()
        server.close()
        return bytes(received)

    got = asyncio.run(scenario())
    assert len(got) == len(expected)
    assert got == expected


def _segments_sent(sock: socket.socket) -> int:
    """Linux's tcp_info.tcpi_segs_out: segments this socket has sent."""
    return int(struct.unpack_from("I", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256), 136)[0])


def test_the_bytes_before_a_range_leave_in_its_first_segment(tmp_path: Path) -> None:
    # A follower's fetch answer: a ~100-byte head, then records sent by sendfile. Written on
    # their own, the head was a segment of its own, and woke the reader once more.
    records = os.urandom(40 << 10)  # over SMALL_RANGE (sent by sendfile), under one loopback segment
    (tmp_path / "00.log").write_bytes(records)

    async def scenario() -> tuple[bytes, list[int]]:
        counted: list[int] = []

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            segment = FileRecords(tmp_path / "00.log")
            sock = writer.transport.get_extra_info("socket")
            out = ResponseWriter(writer.transport, sock.fileno(), lambda: None, lambda exc: None)  # type: ignore[arg-type]
            before = _segments_sent(sock)
            out.write([b"h" * 100, FileRange(segment, 0, len(records))])
            counted.append(_segments_sent(sock) - before)
            out.close()
            segment.close()
            writer.close()

        server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
        got = await asyncio.wait_for(reader.readexactly(100 + len(records)), 5)
        writer.close()
        server.close()
        return got, counted

    got, counted = asyncio.run(scenario())
    assert got == b"h" * 100 + records
    assert counted[0] <= 2  # 3 when the head was written through the transport
