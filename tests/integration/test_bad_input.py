"""Bad input closes one connection, is logged once, and hurts nobody else.

Each malformed request goes to a real broker on its own connection while a
confluent-kafka producer keeps writing on another. The bad connection must be
answered with an error or closed, the broker must log it exactly once (found
by the client's port in the log), and the producer must see no error and keep
getting acknowledgements throughout.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from tests.integration.clients import ConfluentDriver
from tests.integration.wire import API_VERSIONS_KEY, encode_request, parse_api_versions_v0, read_response

UNSUPPORTED_VERSION = 35
METADATA_KEY = 3
PRODUCE_KEY = 0
SOCKET_REQUEST_MAX_BYTES = 104857600  # Kafka's default, which the broker runs with here
CLOSE_TIMEOUT_S = 5.0


def _truncated_metadata_v1() -> bytes:
    # One topic name announced as 10 bytes long, 3 present; the frame size matches what is sent.
    body = struct.pack(">ih", 1, 10) + b"abc"
    return encode_request(METADATA_KEY, 1, 5, body)


BAD_REQUESTS: dict[str, bytes] = {
    # An HTTP request: its first four bytes read as a 1.2 GB frame size.
    "garbage": b"GET / HTTP/1.1\r\nHost: pafka\r\n\r\n",
    "empty frame": struct.pack(">i", 0),
    "oversized frame": struct.pack(">i", SOCKET_REQUEST_MAX_BYTES + 1) + bytes(4096),
    "unknown api key": encode_request(9999, 0, 3),
    "unsupported version of a known api": encode_request(METADATA_KEY, 99, 4),
    # Produce v2 (served for pre-0.11 clients) whose one topic name is cut short.
    "truncated produce v2": encode_request(PRODUCE_KEY, 2, 6, struct.pack(">hiih", 1, 1000, 1, 10) + b"abc"),
    "truncated request": _truncated_metadata_v1(),
}


@dataclass
class SteadyProducer:
    """A producer writing to its own topic in a thread for as long as the test runs."""

    bootstrap: str
    acked: int = 0
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 1, "acks": 1})

        def on_delivery(err: object, msg: object) -> None:
            if err is None:
                self.acked += 1
            else:
                self.errors.append(str(err))

        deadline = time.monotonic() + 120  # bounded even if the test forgets to stop it
        seq = 0
        while not self.stop.is_set() and time.monotonic() < deadline:
            producer.produce("steady", value=b"%d" % seq, on_delivery=on_delivery)
            seq += 1
            producer.poll(0.001)
        remaining = producer.flush(30)
        if remaining:
            self.errors.append(f"{remaining} records undelivered")

    def wait_for_acks(self, count: int, timeout: float = 30.0) -> None:
        def acked() -> bool:
            assert not self.errors, self.errors[:3]
            return self.acked >= count

        wait_until(acked, timeout, "producer stalled", interval=0.01, details=lambda: f"at {self.acked} acknowledgements")


@pytest.fixture
def busy_broker() -> Iterator[tuple[BrokerProcess, SteadyProducer]]:
    with BrokerProcess() as broker:
        ConfluentDriver().create_topic(broker.bootstrap, "steady", 1)
        steady = SteadyProducer(broker.bootstrap)
        thread = threading.Thread(target=steady.run, name="steady-producer")
        thread.start()
        try:
            steady.wait_for_acks(200)
            yield broker, steady
        finally:
            steady.stop.set()
            thread.join(timeout=60)
            print(broker.log_text()[-6000:])  # shown when the test failed
        assert not steady.errors, steady.errors[:3]


def _closed_by_broker(sock: socket.socket) -> bool:
    """Drain whatever the broker sends; True once it closes the connection."""
    sock.settimeout(CLOSE_TIMEOUT_S)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def _log_lines_about(broker: BrokerProcess, port: int) -> list[str]:
    return [line for line in broker.log_text().splitlines() if f"127.0.0.1:{port}" in line]


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_request_closes_only_its_connection(busy_broker: tuple[BrokerProcess, SteadyProducer], case: str) -> None:
    broker, steady = busy_broker
    before = steady.acked
    with socket.create_connection((broker.host, broker.port), timeout=CLOSE_TIMEOUT_S) as sock:
        port = sock.getsockname()[1]
        try:
            sock.sendall(BAD_REQUESTS[case])
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed before we finished sending: also a close
        assert _closed_by_broker(sock), f"{case}: the broker kept the connection open"
    steady.wait_for_acks(before + 200)  # the other client is served all along
    lines = _log_lines_about(broker, port)
    assert len(lines) == 1, f"{case}: logged {len(lines)} times: {lines}"
    assert "Traceback" not in broker.log_text()
    # The broker still answers new connections.
    with socket.create_connection((broker.host, broker.port), timeout=CLOSE_TIMEOUT_S) as sock:
        sock.sendall(encode_request(API_VERSIONS_KEY, 0, 9))
        frame = read_response(sock)
    assert frame is not None and parse_api_versions_v0(frame).error_code == 0


def test_half_a_frame_then_a_hang_up(busy_broker: tuple[BrokerProcess, SteadyProducer]) -> None:
    broker, steady = busy_broker
    before = steady.acked
    with socket.create_connection((broker.host, broker.port), timeout=CLOSE_TIMEOUT_S) as sock:
        port = sock.getsockname()[1]
        sock.sendall(encode_request(METADATA_KEY, 1, 5, struct.pack(">i", -1))[:9])
    steady.wait_for_acks(before + 200)
    assert len(_log_lines_about(broker, port)) <= 1
    assert "Traceback" not in broker.log_text()


def test_api_versions_too_new_gets_the_v0_fallback(busy_broker: tuple[BrokerProcess, SteadyProducer]) -> None:
    broker, _ = busy_broker
    with socket.create_connection((broker.host, broker.port), timeout=CLOSE_TIMEOUT_S) as sock:
        # KIP-511: a client newer than the broker sends its own newest version,
        # with a body the broker cannot know; the header's prefix is all it reads.
        sock.sendall(encode_request(API_VERSIONS_KEY, 127, 77, body=b"\x0bfuture-lib\x061.0.0\x00"))
        fallback = read_response(sock)
        assert fallback is not None, "connection closed instead of the v0 fallback"
        # The connection stays usable: the client retries with a version we listed.
        sock.sendall(encode_request(API_VERSIONS_KEY, 0, 78))
        normal = read_response(sock)
    assert normal is not None
    reply, listed = parse_api_versions_v0(fallback), parse_api_versions_v0(normal)
    assert reply.correlation_id == 77 and reply.error_code == UNSUPPORTED_VERSION
    assert reply.api_keys == listed.api_keys
    assert reply.api_keys[API_VERSIONS_KEY] == (0, 4)
    assert {0, 1, 2, 3, 18}.issubset(reply.api_keys)
