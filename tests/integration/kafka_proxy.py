"""A loopback TCP proxy that understands Kafka framing, for injected faults.

Clients connect to the proxy (the broker advertises the proxy's address, so
every connection goes through it); each connection is forwarded frame by frame
to the broker. The proxy remembers each request's API key by correlation id,
so it can lose exactly the response that hurts: ``drop_produce_responses(n)``
lets the broker append the next ``n`` Produce requests and then, instead of
forwarding their responses, cuts the client's connection mid-stream. The
client cannot know whether its batch was written and must retry it.
``cut_produce_requests(n)`` forwards half of each of the next ``n`` Produce
requests and cuts the connection: the broker sees a truncated frame.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

from testing.sockets import read_frame

PRODUCE_KEY = 0


def _read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame, prefix included; None when the peer is gone."""
    try:
        body = read_frame(sock)
    except OSError:  # closed, reset, or shut down by the other pump
        return None
    return struct.pack(">i", len(body)) + body


class _Link:
    """One proxied connection: client <-> broker, two pump threads."""

    def __init__(self, proxy: KafkaProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.api_keys: dict[int, int] = {}  # correlation id -> api key of requests in flight
        self.closed = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._requests, daemon=True, name="proxy-c2b").start()
        threading.Thread(target=self._responses, daemon=True, name="proxy-b2c").start()

    def _requests(self) -> None:
        while not self.closed.is_set():
            frame = _read_frame(self.client)
            if frame is None:
                break
            if len(frame) >= 12:
                api_key, _version, correlation_id = struct.unpack_from(">hhi", frame, 4)
                self.api_keys[correlation_id] = api_key
                if api_key == PRODUCE_KEY and self.proxy._take_request_cut():
                    # Half a request reaches the broker, then the connection dies.
                    try:
                        self.upstream.sendall(frame[: len(frame) // 2])
                    except OSError:
                        pass
                    self.close()
                    self.proxy._dropped()
                    return
            try:
                self.upstream.sendall(frame)
            except OSError:
                break
        self.close()

    def _responses(self) -> None:
        while not self.closed.is_set():
            frame = _read_frame(self.upstream)
            if frame is None:
                break
            (correlation_id,) = struct.unpack_from(">i", frame, 4)
            api_key = self.api_keys.pop(correlation_id, None)
            if api_key == PRODUCE_KEY and self.proxy._take_drop():
                # The broker has appended this batch; the client never hears so.
                self.close()
                self.proxy._dropped()
                return
            try:
                self.client.sendall(frame)
            except OSError:
                break
        self.close()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class KafkaProxy:
    """Listens on a free loopback port and forwards to ``upstream_port``."""

    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.upstream_port = upstream_port
        self._listener = socket.create_server((host, 0))
        self._listener.settimeout(0.1)  # so stop() is noticed: close() does not wake accept()
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._drops_armed = 0
        self._request_cuts_armed = 0
        self.drops_done = 0
        self.connections_refused = 0
        self.on_drop: Callable[[], None] | None = None
        self._links: list[_Link] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="proxy-accept")

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __enter__(self) -> KafkaProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def drop_produce_responses(self, count: int) -> None:
        with self._lock:
            self._drops_armed += count

    def cut_produce_requests(self, count: int) -> None:
        """Forward only the first half of the next ``count`` Produce requests, then cut."""
        with self._lock:
            self._request_cuts_armed += count

    @property
    def drops_pending(self) -> int:
        with self._lock:
            return self._drops_armed + self._request_cuts_armed

    def cut_all(self) -> None:
        """Close every proxied connection now."""
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()
        self.cut_all()
        self._thread.join(timeout=5)

    def _take_request_cut(self) -> bool:
        with self._lock:
            if self._request_cuts_armed <= 0:
                return False
            self._request_cuts_armed -= 1
            return True

    def _take_drop(self) -> bool:
        with self._lock:
            if self._drops_armed <= 0:
                return False
            self._drops_armed -= 1
            return True

    def _dropped(self) -> None:
        with self._lock:
            self.drops_done += 1
        if self.on_drop is not None:
            self.on_drop()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection((self.host, self.upstream_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                # Broker down (a restart in progress): the client sees a closed connection.
                self.connections_refused += 1
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, upstream)
            with self._lock:
                self._links = [*(other for other in self._links if not other.closed.is_set()), link]
            link.start()
