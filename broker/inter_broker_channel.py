"""This broker's connections to the other brokers for one purpose: Kafka's NetworkClient of an
inter-broker send thread.

A broker asks other brokers things on the inter-broker listener
(``inter.broker.listener.name``), with that listener's TLS and SASL settings:
the share coordinator's broker for share-partition state, a partition's leader
for its end offset, a transaction's coordinator to verify a produce. An
:class:`InterBrokerChannel` keeps one connection per other broker for one such
purpose: it finds the broker's endpoint on the listener in the broker's
metadata (a :class:`NodeLookup`, the :class:`~broker.metadata_view.ClusterView`),
connects on first use (once, however many callers ask at the same time),
connects again when the connection closed or the broker moved, drops the
connection when a request on it fails, and closes everything at shutdown.

Each purpose has its own channel (its own connections, named by the client id
``broker-<id>-<purpose>``) because a broker serves one connection's requests in
order: a user sharing a connection would wait behind another user's slow
requests (a ListOffsets behind a share-state write waiting for its ISR).

The listener and its settings are an :class:`InterBrokerEndpoint`, which the
broker's :class:`~broker.membership.Membership` hands out.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Protocol

from broker.metadata_view import BrokerNode
from client.async_connection import AsyncBrokerConnection
from client.errors import KafkaClientError
from client.sasl import SaslSettings
from protocol.primitives import Message

#: Kafka's request.timeout.ms default for inter-broker requests.
REQUEST_TIMEOUT_S = 30.0
#: Kafka's socket.connection.setup.timeout.ms default.
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class InterBrokerEndpoint:
    """How this broker reaches the others: the inter-broker listener and its security settings."""

    #: inter.broker.listener.name: the listener whose endpoint of another broker is connected to.
    listener_name: str
    #: That listener's TLS context when it is SSL; None for plain TCP.
    ssl_context: ssl.SSLContext | None = None
    #: The broker's own SASL credentials when that listener is SASL_*.
    sasl: SaslSettings | None = None


class NodeLookup(Protocol):
    """Where a live broker listens (the broker's :class:`~broker.metadata_view.ClusterView`)."""

    def leader_node(self, leader_id: int, listener_name: str) -> BrokerNode | None: ...


class InterBrokerChannel:
    """One connection per other broker for one purpose, on the inter-broker listener."""

    def __init__(self, broker_id: int, purpose: str, endpoint: InterBrokerEndpoint, nodes: NodeLookup, *,
                 negotiate: bool = False, request_timeout_s: float = REQUEST_TIMEOUT_S,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        """``negotiate``: ask each broker's ApiVersions on connecting (a user picking versions by it)."""
        self.client_id = f"broker-{broker_id}-{purpose}"
        self.endpoint = endpoint
        self.nodes = nodes
        self.negotiate = negotiate
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._connections: dict[int, AsyncBrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future[AsyncBrokerConnection]] = {}
        self._closed = False

    @property
    def listener_name(self) -> str:
        return self.endpoint.listener_name

    @property
    def closed(self) -> bool:
        return self._closed

    async def request(self, node_id: int, request: Message, *, version: int | None = None,
                      timeout: float | None = None) -> Message:
        """``node_id``'s answer (``version`` defaults to the negotiated one, ``timeout`` to the channel's);
        the connection is dropped when it fails (KafkaClientError or OSError, a timeout being one)."""
        try:
            connection = await self.connection(node_id)
            return await connection.request(request, version=version,
                                            timeout=self.request_timeout_s if timeout is None else timeout)
        except (KafkaClientError, OSError):
            self.drop(node_id)
            raise

    async def connection(self, node_id: int) -> AsyncBrokerConnection:
        """The open connection to ``node_id`` at its current endpoint, connecting once for concurrent
        callers. ConnectionError when the broker is not known on the listener or the channel is shut down."""
        if self._closed:
            raise ConnectionError("the inter-broker channel is shut down")
        node = self.nodes.leader_node(node_id, self.endpoint.listener_name)
        if node is None:
            self.drop(node_id)
            raise ConnectionError(f"broker {node_id} is not known on listener {self.endpoint.listener_name}")
        existing = self._connections.get(node_id)
        if existing is not None and existing.connected and (existing.address.host,
                                                            existing.address.port) == (node.host, node.port):
            return existing
        self.drop(node_id)
        pending = self._connecting.get(node_id)
        if pending is None:
            pending = asyncio.ensure_future(self._connect(node))
            self._connecting[node_id] = pending
            pending.add_done_callback(lambda done: self._connected(node_id, done))
        # Shielded: one caller cancelled does not cancel the connect the others wait for.
        return await asyncio.shield(pending)

    async def _connect(self, node: BrokerNode) -> AsyncBrokerConnection:
        connection = AsyncBrokerConnection(node.host, node.port, client_id=self.client_id, node_id=node.node_id,
                                           request_timeout=self.request_timeout_s,
                                           ssl_context=self.endpoint.ssl_context, sasl=self.endpoint.sasl)
        await connection.connect(timeout=self.connect_timeout_s, negotiate=self.negotiate)
        if self._closed:
            connection.close()
            raise ConnectionError("the inter-broker channel is shut down")
        self._connections[node.node_id] = connection
        return connection

    def _connected(self, node_id: int, done: asyncio.Future[AsyncBrokerConnection]) -> None:
        if self._connecting.get(node_id) is done:
            del self._connecting[node_id]
        if not done.cancelled():
            done.exception()  # retrieved: every waiter that is still there has it raised

    def drop(self, node_id: int) -> None:
        """Close the connection to ``node_id`` (the next request connects again)."""
        connection = self._connections.pop(node_id, None)
        if connection is not None:
            connection.close()

    async def shutdown(self) -> None:
        """Cancel the connects under way and close every connection; later requests fail."""
        self._closed = True
        pending = list(self._connecting.values())
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for node_id in list(self._connections):
            self.drop(node_id)
