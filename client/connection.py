"""One blocking connection to one Kafka broker.

The connection negotiates API versions on connect (ApiVersions, then the
highest version both sides support for each API) and exchanges generated
message objects: ``request(MetadataRequest(...))`` returns a
``MetadataResponse``. Requests may be pipelined with :meth:`send` /
:meth:`receive`; Kafka answers in request order on one connection, so every
response's correlation id must match the oldest request in flight.
"""

from __future__ import annotations

import collections
import socket
from dataclasses import dataclass

from protocol.api import API_VERSIONS_KEY, APIS, ApiSpec, decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.errors import ErrorCode, ProtocolError
from protocol.framing import FrameDecoder
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.primitives import Message

from client.errors import (
    CorrelationIdMismatchError,
    KafkaConnectionError,
    NoCompatibleVersionError,
    check_error,
)

__all__ = ["BrokerAddress", "BrokerConnection", "parse_bootstrap_servers"]

DEFAULT_CLIENT_ID = "pafka-client"
CLIENT_SOFTWARE_NAME = "pafka-client"
CLIENT_SOFTWARE_VERSION = "0.1.0"
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


@dataclass(frozen=True, slots=True)
class _InFlight:
    correlation_id: int
    spec: ApiSpec
    version: int


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
    ) -> None:
        self.address = BrokerAddress(host, port)
        self.client_id = client_id
        self.timeout = timeout
        self.node_id = node_id
        #: The broker's (min, max) version for each API key it advertises.
        self.broker_versions: dict[int, tuple[int, int]] = {}
        #: The version this connection uses for each API both sides support.
        self.api_versions: dict[int, int] = {}
        self._sock: socket.socket | None = None
        self._next_correlation_id = 0
        self._in_flight: collections.deque[_InFlight] = collections.deque()
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
        self._sock = sock
        self._frames.clear()
        self._decoder = FrameDecoder(MAX_RESPONSE_SIZE)
        try:
            self._negotiate_versions()
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
        """ApiVersions at our highest version, falling back as KIP-511 describes.

        A broker that does not know our ApiVersions version answers with
        UNSUPPORTED_VERSION in a v0 body listing its own range; we retry at the
        highest version both sides have.
        """
        spec = APIS[API_VERSIONS_KEY]
        version = spec.versions.stop - 1
        for _ in range(2):
            response = self._api_versions_round_trip(spec, version)
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
                theirs = {k.api_key: k.max_version for k in response.api_keys}
                fallback = min(theirs.get(API_VERSIONS_KEY, 0), spec.versions.stop - 1)
                if fallback >= version:
                    break
                version = fallback
                continue
            check_error(response.error_code, api_name="ApiVersions")
            self._choose_versions(response)
            return
        raise KafkaConnectionError(f"{self.address}: ApiVersions negotiation failed")

    def _api_versions_round_trip(self, spec: ApiSpec, version: int) -> ApiVersionsResponse:
        request = ApiVersionsRequest(
            client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=CLIENT_SOFTWARE_VERSION
        )
        correlation_id = self._write(spec, version, request)
        frame = self._read_frame()
        try:
            got, body = decode_response(spec.api_key, version, frame)
        except ProtocolError:
            # The UNSUPPORTED_VERSION fallback reply is always encoded as v0.
            got, body = decode_response(spec.api_key, 0, frame)
        if got != correlation_id:
            self.close()
            raise CorrelationIdMismatchError(f"{self.address}: expected correlation id {correlation_id}, got {got}")
        assert isinstance(body, ApiVersionsResponse)
        return body

    def _choose_versions(self, response: ApiVersionsResponse) -> None:
        self.broker_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        chosen = {}
        for api_key, (low, high) in self.broker_versions.items():
            spec = APIS.get(api_key)
            if spec is None:
                continue
            top = min(high, spec.versions.stop - 1)
            if top >= max(low, spec.versions.start):
                chosen[api_key] = top
        self.api_versions = chosen

    def version_for(self, api_key: int, *, max_version: int | None = None) -> int:
        """The version to use for ``api_key`` (capped at ``max_version``)."""
        version = self.api_versions.get(api_key)
        spec = APIS[api_key]
        if version is None:
            raise NoCompatibleVersionError(spec.name, self.broker_versions.get(api_key), spec.versions)
        if max_version is not None and max_version < version:
            low = max(self.broker_versions[api_key][0], spec.versions.start)
            if max_version < low:
                raise NoCompatibleVersionError(spec.name, self.broker_versions.get(api_key), spec.versions)
            version = max_version
        return version

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
        api_key = getattr(type(body), "API_KEY", None)
        spec = APIS.get(api_key) if api_key is not None else None
        if spec is None or spec.request is not type(body):
            raise TypeError(f"{type(body).__name__} is not a request message")
        if version is None:
            version = self.version_for(spec.api_key)
        correlation_id = self._write(spec, version, body)
        if expect_response:
            self._in_flight.append(_InFlight(correlation_id, spec, version))
        return correlation_id

    def receive(self, *, timeout: float | None = None) -> tuple[int, Message]:
        """The response to the oldest request in flight: (correlation id, body)."""
        if not self._in_flight:
            raise RuntimeError("no request in flight")
        expected = self._in_flight[0]
        frame = self._read_frame(timeout)
        try:
            correlation_id, body = decode_response(expected.spec.api_key, expected.version, frame)
        except ProtocolError:
            self.close()
            raise
        if correlation_id != expected.correlation_id:
            self.close()
            raise CorrelationIdMismatchError(
                f"{self.address}: {expected.spec.name} response has correlation id {correlation_id}, "
                f"expected {expected.correlation_id}"
            )
        self._in_flight.popleft()
        return correlation_id, body

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # ------------------------------------------------------------ socket I/O

    def _require_socket(self) -> socket.socket:
        if self._sock is None:
            raise KafkaConnectionError(f"{self.address}: not connected")
        return self._sock

    def _write(self, spec: ApiSpec, version: int, body: Message) -> int:
        sock = self._require_socket()
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = join_chunks(encode_request(spec.api_key, version, correlation_id, self.client_id, body))
        try:
            sock.settimeout(self.timeout)
            sock.sendall(frame)
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"{self.address}: send failed: {exc}") from exc
        return correlation_id

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
