"""The request memory pool (queued.max.request.bytes) and the request queue (queued.max.requests)."""

import asyncio
import struct

import pytest

from broker.config.broker_config import Listener
from broker.network.request_limits import MemoryPool, RequestQueue
from broker.network.socket_server import SocketServer
from broker.request_context import RequestContext
from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse


def test_an_unbounded_pool_counts_but_never_runs_out() -> None:
    pool = MemoryPool(-1)
    assert pool.try_allocate(10 << 30)
    assert (pool.used, pool.out_of_memory) == (10 << 30, False)
    pool.release(10 << 30)
    assert pool.used == 0


def test_a_bounded_pool_takes_a_request_while_anything_is_left_as_kafka_s_does() -> None:
    pool = MemoryPool(100)
    assert pool.try_allocate(60)
    assert pool.try_allocate(60)  # 40 were left: taken, the pool is now over by 20
    assert (pool.out_of_memory, pool.available) == (True, -20)
    assert not pool.try_allocate(1)
    pool.release(60)
    assert not pool.out_of_memory and pool.try_allocate(1)


def test_the_release_that_ends_an_exhaustion_calls_back_once() -> None:
    calls: list[int] = []
    pool = MemoryPool(100, on_available=lambda: calls.append(pool.used))
    pool.allocate(150)
    pool.release(20)  # still out of memory
    assert calls == []
    pool.release(100)
    assert calls == [30]
    pool.release(30)  # it was not exhausted: no call
    assert calls == [30]


def test_a_pool_refuses_negative_sizes_and_releases_of_what_it_never_gave() -> None:
    pool = MemoryPool(10)
    with pytest.raises(ValueError, match="cannot allocate"):
        pool.try_allocate(-1)
    with pytest.raises(ValueError, match="more than were allocated"):
        pool.release(1)


def test_the_request_queue_is_full_at_its_maximum_and_each_request_leaves_it_once() -> None:
    calls: list[int] = []
    queue = RequestQueue(2, on_available=lambda: calls.append(queue.queued))
    first, second = queue.put(), queue.put()
    assert queue.full
    first()
    first()  # idempotent: the done callback and the handler's start both call it
    assert (queue.queued, queue.full, calls) == (1, False, [1])
    second()
    assert queue.queued == 0


def test_a_request_queue_of_zero_never_fills() -> None:
    queue = RequestQueue(0)
    queue.put()
    assert not queue.full


def _api_versions_request(correlation_id: int) -> bytes:
    body = ApiVersionsRequest(client_software_name="test", client_software_version="1.0")
    return join_chunks(encode_request(18, 3, correlation_id, "test-client", body))


async def _read_answer(reader: asyncio.StreamReader) -> int:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    correlation_id, _ = decode_response(18, 3, await reader.readexactly(size))
    return correlation_id


def test_no_connection_is_read_while_the_pool_is_exhausted_and_all_are_once_it_is_not() -> None:
    """A held request keeps the pool exhausted: another client's request waits unread, then is answered."""
    release = asyncio.Event()
    seen: list[int] = []

    async def dispatch(ctx: RequestContext) -> ApiVersionsResponse:
        seen.append(ctx.request.correlation_id)
        if ctx.request.correlation_id == 1:
            await release.wait()
        return ApiVersionsResponse(error_code=0)

    async def scenario() -> tuple[list[int], int, list[int], int]:
        pool = MemoryPool(16)  # one ApiVersions request exhausts it
        fallback = lambda: ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,  # noqa: E731
                                               api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4)])
        server = SocketServer(dispatch, fallback, max_request_size=1 << 20, limits=(pool, RequestQueue(500)))
        await server.start([Listener("PLAINTEXT", "127.0.0.1", 0)])
        port = server.bound["PLAINTEXT"][1]
        try:
            r1, w1 = await asyncio.open_connection("127.0.0.1", port)
            w1.write(_api_versions_request(1))
            await asyncio.sleep(0.2)
            r2, w2 = await asyncio.open_connection("127.0.0.1", port)
            w2.write(_api_versions_request(2))
            await asyncio.sleep(0.3)
            while_exhausted = list(seen)
            used = pool.used
            release.set()
            answers = [await asyncio.wait_for(_read_answer(r1), 2), await asyncio.wait_for(_read_answer(r2), 2)]
            w1.close()
            w2.close()
            await asyncio.sleep(0.05)
            return while_exhausted, used, answers, pool.used
        finally:
            server.stop_accepting()
            await server.drain(1)

    while_exhausted, used, answers, used_after = asyncio.run(scenario())
    assert while_exhausted == [1]  # the second client's request was not read
    assert used > 16
    assert answers == [1, 2]
    assert used_after == 0  # every answered request gave its bytes back
