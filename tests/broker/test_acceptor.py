"""The socket server's acceptors within the connection quotas, in process, over loopback sockets.

A connection beyond max.connections is not served until another closes; one from an address at
its max.connections.per.ip is closed at once; the inter-broker listener takes room from the least
recently used client connection; the creation rate spaces connections out.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from broker.config.broker_config import Listener
from broker.network.connection_quotas import ConnectionLimits, ConnectionQuotas
from broker.network.socket_server import SocketServer
from broker.request_context import RequestContext
from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

HOST = "127.0.0.1"
STEP_S = 5.0  # the bound on any single wait below


def _dispatch(ctx: RequestContext) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0)


@asynccontextmanager
async def serving(quotas: ConnectionQuotas, *names: str) -> AsyncIterator[SocketServer]:
    server = SocketServer(_dispatch, lambda: ApiVersionsResponse(error_code=35), max_request_size=1 << 20,
                          connection_quotas=quotas)
    await server.start([Listener(name, HOST, 0) for name in names or ("PLAINTEXT",)])
    try:
        yield server
    finally:
        server.stop_accepting()
        await server.drain(1)


class Client:
    """A raw connection that sends ApiVersions requests."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    @classmethod
    async def connect(cls, server: SocketServer, listener: str = "PLAINTEXT", source: str = HOST) -> Client:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            HOST, server.bound[listener][1], local_addr=(source, 0)), STEP_S)
        return cls(reader, writer)

    def ask(self) -> None:
        self.correlation_id += 1
        body = ApiVersionsRequest(client_software_name="test", client_software_version="1.0")
        self.writer.write(join_chunks(encode_request(18, 3, self.correlation_id, "test", body)))

    async def answer(self, timeout: float = STEP_S) -> int:
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout))
        correlation_id, _ = decode_response(18, 3, await asyncio.wait_for(self.reader.readexactly(size), timeout))
        return correlation_id

    async def served(self) -> bool:
        self.ask()
        return await self.answer() == self.correlation_id

    async def closed_by_broker(self) -> bool:
        try:
            return await asyncio.wait_for(self.reader.read(1), STEP_S) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.writer.close()


def test_a_connection_beyond_max_connections_waits_until_another_closes() -> None:
    async def run() -> None:
        quotas = ConnectionQuotas(ConnectionLimits(broker_max_connections=2))
        async with serving(quotas) as server:
            first, second = await Client.connect(server), await Client.connect(server)
            assert await first.served() and await second.served()
            third = await Client.connect(server)  # the kernel completes the handshake; the broker does not accept
            third.ask()
            try:
                await third.answer(timeout=0.5)
                raise AssertionError("served beyond max.connections")
            except TimeoutError:
                pass
            assert quotas.total_count == 2
            first.close()
            assert await third.answer() == 1  # accepted once a slot freed, its request then read
            assert await second.served()
            for client in (second, third):
                client.close()

    asyncio.run(run())


def test_an_address_at_its_per_ip_limit_is_closed_and_others_are_served() -> None:
    async def run() -> None:
        quotas = ConnectionQuotas(ConnectionLimits(max_connections_per_ip=2, per_ip_overrides={HOST: 100}))
        async with serving(quotas) as server:
            limited = [await Client.connect(server, source="127.0.0.2") for _ in range(3)]
            assert await limited[2].closed_by_broker()
            assert await limited[0].served() and await limited[1].served()
            others = [await Client.connect(server) for _ in range(5)]
            assert all([await client.served() for client in others])
            limited[0].close()
            for _ in range(100):  # bounded: until the broker has seen the close
                if quotas.ip_counts.get("127.0.0.2") == 1:
                    break
                await asyncio.sleep(0.02)
            again = await Client.connect(server, source="127.0.0.2")
            assert await again.served()
            for client in [*limited, *others, again]:
                client.close()

    asyncio.run(run())


def test_the_inter_broker_listener_takes_room_from_the_least_recently_used_client() -> None:
    async def run() -> None:
        limits = ConnectionLimits(broker_max_connections=2, inter_broker_listener="INTERNAL",
                                  listeners=frozenset({"EXTERNAL", "INTERNAL"}))
        quotas = ConnectionQuotas(limits)
        async with serving(quotas, "EXTERNAL", "INTERNAL") as server:
            old, recent = await Client.connect(server, "EXTERNAL"), await Client.connect(server, "EXTERNAL")
            assert await old.served()
            await asyncio.sleep(0.05)
            assert await recent.served()  # the more recently used one
            broker = await Client.connect(server, "INTERNAL")
            assert await broker.served()
            assert await old.closed_by_broker()
            assert await recent.served()
            assert quotas.total_count == 2
            for client in (recent, broker):
                client.close()

    asyncio.run(run())


def test_the_creation_rate_spaces_connections_out() -> None:
    async def run() -> float:
        quotas = ConnectionQuotas(ConnectionLimits(broker_max_rate=10), num_samples=2, window_size_seconds=1)
        async with serving(quotas) as server:
            loop = asyncio.get_running_loop()
            started = loop.time()
            clients = [await Client.connect(server) for _ in range(20)]
            assert all([await client.served() for client in clients])
            elapsed = loop.time() - started
            for client in clients:
                client.close()
            return elapsed

    # 10 in the first window, then 10 per second: the last ten take about a second.
    assert 0.8 <= asyncio.run(run()) < 10
