"""Acceptor: one listener's server sockets and the loop that accepts on them (Kafka's Acceptor).

The acceptor accepts one connection at a time and asks the broker's
:class:`~broker.network.connection_quotas.ConnectionQuotas` before taking the next: while
a connection limit is reached or the creation rate is exceeded it holds the one it
has and accepts nothing more, so further clients wait in the kernel's accept queue,
as Kafka's blocked acceptor leaves them. A connection whose address is already at
its max.connections.per.ip is closed at once. An admitted connection gets its
protocol (and its TLS handshake, which is what a creation rate limit protects the
broker from) only then.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from broker.network.connection_quotas import (
    ConnectionQuotas,
    ConnectionSlot,
    ConnectionThrottledError,
    TooManyConnectionsError,
    normalized_ip,
)

log = logging.getLogger(__name__)

#: Accept errors that say "not now" (out of descriptors or buffers), not "never": back off, go on.
ACCEPT_RETRY_DELAY_S = 0.1

#: Builds the protocol of an admitted connection, given the slot it must release when it closes.
ConnectionFactory = Callable[[ConnectionSlot], asyncio.BaseProtocol]


async def listening_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for ``host:port`` ("" for every interface: one per
    address family, as asyncio's create_server binds them)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, type_, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, type_, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # an IPv6 socket must not take the IPv4 socket's port too
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise OSError(exc.errno, f"error while attempting to bind on address {address!r}: "
                                         f"{(exc.strerror or str(exc)).lower()}") from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _close_socket(sock: socket.socket, _: object) -> None:
    sock.close()


class Acceptor:
    """Accepts on a listener's sockets within the connection quotas; owns its tasks and sockets."""

    def __init__(self, listener_name: str, sockets: list[socket.socket], quotas: ConnectionQuotas,
                 new_connection: ConnectionFactory, ssl_context: ssl.SSLContext | None) -> None:
        self.listener_name = listener_name
        self.sockets = sockets
        self._quotas = quotas
        self._new_connection = new_connection
        self._ssl_context = ssl_context
        self._accepting: list[asyncio.Task[None]] = []
        self._handshakes: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        for sock in self.sockets:
            task = asyncio.create_task(self._accept_loop(sock), name=f"acceptor-{self.listener_name}")
            # Closed once its accept is cancelled: the event loop may still be watching it until then.
            task.add_done_callback(functools.partial(_close_socket, sock))
            self._accepting.append(task)

    def close(self) -> None:
        """Stop accepting; the server sockets close as their accept loops end (connections made stay)."""
        for task in self._accepting:
            task.cancel()
        if not self._accepting:
            for sock in self.sockets:
                sock.close()

    async def wait_closed(self) -> None:
        for task in self._handshakes:
            task.cancel()
        await asyncio.gather(*self._accepting, *self._handshakes, return_exceptions=True)

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, address = await loop.sock_accept(sock)
            except (ConnectionAbortedError, InterruptedError):
                continue  # the client gave up before we took it
            except OSError as exc:
                log.error("error accepting a connection on %s: %s", self.listener_name, exc)
                await asyncio.sleep(ACCEPT_RETRY_DELAY_S)
                continue
            try:
                await self._quotas.wait_for_slot(self.listener_name)
            except BaseException:
                conn.close()
                raise
            self._admit(conn, normalized_ip(str(address[0])))

    def _admit(self, conn: socket.socket, ip: str) -> None:
        try:
            slot = self._quotas.inc(self.listener_name, ip)
        except (TooManyConnectionsError, ConnectionThrottledError) as exc:
            log.info("%s", exc)
            conn.close()
            return
        task = asyncio.create_task(self._serve(conn, slot))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _serve(self, conn: socket.socket, slot: ConnectionSlot) -> None:
        """Give the admitted socket its protocol: a TLS listener's handshake first, off the accept loop."""
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(lambda: self._new_connection(slot), conn, ssl=self._ssl_context)
        except BaseException as exc:
            # No protocol took the slot (a failed or cancelled TLS handshake): it is free again.
            slot.release()
            conn.close()
            if isinstance(exc, asyncio.CancelledError):
                raise
            if isinstance(exc, (OSError, ssl.SSLError)):
                log.info("connection on %s failed before it was served: %s", self.listener_name, exc)
                return
            raise
