"""One asyncio connection to one broker: Kafka's NetworkClient for a single node.

Broker-to-broker requests and replica fetchers run on the broker's event loop,
so they cannot use the blocking :class:`~client.connection.BrokerConnection`.
This connection speaks the same codecs through the same sans-IO pieces
(``protocol.framing`` for frames, ``client.in_flight_requests`` for correlation
ids and in-order matching, ``client.node_api_versions`` for negotiation):

- :meth:`AsyncBrokerConnection.send` writes a request at once and returns a
  future of its response, so many requests can be in flight on one socket;
  Kafka answers them in the order sent, and each response completes the oldest.
- Every request has a timeout. When it expires the request fails with
  :class:`~client.errors.KafkaTimeoutError` and the connection is closed, as
  Kafka's NetworkClient does: responses come in order, so every request behind
  the late one would wait at least as long.
- A lost connection (the broker closed it, died, or sent a bad frame) and
  :meth:`AsyncBrokerConnection.close` fail every request still waiting with
  :class:`~client.errors.KafkaConnectionError`; nothing waits forever.

With ``sasl`` settings the connection authenticates (SaslHandshake and
SaslAuthenticate, ``client.sasl``) before it is handed out. With an ``ssl_context`` the connection is TLS (a broker reaching others over an
SSL inter-broker listener); the server's host name is the one checked against
its certificate when the context checks host names.

A caller that cancels its wait only gives up on that response: it is read and
dropped when it arrives, and the connection stays usable.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from typing import cast

from client.connection import DEFAULT_CLIENT_ID, MAX_RESPONSE_SIZE, BrokerAddress
from client.errors import CorrelationIdMismatchError, KafkaConnectionError, KafkaTimeoutError
from client.in_flight_requests import InFlightRequest, InFlightRequests, request_spec
from client.node_api_versions import ApiVersionsNegotiation, NodeApiVersions, api_versions_request
from client.sasl import (
    SaslSettings,
    authenticate_request,
    challenge_of,
    check_handshake,
    handshake_request,
)
from protocol.api import ApiSpec
from protocol.errors import ProtocolError
from protocol.framing import FrameDecoder
from protocol.primitives import Message

__all__ = ["AsyncBrokerConnection"]

#: Kafka's request.timeout.ms default for clients.
DEFAULT_REQUEST_TIMEOUT_S = 30.0
#: Kafka's socket.connection.setup.timeout.ms default.
DEFAULT_CONNECT_TIMEOUT_S = 10.0


@dataclass(slots=True)
class _Waiter:
    future: asyncio.Future[Message]
    timer: asyncio.TimerHandle


class _ResponseReader(asyncio.BufferedProtocol):
    """Feeds the socket's bytes to the frame decoder and every frame to the connection."""

    def __init__(self, connection: AsyncBrokerConnection) -> None:
        self.connection = connection
        self.decoder = FrameDecoder(MAX_RESPONSE_SIZE)
        self.writable = asyncio.Event()
        self.writable.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.recv_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.decoder.received(nbytes)
        except ProtocolError as exc:
            self.connection._lost(self, f"bad response frame: {exc}")
            return
        for frame in frames:
            if not self.connection._response(self, frame):
                return

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost reports it

    def connection_lost(self, exc: Exception | None) -> None:
        self.writable.set()  # wake writers; they find the connection gone
        self.connection._lost(self, f"connection lost: {exc!r}" if exc is not None else "connection closed by the broker")

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()


class AsyncBrokerConnection:
    """An asyncio connection to one broker: pipelined requests, per-request timeouts, negotiated versions."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        node_id: int | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslSettings | None = None,
    ) -> None:
        self.address = BrokerAddress(host, port)
        self.ssl_context = ssl_context
        #: SASL authentication right after the versions are negotiated (a SASL inter-broker listener).
        self.sasl = sasl
        self.client_id = client_id
        self.node_id = node_id
        self.request_timeout = request_timeout
        #: What the broker supports and the version used for each API (set by negotiate_versions).
        self.versions = NodeApiVersions()
        self._in_flight = InFlightRequests(client_id, self.address)
        self._waiters: dict[int, _Waiter] = {}
        self._transport: asyncio.Transport | None = None
        self._reader: _ResponseReader | None = None

    # ------------------------------------------------------------ lifecycle

    async def connect(
        self, *, timeout: float = DEFAULT_CONNECT_TIMEOUT_S, negotiate: bool = True
    ) -> AsyncBrokerConnection:
        """Open the connection within ``timeout`` seconds and (unless told not to) negotiate versions."""
        if self._transport is not None:
            return self
        loop = asyncio.get_running_loop()
        reader = _ResponseReader(self)
        tls = self.ssl_context
        try:
            transport, _ = await asyncio.wait_for(
                loop.create_connection(lambda: reader, self.address.host, self.address.port, ssl=tls,
                                       server_hostname=self.address.host if tls is not None else None),
                timeout,
            )
        except (OSError, TimeoutError) as exc:
            raise KafkaConnectionError(f"cannot connect to {self.address}: {exc!r}") from exc
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._transport, self._reader = transport, reader
        if negotiate or self.sasl is not None:
            try:
                await self.negotiate_versions()
                if self.sasl is not None:
                    await self._authenticate(self.sasl)
            except BaseException:
                self.close()
                raise
        return self

    def close(self) -> None:
        """Close the socket; every request still waiting fails with KafkaConnectionError."""
        self._fail(KafkaConnectionError, f"{self.address}: connection closed")

    @property
    def connected(self) -> bool:
        return self._transport is not None

    @property
    def in_flight(self) -> int:
        """Requests written and not yet answered."""
        return len(self._in_flight)

    async def __aenter__(self) -> AsyncBrokerConnection:
        return await self.connect()

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AsyncBrokerConnection({self.address}, node_id={self.node_id}, connected={self.connected})"

    # ------------------------------------------------------------ versions

    async def negotiate_versions(self) -> NodeApiVersions:
        """ApiVersions at our highest version (lower if the broker does not know it); picks each API's version."""
        negotiation = ApiVersionsNegotiation(self.address)
        while negotiation.result is None:
            negotiation.received(await self.request(api_versions_request(), version=negotiation.version))
        self.versions = negotiation.result
        return self.versions

    def version_for(self, api_key: int, *, max_version: int | None = None) -> int:
        """The highest version of ``api_key`` both sides support (capped at ``max_version``)."""
        return self.versions.version_for(api_key, max_version=max_version)

    async def _authenticate(self, settings: SaslSettings) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism completes (SaslClientError if refused)."""
        client = settings.new_client()
        check_handshake(await self.request(handshake_request(settings), version=1), settings)
        token = client.evaluate(b"")
        while token is not None:
            token = client.evaluate(challenge_of(await self.request(authenticate_request(token))))

    # ------------------------------------------------------------ requests

    async def request(self, body: Message, *, version: int | None = None, timeout: float | None = None) -> Message:
        """Send one request and wait for its response (see :meth:`send`)."""
        future = self.send(body, version=version, timeout=timeout)
        await self._drain()
        return await future

    def send(self, body: Message, *, version: int | None = None, timeout: float | None = None) -> asyncio.Future[Message]:
        """Write one request now; the future completes with its response.

        ``version`` defaults to the negotiated one; ``timeout`` (seconds) to
        ``request_timeout``. Raises KafkaConnectionError when not connected.
        """
        request = self._write(body, version, expect_response=True)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Message] = loop.create_future()
        delay = self.request_timeout if timeout is None else timeout
        timer = loop.call_later(delay, self._timed_out, request, delay)
        future.add_done_callback(lambda _: timer.cancel())
        self._waiters[request.correlation_id] = _Waiter(future, timer)
        return future

    async def send_without_response(self, body: Message, *, version: int | None = None) -> None:
        """Write a request the broker never answers (Produce with acks=0)."""
        self._write(body, version, expect_response=False)
        await self._drain()

    def _write(self, body: Message, version: int | None, *, expect_response: bool) -> InFlightRequest:
        transport = self._transport
        if transport is None or transport.is_closing():
            raise KafkaConnectionError(f"{self.address}: not connected")
        spec: ApiSpec = request_spec(body)
        if version is None:
            version = self.version_for(spec.api_key)
        request, chunks = self._in_flight.add(spec, version, body, expect_response=expect_response)
        # A request's chunks are buffers: only a broker's Fetch responses carry file ranges.
        transport.writelines(cast("list[bytes | bytearray | memoryview]", chunks))
        return request

    async def _drain(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark.

        A connection lost meanwhile wakes this too; the requests' futures carry that error.
        """
        reader = self._reader
        if reader is not None and not reader.writable.is_set():
            await reader.writable.wait()

    # ------------------------------------------------------------ completion

    def _response(self, reader: _ResponseReader, frame: memoryview) -> bool:
        """Complete the oldest request with ``frame``; False if the stream broke and the connection closed."""
        if reader is not self._reader:
            return False  # a closed connection's last bytes
        try:
            request, body = self._in_flight.complete(frame)
        except CorrelationIdMismatchError as exc:
            self._fail(type(exc), str(exc))
            return False
        except ProtocolError as exc:
            self._lost(reader, f"bad response: {exc}")
            return False
        waiter = self._waiters.pop(request.correlation_id, None)
        if waiter is not None and not waiter.future.done():
            waiter.future.set_result(body)
        return True

    def _timed_out(self, request: InFlightRequest, delay: float) -> None:
        waiter = self._waiters.pop(request.correlation_id, None)
        if waiter is None or waiter.future.done():
            return
        waiter.future.set_exception(
            KafkaTimeoutError(f"{self.address}: {request.spec.name} v{request.version} (correlation id "
                              f"{request.correlation_id}) got no response within {delay:g} s")
        )
        self._fail(KafkaConnectionError, f"{self.address}: connection closed after {request.spec.name} "
                                         f"(correlation id {request.correlation_id}) timed out")

    def _lost(self, reader: _ResponseReader, why: str) -> None:
        if reader is self._reader:  # not an earlier, already closed connection of this object
            self._fail(KafkaConnectionError, f"{self.address}: {why}")

    def _fail(self, error: type[KafkaConnectionError], message: str) -> None:
        """Close the transport and fail every waiter with ``error(message)`` (idempotent)."""
        transport, self._transport, self._reader = self._transport, None, None
        if transport is not None:
            transport.close()
        self._in_flight.clear()
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.timer.cancel()
            if not waiter.future.done():
                waiter.future.set_exception(error(message))
