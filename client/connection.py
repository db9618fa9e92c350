"""One blocking connection to one Kafka broker.

The connection negotiates API versions on connect (ApiVersions, then the
highest version both sides support for each API, see ``client.node_api_versions``)
and exchanges generated message objects: ``request(MetadataRequest(...))``
returns a ``MetadataResponse``. Requests may be pipelined with :meth:`send` /
:meth:`receive`; Kafka answers in request order on one connection, so every
response's correlation id must match the oldest request in flight
(``client.in_flight_requests``). The asyncio twin for broker-to-broker
traffic is ``client.async_connection``.
"""

from __future__ import annotations

import collections
import socket
import ssl
from dataclasses import dataclass

from client.errors import CorrelationIdMismatchError, KafkaConnectionError
from client.in_flight_requests import InFlightRequests, request_spec
from client.node_api_versions import ApiVersionsNegotiation, NodeApiVersions, api_versions_request
from client.sasl import (
    SaslSettings,
    authenticate_request,
    challenge_of,
    check_handshake,
    handshake_request,
)
from protocol.api import ApiSpec
from protocol.buffers import join_chunks
from protocol.errors import ProtocolError
from protocol.framing import FrameDecoder
from protocol.primitives import Message

__all__ = ["BrokerAddress", "BrokerConnection", "parse_bootstrap_servers"]

DEFAULT_CLIENT_ID = "pafka-client"
#: Refuse responses larger than this: a garbled size prefix must not make the
#: client allocate gigabytes.
MAX_RESPONSE_SIZE = 512 * 1024 * 1024

_RECV_SIZE = 256 * 1024


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_bootstrap_servers(servers: str) -> list[BrokerAddress]:
    """``"host:port,host2:port2"`` (Kafka's bootstrap.servers) as addresses.

    IPv6 literals are written in brackets: ``[::1]:9092``.
    """
    addresses = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"invalid bootstrap server {item!r}: expected HOST:PORT")
        addresses.append(BrokerAddress(host.strip("[]"), int(port)))
    if not addresses:
        raise ValueError("no bootstrap server given")
    return addresses


class BrokerConnection:
    """A blocking socket to one broker, speaking pafka's protocol codecs.

    ``timeout`` bounds every socket operation (connect, send, each receive),
    so a request whose broker-side wait is longer (a Fetch's max_wait_ms) needs
    a larger one: :meth:`request` takes ``timeout`` per call.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        timeout: float = 30.0,
        node_id: int | None = None,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslSettings | None = None,
    ) -> None:
        self.address = BrokerAddress(host, port)
        #: TLS (security.protocol SSL or SASL_SSL) when set.
        self.ssl_context = ssl_context
        #: SASL authentication after the versions are negotiated (SASL_PLAINTEXT, SASL_SSL) when set.
        self.sasl = sasl
        #: The broker's last SaslAuthenticate session_lifetime_ms (KIP-368; 0: the session never ends).
        self.session_lifetime_ms = 0
        self.client_id = client_id
        self.timeout = timeout
        self.node_id = node_id
        #: What the broker supports and the version used for each API (set on connect).
        self.versions = NodeApiVersions()
        self._sock: socket.socket | None = None
        self._in_flight = InFlightRequests(client_id, self.address)
        self._frames: collections.deque[memoryview] = collections.deque()
        self._decoder = FrameDecoder(MAX_RESPONSE_SIZE)
        self._recv_buf = bytearray(_RECV_SIZE)

    # ------------------------------------------------------------ lifecycle

    def connect(self) -> BrokerConnection:
        """Open the socket and negotiate API versions; returns self."""
        if self._sock is not None:
            return self
        try:
            sock = socket.create_connection((self.address.host, self.address.port), timeout=self.timeout)
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {self.address}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            try:
                sock = self.ssl_context.wrap_socket(sock, server_hostname=self.address.host)
            except OSError as exc:
                sock.close()
                raise KafkaConnectionError(f"TLS handshake with {self.address} failed: {exc}") from exc
        self._sock = sock
        self._frames.clear()
        self._decoder = FrameDecoder(MAX_RESPONSE_SIZE)
        try:
            self._negotiate_versions()
            if self.sasl is not None:
                self._authenticate(self.sasl)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self._in_flight.clear()
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def __enter__(self) -> BrokerConnection:
        return self.connect()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BrokerConnection({self.address}, node_id={self.node_id}, connected={self.connected})"

    # ------------------------------------------------------------ versions

    def _negotiate_versions(self) -> None:
        """ApiVersions at our highest version, asked again lower if the broker does not know it."""
        negotiation = ApiVersionsNegotiation(self.address)
        while negotiation.result is None:
            negotiation.received(self.request(api_versions_request(), version=negotiation.version))
        self.versions = negotiation.result

    def _authenticate(self, settings: SaslSettings) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism completes (SaslClientError if refused)."""
        client = settings.new_client()
        check_handshake(self._answer(handshake_request(settings), 1), settings)
        token = client.evaluate(b"")
        while token is not None:
            response = self._answer(authenticate_request(token), None)
            token = client.evaluate(challenge_of(response))
            self.session_lifetime_ms = getattr(response, "session_lifetime_ms", 0)

    def reauthenticate(self) -> None:
        """KIP-368: authenticate again on this connection before its session ends."""
        assert self.sasl is not None, "not a SASL connection"
        self._authenticate(self.sasl)

    def _answer(self, body: Message, version: int | None) -> Message:
        response = self.request(body, version=version)
        assert response is not None
        return response

    @property
    def broker_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's (min, max) version for each API key it advertises."""
        return self.versions.broker_versions

    @property
    def api_versions(self) -> dict[int, int]:
        """The version this connection uses for each API both sides support."""
        return self.versions.api_versions

    def version_for(self, api_key: int, *, max_version: int | None = None) -> int:
        """The version to use for ``api_key`` (capped at ``max_version``)."""
        return self.versions.version_for(api_key, max_version=max_version)

    # ------------------------------------------------------------ requests

    def request(
        self,
        body: Message,
        *,
        version: int | None = None,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> Message | None:
        """Send one request and wait for its response (None if none is expected).

        Requests already in flight (pipelined with :meth:`send`) are answered
        first; call :meth:`receive` for them before using this.
        """
        if self._in_flight:
            raise RuntimeError("request() with pipelined requests in flight; receive() them first")
        correlation_id = self.send(body, version=version, expect_response=expect_response)
        if not expect_response:
            return None
        got, response = self.receive(timeout=timeout)
        assert got == correlation_id
        return response

    def send(self, body: Message, *, version: int | None = None, expect_response: bool = True) -> int:
        """Write one request without waiting; returns its correlation id.

        ``expect_response=False`` is only for requests the broker never answers
        (Produce with acks=0).
        """
        spec = request_spec(body)
        if version is None:
            version = self.version_for(spec.api_key)
        return self._write(spec, version, body, expect_response)

    def receive(self, *, timeout: float | None = None) -> tuple[int, Message]:
        """The response to the oldest request in flight: (correlation id, body)."""
        if not self._in_flight:
            raise RuntimeError("no request in flight")
        frame = self._read_frame(timeout)
        try:
            request, body = self._in_flight.complete(frame)
        except (ProtocolError, CorrelationIdMismatchError):
            self.close()
            raise
        return request.correlation_id, body

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # ------------------------------------------------------------ socket I/O

    def _require_socket(self) -> socket.socket:
        if self._sock is None:
            raise KafkaConnectionError(f"{self.address}: not connected")
        return self._sock

    def _write(self, spec: ApiSpec, version: int, body: Message, expect_response: bool) -> int:
        sock = self._require_socket()
        request, chunks = self._in_flight.add(spec, version, body, expect_response=expect_response)
        try:
            sock.settimeout(self.timeout)
            sock.sendall(join_chunks(chunks))
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"{self.address}: send failed: {exc}") from exc
        return request.correlation_id

    def _read_frame(self, timeout: float | None = None) -> memoryview:
        """The next response frame (without its size prefix)."""
        sock = self._require_socket()
        view = memoryview(self._recv_buf)
        try:
            sock.settimeout(self.timeout if timeout is None else timeout)
            while not self._frames:
                n = sock.recv_into(self._recv_buf)
                if n == 0:
                    raise KafkaConnectionError(f"{self.address}: connection closed by the broker")
                # Frames are copied out of the receive buffer, so it is reused.
                self._frames.extend(self._decoder.feed(view[:n]))
        except OSError as exc:  # socket.timeout is an OSError
            self.close()
            raise KafkaConnectionError(f"{self.address}: receive failed: {exc!r}") from exc
        except ProtocolError as exc:
            self.close()
            raise KafkaConnectionError(f"{self.address}: bad response frame: {exc}") from exc
        except KafkaConnectionError:
            self.close()
            raise
        finally:
            view.release()
        return self._frames.popleft()
