"""SocketServer: pipelined requests are answered strictly in order; bad input costs one connection."""

import asyncio
import socket
import struct
from typing import BinaryIO

from broker.config.broker_config import Listener
from broker.network.socket_server import SocketServer
from broker.request_context import RequestContext
from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.fetch import API_KEY as FETCH_KEY
from protocol.messages.fetch import FetchRequest


def _api_versions_request(correlation_id: int, version: int = 3) -> bytes:
    body = ApiVersionsRequest(client_software_name="test", client_software_version="1.0")
    return join_chunks(encode_request(18, version, correlation_id, "test-client", body))


async def _read_response(reader: asyncio.StreamReader, version: int = 3) -> tuple[int, ApiVersionsResponse]:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return decode_response(18, version, await reader.readexactly(size))  # type: ignore[return-value]


async def _serve(dispatch) -> tuple[SocketServer, int]:  # type: ignore[no-untyped-def]
    fallback = lambda: ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,  # noqa: E731
                                           api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4)])
    server = SocketServer(dispatch, fallback, max_request_size=1 << 20)
    await server.start([Listener("PLAINTEXT", "127.0.0.1", 0)])
    return server, server.bound["PLAINTEXT"][1]


async def _three_pipelined_requests(dispatch) -> list[int]:  # type: ignore[no-untyped-def]
    """Send requests 1, 2, 3 in one write; the correlation ids of the answers, in arrival order."""
    server, port = await _serve(dispatch)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(_api_versions_request(i) for i in (1, 2, 3)))
        await writer.drain()
        order = [(await _read_response(reader))[0] for _ in range(3)]
        writer.close()
        return order
    finally:
        server.stop_accepting()
        await server.drain(1)


def test_responses_leave_in_request_order_even_when_handlers_finish_out_of_order() -> None:
    async def dispatch(ctx: RequestContext) -> ApiVersionsResponse:
        # The first request is slow, the later ones are instant.
        if ctx.request.correlation_id == 1:
            await asyncio.sleep(0.2)
        return ApiVersionsResponse(error_code=0, throttle_time_ms=ctx.request.correlation_id)

    assert asyncio.run(_three_pipelined_requests(dispatch)) == [1, 2, 3]


def test_garbage_closes_only_that_connection() -> None:
    def dispatch(ctx: RequestContext) -> ApiVersionsResponse:
        return ApiVersionsResponse(error_code=0)

    async def scenario() -> tuple[bytes, int]:
        server, port = await _serve(dispatch)
        try:
            bad_reader, bad_writer = await asyncio.open_connection("127.0.0.1", port)
            good_reader, good_writer = await asyncio.open_connection("127.0.0.1", port)
            bad_writer.write(struct.pack(">i", 12) + b"\xff" * 12)  # api key -1: unknown
            await bad_writer.drain()
            eof = await asyncio.wait_for(bad_reader.read(), 2)
            good_writer.write(_api_versions_request(9))
            await good_writer.drain()
            correlation_id, _ = await asyncio.wait_for(_read_response(good_reader), 2)
            good_writer.close()
            return eof, correlation_id
        finally:
            server.stop_accepting()
            await server.drain(1)

    eof, correlation_id = asyncio.run(scenario())
    assert eof == b"" and correlation_id == 9


def test_too_new_api_versions_gets_the_v0_fallback() -> None:
    async def scenario() -> tuple[int, ApiVersionsResponse]:
        server, port = await _serve(lambda ctx: None)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            # ApiVersions v99: header v1 part is readable, the body is not.
            frame = struct.pack(">hhih", 18, 99, 42, 4) + b"test" + b"\x00garbage"
            writer.write(struct.pack(">i", len(frame)) + frame)
            await writer.drain()
            response = await asyncio.wait_for(_read_response(reader, version=0), 2)
            writer.close()
            return response
        finally:
            server.stop_accepting()
            await server.drain(1)

    correlation_id, response = asyncio.run(scenario())
    assert correlation_id == 42
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.max_version) for k in response.api_keys] == [(18, 4)]


def test_bytes_after_a_complete_request_body_are_ignored_as_kafka_does() -> None:
    # librdkafka 2.16 sends Metadata v13 with three bytes beyond Kafka 4's schema.
    from protocol.api import decode_request

    frame = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    request = decode_request(frame)
    assert request.api.name == "Metadata" and request.correlation_id == 3
    assert request.body.topics is None


def test_file_ranges_reach_the_client_in_order_whether_sendfiled_or_queued(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Frames mixing bytes and FileRanges arrive byte-exact and in order, also when the
    socket cannot take a large range at once: the rest, and every frame written after
    it, wait in the writer and go out by sendfile/writev as the socket drains."""
    import os

    from broker.network.response_writer import ResponseWriter
    from protocol.buffers import FileRange

    payload = os.urandom(8 << 20)  # larger than a loopback socket takes without blocking
    path = tmp_path / "segment.log"
    path.write_bytes(payload)
    expected = (b"head" + payload[10 : 10 + (4 << 20)] + b"mid" + payload[:16] + b"tail"
                + b"next" + payload[100 : 100 + (3 << 20)] + b"end")

    async def scenario(f: BinaryIO) -> tuple[bytes, list[int]]:
        received = bytearray()
        done = asyncio.Event()
        backlogs: list[int] = []

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock_fd = writer.transport.get_extra_info("socket").fileno()
            out = ResponseWriter(writer.transport, sock_fd, lambda: None, lambda exc: None)  # type: ignore[arg-type]
            out.write([b"head", FileRange(f, 10, 4 << 20), b"mid", FileRange(f, 0, 16), b"tail"])
            backlogs.append(out.backlog)  # the socket could not take 4 MiB at once
            out.write([b"next", FileRange(f, 100, 3 << 20), b"end"])  # queued behind
            for _ in range(2000):  # bounded: the client reads as fast as it can
                if out.backlog == 0:
                    break
                await asyncio.sleep(0.005)
            backlogs.append(out.backlog)
            await writer.drain()
            writer.close()
            done.set()

        server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)  # fixed: no autotuning
        client.connect(("127.0.0.1", port))
        client.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=client)
        while chunk := await reader.read(1 << 20):
            received += chunk
        await done.wait()
        writer.close()
        server.close()
        return bytes(received), backlogs

    with open(path, "rb") as segment:  # the file the ranges are sent from
        got, backlogs = asyncio.run(scenario(segment))
    assert got == expected
    assert backlogs[0] > 0 and backlogs[1] == 0


def test_a_request_behind_a_running_task_starts_after_that_task_has() -> None:
    """Handlers that answer synchronously must not overtake an earlier request of the
    same connection still running as a task: its first step (e.g. submitting to the
    append thread) happens first, as when every handler was a task."""
    started: list[int] = []

    def dispatch(ctx: RequestContext):  # type: ignore[no-untyped-def]
        correlation_id = ctx.request.correlation_id
        if correlation_id == 1:
            async def slow() -> ApiVersionsResponse:
                started.append(1)
                await asyncio.sleep(0.05)
                return ApiVersionsResponse(error_code=0, throttle_time_ms=1)
            return slow()
        started.append(correlation_id)
        return ApiVersionsResponse(error_code=0, throttle_time_ms=correlation_id)

    assert asyncio.run(_three_pipelined_requests(dispatch)) == [1, 2, 3]
    assert started == [1, 2, 3]


def _fetch_request(correlation_id: int) -> bytes:
    body = FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id="")
    return join_chunks(encode_request(FETCH_KEY, 12, correlation_id, "test-client", body))


def test_a_closed_connection_cancels_only_requests_that_wait() -> None:
    """A request that changes state runs to its end when its client goes away (its answer
    dropped); a long-polling fetch, which only waits, is cancelled; shutdown waits for neither."""
    release = asyncio.Event()
    started: list[int] = []
    finished: list[int] = []
    cancelled: list[int] = []

    async def handle(api_key: int) -> ApiVersionsResponse:
        started.append(api_key)
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(api_key)
            raise
        finished.append(api_key)
        return ApiVersionsResponse(error_code=0)

    def dispatch(ctx: RequestContext):  # type: ignore[no-untyped-def]
        return handle(ctx.request.header.request_api_key)

    async def scenario() -> None:
        server, port = await _serve(dispatch)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_api_versions_request(1) + _fetch_request(2))
            await writer.drain()
            for _ in range(200):
                if len(started) == 2:
                    break
                await asyncio.sleep(0.01)
            writer.transport.abort()  # a client killed with its requests in flight
            for _ in range(200):
                if not server.connections:
                    break
                await asyncio.sleep(0.01)
            assert not server.connections
            release.set()
            for _ in range(10):
                await asyncio.sleep(0)
        finally:
            server.stop_accepting()
            await server.drain(1)

    asyncio.run(scenario())
    assert (started, finished, cancelled) == ([18, FETCH_KEY], [18], [FETCH_KEY])
