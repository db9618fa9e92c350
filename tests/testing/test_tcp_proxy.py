"""pytest_pafka.tcp_proxy: each mode, each direction, over a real echo server on loopback."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from pytest_pafka.tcp_proxy import Direction, Mode, TcpProxy, kafka_client_source


class EchoServer:
    """Echoes every byte back; counts what it received."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.received = 0
        self.stopped = False
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._echo, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _echo(self, conn: socket.socket) -> None:
        conn.settimeout(0.05)
        with conn:
            while not self.stopped:
                try:
                    data = conn.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                self.received += len(data)
                conn.sendall(data)

    def close(self) -> None:
        self.stopped = True
        self.listener.close()
        for thread in self.threads:
            thread.join(timeout=5)


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[TcpProxy]:
    with TcpProxy(("127.0.0.1", echo.port)) as p:
        yield p


def _connect(proxy: TcpProxy) -> socket.socket:
    return socket.create_connection((proxy.host, proxy.port), timeout=5)


def _recv(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    return got


def _silent(sock: socket.socket, seconds: float = 0.2) -> bool:
    """Nothing arrives (and the connection stays open) for ``seconds``."""
    sock.settimeout(seconds)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    finally:
        sock.settimeout(5)
    return False


def test_pass_forwards_both_ways(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"hello")
        assert _recv(sock, 5) == b"hello"
        assert proxy.connections == 1


def test_hold_then_release_keeps_order(proxy: TcpProxy, echo: EchoServer) -> None:
    with _connect(proxy) as sock:
        proxy.set(Direction.UPSTREAM, Mode.HOLD)
        sock.sendall(b"one-")
        sock.sendall(b"two")
        assert proxy.wait_held(Direction.UPSTREAM, 7) == 7
        assert _silent(sock) and echo.received == 0
        assert proxy.release(Direction.UPSTREAM) == 7
        assert _recv(sock, 7) == b"one-two"
        assert proxy.mode(Direction.UPSTREAM) == (Mode.PASS, 0)


def test_hold_downstream_holds_answers_only(proxy: TcpProxy, echo: EchoServer) -> None:
    with _connect(proxy) as sock:
        proxy.set(Direction.DOWNSTREAM, Mode.HOLD)
        sock.sendall(b"ping")
        proxy.wait_held(Direction.DOWNSTREAM, 4)
        assert echo.received == 4  # the request went through; its answer waits
        assert _silent(sock)
        proxy.release(Direction.DOWNSTREAM)
        assert _recv(sock, 4) == b"ping"


def test_blackhole_discards(proxy: TcpProxy, echo: EchoServer) -> None:
    with _connect(proxy) as sock:
        proxy.set(Direction.UPSTREAM, Mode.BLACKHOLE)
        sock.sendall(b"lost")
        assert _silent(sock)
        assert echo.received == 0 and proxy.held_bytes(Direction.UPSTREAM) == 0
        proxy.set(Direction.UPSTREAM, Mode.PASS)
        sock.sendall(b"kept")
        assert _recv(sock, 4) == b"kept"


def test_delay(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        proxy.set(Direction.DOWNSTREAM, Mode.DELAY, delay_ms=300)
        started = time.monotonic()
        sock.sendall(b"slow")
        assert _recv(sock, 4) == b"slow"
        assert 0.3 <= time.monotonic() - started < 3


def test_close_mode_and_drop_close_connections(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        proxy.set(Direction.UPSTREAM, Mode.CLOSE)
        sock.sendall(b"x")
        assert _recv(sock, 1) == b""  # closed instead of forwarded
    proxy.set(Direction.UPSTREAM, Mode.PASS)
    with _connect(proxy) as sock:
        sock.sendall(b"y")
        assert _recv(sock, 1) == b"y"
        proxy.drop()
        assert _recv(sock, 1) == b""
    with _connect(proxy) as sock:  # still accepting after a drop
        sock.sendall(b"z")
        assert _recv(sock, 1) == b"z"


def test_close_ends_the_listener(echo: EchoServer) -> None:
    proxy = TcpProxy(("127.0.0.1", echo.port))
    with _connect(proxy) as sock:
        sock.sendall(b"a")
        assert _recv(sock, 1) == b"a"
        proxy.close()
        assert _recv(sock, 1) == b""
    with pytest.raises(OSError):
        socket.create_connection((proxy.host, proxy.port), timeout=1).close()


def _kafka_header(client_id: str) -> bytes:
    """A Kafka request header as far as the client id (ApiVersions v3, correlation id 1)."""
    raw = client_id.encode()
    return struct.pack(">ihhih", 10 + len(raw), 18, 3, 1, len(raw)) + raw


def test_kafka_client_source_names_pafka_brokers_and_waits_for_a_whole_header() -> None:
    assert kafka_client_source(_kafka_header("broker-2-fetcher-0")) == "broker-2"
    assert kafka_client_source(_kafka_header("controller-12")) == "broker-12"
    assert kafka_client_source(_kafka_header("rdkafka")) == "rdkafka"
    assert kafka_client_source(_kafka_header("broker-2-fetcher-0")[:15]) is None


def test_a_mode_set_for_one_source_applies_to_its_connections_only(echo: EchoServer) -> None:
    with TcpProxy(("127.0.0.1", echo.port), classify=kafka_client_source) as proxy:
        proxy.set(Direction.UPSTREAM, Mode.BLACKHOLE, source="broker-2")
        with _connect(proxy) as cut, _connect(proxy) as kept:
            cut.sendall(_kafka_header("broker-2-fetcher-0"))
            kept.sendall(_kafka_header("controller-3"))
            header = _kafka_header("controller-3")
            assert _recv(kept, len(header)) == header
            assert _silent(cut, 0.3)
            # Healed: the same connection carries broker 2's bytes again.
            proxy.set(Direction.UPSTREAM, Mode.PASS, source="broker-2")
            cut.sendall(b"again")
            assert _recv(cut, 5) == b"again"

