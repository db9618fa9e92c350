"""The inter-broker channel against real loopback servers: one connect per broker however many callers
ask at once, a new connection when the old one closed or the broker moved, a failed request's
connection dropped, and nothing left open (or opened) after shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from broker.inter_broker_channel import InterBrokerChannel, InterBrokerEndpoint
from broker.metadata_view import BrokerNode
from client.errors import KafkaConnectionError, KafkaTimeoutError
from protocol.messages.api_versions import ApiVersionsRequest

LISTENER = "INTERNAL"


class Server:
    """A loopback server counting the connections it accepted; it closes a connection that sends
    anything (a request fails) and, when ``silent``, never answers the connection's first bytes."""

    def __init__(self) -> None:
        self.accepted = 0
        self.port = 0
        self.silent = False

    async def on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        data = await reader.read(1)
        while self.silent and data:
            data = await reader.read(1024)
        writer.close()


@asynccontextmanager
async def serving() -> AsyncIterator[Server]:
    server = Server()
    listening = await asyncio.start_server(server.on_client, "127.0.0.1", 0)
    server.port = listening.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listening.close()


class Nodes:
    """The cluster view's answer: where each node listens on the inter-broker listener."""

    def __init__(self, **ports: int) -> None:
        self.ports = {int(node.removeprefix("n")): port for node, port in ports.items()}

    def leader_node(self, leader_id: int, listener_name: str) -> BrokerNode | None:
        assert listener_name == LISTENER
        port = self.ports.get(leader_id)
        return None if port is None else BrokerNode(leader_id, "127.0.0.1", port, None)


def channel(nodes: Nodes, *, negotiate: bool = False) -> InterBrokerChannel:
    return InterBrokerChannel(7, "test", InterBrokerEndpoint(LISTENER), nodes, negotiate=negotiate,
                              request_timeout_s=2.0, connect_timeout_s=2.0)


def run(scenario: Callable[[], object]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10))  # type: ignore[arg-type]


def test_concurrent_callers_share_one_connect() -> None:
    async def scenario() -> None:
        async with serving() as server:
            ch = channel(Nodes(n1=server.port))
            connections = await asyncio.gather(*(ch.connection(1) for _ in range(5)))
            assert len({id(c) for c in connections}) == 1
            assert connections[0].client_id == "broker-7-test" and connections[0].node_id == 1
            assert await ch.connection(1) is connections[0]
            await asyncio.sleep(0.05)
            assert server.accepted == 1
            await ch.shutdown()
    run(scenario)


def test_a_closed_connection_is_replaced_and_a_dropped_one_closed() -> None:
    async def scenario() -> None:
        async with serving() as server:
            ch = channel(Nodes(n1=server.port))
            first = await ch.connection(1)
            first.close()
            second = await ch.connection(1)
            assert second is not first and second.connected
            ch.drop(1)
            assert not second.connected
            third = await ch.connection(1)
            assert third.connected and third is not second
            await asyncio.sleep(0.05)
            assert server.accepted == 3
            await ch.shutdown()
    run(scenario)


def test_a_failed_request_drops_the_connection() -> None:
    async def scenario() -> None:
        async with serving() as closing, serving() as silent:
            silent.silent = True
            ch = channel(Nodes(n1=closing.port, n2=silent.port))
            with pytest.raises(KafkaConnectionError):  # the server closes the connection on the request
                await ch.request(1, ApiVersionsRequest(), version=0)
            timed_out = await ch.connection(2)
            with pytest.raises(KafkaTimeoutError):
                await ch.request(2, ApiVersionsRequest(), version=0, timeout=0.2)
            assert not timed_out.connected
            assert (await ch.connection(2)).connected
            await asyncio.sleep(0.05)
            assert (closing.accepted, silent.accepted) == (1, 2)
            await ch.shutdown()
    run(scenario)


def test_a_moved_broker_is_connected_again_and_an_unknown_one_not_at_all() -> None:
    async def scenario() -> None:
        async with serving() as before, serving() as after:
            nodes = Nodes(n1=before.port)
            ch = channel(nodes)
            old = await ch.connection(1)
            nodes.ports[1] = after.port
            new = await ch.connection(1)
            assert new.address.port == after.port and not old.connected
            del nodes.ports[1]
            with pytest.raises(ConnectionError, match="not known on listener INTERNAL"):
                await ch.connection(1)
            assert not new.connected
            await asyncio.sleep(0.05)
            assert (before.accepted, after.accepted) == (1, 1)
            await ch.shutdown()
    run(scenario)


def test_shutdown_closes_connections_and_cancels_connects_under_way() -> None:
    async def scenario() -> None:
        async with serving() as open_one, serving() as silent:
            silent.silent = True  # ApiVersions is never answered: the connect stays under way
            ch = channel(Nodes(n1=open_one.port, n2=silent.port), negotiate=True)
            plain = channel(Nodes(n1=open_one.port))
            connected = await plain.connection(1)
            waiting = asyncio.ensure_future(ch.connection(2))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            await asyncio.gather(ch.shutdown(), plain.shutdown())
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert not connected.connected
            with pytest.raises(ConnectionError, match="shut down"):
                await plain.connection(1)
            assert plain.closed
    run(scenario)
