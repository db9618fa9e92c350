"""A TCP proxy a test controls: one listening address in front of one target, faults per direction.

Put it between a client and a broker to make a network fault happen exactly
when the test wants it::

    with TcpProxy((broker.host, broker.port)) as proxy:
        proxy.set(Direction.UPSTREAM, Mode.HOLD)       # requests stop at the proxy
        ... send a request to (proxy.host, proxy.port) ...
        proxy.wait_held(Direction.UPSTREAM, 1)          # it has arrived and is held
        ... make the world move on ...
        proxy.release(Direction.UPSTREAM)               # now it reaches the broker

Each direction (UPSTREAM: client to target, DOWNSTREAM: target to client) has
a mode, applied to every connection through the proxy:

* PASS: bytes are forwarded as they arrive;
* DELAY: each chunk is forwarded ``delay_ms`` after it arrived (order kept);
* HOLD: bytes are kept, in order, until ``release`` forwards them;
* BLACKHOLE: bytes are read and thrown away (the connection stays open);
* CLOSE: the connection is closed (both ways) when bytes arrive.

A proxy given a ``classify`` function names the *source* of each connection
from its first bytes (``kafka_client_source`` reads the client id of a Kafka
request: ``broker-2-fetcher-0`` and ``controller-2`` are both "broker-2"), and a
mode set for one source applies to that source's connections only: one proxy
in front of a broker's inter-broker listener then controls every link from
another broker to it, each on its own.

``drop()`` closes every open connection at once. The proxy runs on its own
threads (blocking sockets), so it serves synchronous and asyncio tests alike;
it binds an OS-chosen free port on a loopback address and is closed by the
``with`` block (or ``close()``), which ends its threads and connections.
"""

from __future__ import annotations

import enum
import re
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from types import TracebackType

_CHUNK = 1 << 16
_POLL_S = 0.05  # how often a blocked thread checks for close


class Direction(enum.Enum):
    UPSTREAM = "client to target"
    DOWNSTREAM = "target to client"


class Mode(enum.Enum):
    PASS = "pass"
    DELAY = "delay"
    HOLD = "hold"
    BLACKHOLE = "blackhole"
    CLOSE = "close"


#: A Kafka request header's first fields: size, api key, api version, correlation id, client id length.
_KAFKA_HEADER = struct.Struct(">ihhih")
_BROKER_CLIENT_ID = re.compile(r"^(?:broker|controller)-(\d+)\b")


def kafka_client_source(first_bytes: bytes) -> str | None:
    """The source of a Kafka connection from its first request: "broker-N" for pafka's
    inter-broker clients (client ids ``broker-N-...`` and ``controller-N``), else the client id;
    None while the header is not complete yet."""
    if len(first_bytes) < _KAFKA_HEADER.size:
        return None
    *_, length = _KAFKA_HEADER.unpack_from(first_bytes)
    end = _KAFKA_HEADER.size + max(length, 0)
    if len(first_bytes) < end:
        return None
    client_id = first_bytes[_KAFKA_HEADER.size:end].decode(errors="replace")
    match = _BROKER_CLIENT_ID.match(client_id)
    return f"broker-{match.group(1)}" if match else client_id


class _Link:
    """One client connection and its connection to the target."""

    def __init__(self, proxy: TcpProxy, client: socket.socket, target: socket.socket) -> None:
        self.proxy = proxy
        self.sockets = {Direction.UPSTREAM: (client, target), Direction.DOWNSTREAM: (target, client)}
        self.held: dict[Direction, list[bytes]] = {d: [] for d in Direction}
        self.closed = False
        #: Who is at the client end, once ``classify`` has told (None: not known or not asked).
        self.source: str | None = None
        self._head = b""
        self.threads = [threading.Thread(target=self._pump, args=(d,), daemon=True,
                                         name=f"tcp-proxy-{d.name.lower()}") for d in Direction]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _pump(self, direction: Direction) -> None:
        source, _ = self.sockets[direction]
        try:
            while not self.closed:
                readable, _, _ = select.select([source], [], [], _POLL_S)
                if not readable:
                    continue
                data = source.recv(_CHUNK)
                if not data:
                    break
                self._forward(direction, data)
        except (OSError, ValueError):  # closed under us (ValueError: select on a closed socket)
            pass
        finally:
            self.close()

    def _forward(self, direction: Direction, data: bytes) -> None:
        classify = self.proxy.classify
        if classify is not None and self.source is None and direction is Direction.UPSTREAM:
            self._head += data
            self.source = classify(self._head)
        mode, delay_ms = self.proxy.mode(direction, self.source)
        if mode is Mode.DELAY:
            time.sleep(delay_ms / 1000)  # per chunk, on this direction's thread: order is kept
        with self.proxy.lock:
            mode, _ = self.proxy.mode(direction, self.source)  # re-read: a release may have run meanwhile
            if mode is Mode.HOLD:
                self.held[direction].append(data)
                self.proxy.changed.notify_all()
                return
        if mode is Mode.BLACKHOLE:
            return
        if mode is Mode.CLOSE:
            self.close()
            return
        self.send(direction, data)

    def send(self, direction: Direction, data: bytes) -> None:
        _, destination = self.sockets[direction]
        destination.sendall(data)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for sock in self.sockets[Direction.UPSTREAM]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class TcpProxy:
    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1",
                 classify: Callable[[bytes], str | None] | None = None) -> None:
        self.target = target
        self.classify = classify
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self._modes: dict[Direction, tuple[Mode, int]] = dict.fromkeys(Direction, (Mode.PASS, 0))
        #: (source, direction) -> mode, over the proxy-wide one for that source's connections.
        self._source_modes: dict[tuple[str, Direction], tuple[Mode, int]] = {}
        self._links: list[_Link] = []
        self._closed = threading.Event()
        self._listener = socket.create_server((host, 0))
        self._listener.settimeout(_POLL_S)
        self.host: str = host
        self.port: int = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name="tcp-proxy-accept")
        self._acceptor.start()

    # -- control -----------------------------------------------------------------------------
    def set(self, direction: Direction, mode: Mode, delay_ms: int = 0, source: str | None = None) -> None:
        """Apply ``mode`` to ``direction`` from now on (bytes already held stay held); with
        ``source``, only to the connections ``classify`` says come from it (PASS: back to the
        proxy-wide mode)."""
        with self.lock:
            if source is None:
                self._modes[direction] = (mode, delay_ms)
            elif mode is Mode.PASS:
                self._source_modes.pop((source, direction), None)
            else:
                self._source_modes[(source, direction)] = (mode, delay_ms)

    def mode(self, direction: Direction, source: str | None = None) -> tuple[Mode, int]:
        if source is not None:
            found = self._source_modes.get((source, direction))
            if found is not None:
                return found
        return self._modes[direction]

    def release(self, direction: Direction) -> int:
        """Forward every byte held in ``direction``, in order, and PASS from now on; how many."""
        with self.lock:
            released = 0
            for link in self._links:
                held, link.held[direction] = link.held[direction], []
                for data in held:
                    if not link.closed:
                        link.send(direction, data)
                        released += len(data)
            self._modes[direction] = (Mode.PASS, 0)
            return released

    def held_bytes(self, direction: Direction) -> int:
        with self.lock:
            return sum(len(data) for link in self._links for data in link.held[direction])

    def wait_held(self, direction: Direction, at_least: int = 1, timeout: float = 10.0) -> int:
        """Wait until ``at_least`` bytes are held in ``direction``; how many are."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                held = sum(len(data) for link in self._links for data in link.held[direction])
                if held >= at_least:
                    return held
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{held} bytes held {direction.value} after {timeout}s, wanted {at_least}")
                self.changed.wait(remaining)

    def drop(self) -> None:
        """Close every connection open now (held bytes are lost); new ones are still accepted."""
        with self.lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    @property
    def connections(self) -> int:
        with self.lock:
            return sum(not link.closed for link in self._links)

    # -- lifecycle ---------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                target = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()  # the target is down: the client sees its connection closed
                continue
            for sock in (client, target):
                sock.settimeout(None)  # blocking sends; the pumps poll with select to notice close
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, target)
            with self.lock:
                if self._closed.is_set():
                    link.close()
                    return
                self._links.append(link)
            link.start()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        self._acceptor.join(timeout=5)
        with self.lock:
            links = list(self._links)
        self.drop()
        for link in links:
            for thread in link.threads:
                if thread is not threading.current_thread():
                    thread.join(timeout=5)
        with self.lock:
            self.changed.notify_all()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
