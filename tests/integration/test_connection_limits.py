"""Connection limits on a real broker process (KIP-306, KIP-402, KIP-612), over loopback.

* max.connections.per.ip: a client from 127.0.0.2 past its limit is closed at once while its first
  connections keep being served, and a confluent-kafka producer and consumer from 127.0.0.1 (given a
  high limit by max.connections.per.ip.overrides) produce and consume meanwhile; the overrides
  change live through IncrementalAlterConfigs.
* max.connections: a connection beyond the limit is not served until another closes.
* max.connection.creation.rate: connections beyond the rate are spaced out by the acceptor.
* the inter-broker listener goes past max.connections, closing the least recently used client
  connection (KIP-402).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ResourceType
from confluent_kafka.admin import ConfigResource as CResource

from client.connection import BrokerConnection
from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.messages.api_versions import ApiVersionsRequest
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port
from pytest_pafka.waiting import WaitTimeout, wait_until
from testing.sockets import ConnectionClosed, HasAddress, read_frame
from tests.integration.client_round_trips import create_topic

HOST = "127.0.0.1"
OTHER_HOST = "127.0.0.2"
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Endpoint:
    """A listener's address (the broker's other listener)."""

    host: str
    port: int


class RawClient:
    """A blocking loopback connection from a chosen source address, speaking ApiVersions."""

    def __init__(self, broker: HasAddress, source: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT_S)
        self.sock.bind((source, 0))
        self.sock.connect((broker.host, broker.port))
        self.correlation_id = 0

    def ask(self) -> None:
        self.correlation_id += 1
        body = ApiVersionsRequest(client_software_name="pafka-tests", client_software_version="1.0")
        self.sock.sendall(join_chunks(encode_request(18, 3, self.correlation_id, "pafka-tests", body)))

    def answer(self, timeout: float = TIMEOUT_S) -> int:
        self.sock.settimeout(timeout)
        correlation_id, response = decode_response(18, 3, read_frame(self.sock))
        assert response.error_code == 0
        return correlation_id

    def served(self) -> bool:
        self.ask()
        return self.answer() == self.correlation_id

    def closed_by_broker(self) -> bool:
        """The broker closed it: end of stream (or a reset), within the timeout."""
        self.sock.settimeout(TIMEOUT_S)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def clients() -> Iterator[list[RawClient]]:
    """Raw clients a test opens; all closed at the end, whatever happened."""
    opened: list[RawClient] = []
    yield opened
    for client in opened:
        client.close()


def _open(clients: list[RawClient], broker: HasAddress, source: str = HOST) -> RawClient:
    client = RawClient(broker, source)
    clients.append(client)
    return client


def _wait_for_log(broker: BrokerProcess, text: str, count: int = 1) -> bool:
    with contextlib.suppress(WaitTimeout):
        return wait_until(lambda: broker.log_text().count(text) >= count, TIMEOUT_S, f"{text!r} in the log")
    return False


# -- max.connections.per.ip ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def per_ip_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess("max.connections.per.ip=3", f"max.connections.per.ip.overrides={HOST}:1000") as broker:
        yield broker
        print(broker.log_text()[-6000:])  # shown only when a test failed


class ProduceConsumeLoop(threading.Thread):
    """A confluent-kafka producer and consumer from 127.0.0.1, producing one record and polling the
    consumer in turn until stopped (bounded in records and time), then reading up to the last one."""

    def __init__(self, bootstrap: str, topic: str, max_records: int = 20_000, deadline_s: float = 60.0) -> None:
        super().__init__(name="produce-consume-loop")
        self.bootstrap, self.topic = bootstrap, topic
        self.max_records, self.deadline = max_records, time.monotonic() + deadline_s
        self.stopping = threading.Event()
        self.produced: list[bytes] = []
        self.consumed: list[bytes] = []
        self.errors: list[str] = []

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 2})
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "per-ip-unused",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            while not self.stopping.is_set() and len(self.produced) < self.max_records and self._in_time():
                value = f"record-{len(self.produced)}".encode()
                producer.produce(self.topic, value=value, on_delivery=self._delivered)
                self.produced.append(value)
                producer.poll(0)
                self._consume(consumer, 0.01)
            if producer.flush(30) != 0:
                self.errors.append("records left unsent")
            while len(self.consumed) < len(self.produced) and self._in_time():
                self._consume(consumer, 0.2)
        except BaseException as exc:
            self.errors.append(repr(exc))
        finally:
            consumer.close()

    def _in_time(self) -> bool:
        return time.monotonic() < self.deadline

    def _delivered(self, err: object, _message: object) -> None:
        if err is not None:
            self.errors.append(str(err))

    def _consume(self, consumer: Consumer, timeout: float) -> None:
        message = consumer.poll(timeout)
        if message is not None:
            if message.error() is not None:
                self.errors.append(str(message.error()))
            else:
                self.consumed.append(message.value())

    def wait_consumed(self, count: int) -> bool:
        while len(self.consumed) < count and self._in_time() and self.is_alive():
            time.sleep(0.02)
        return len(self.consumed) >= count


def test_a_client_over_max_connections_per_ip_is_refused_while_others_connect(
        per_ip_broker: BrokerProcess, clients: list[RawClient]) -> None:
    broker = per_ip_broker
    topic = "per-ip-limits"
    create_topic(broker.bootstrap, topic)
    # A real producer and consumer from 127.0.0.1 run throughout, on their own thread.
    loop = ProduceConsumeLoop(broker.bootstrap, topic)
    loop.start()
    try:
        assert loop.wait_consumed(20)
        first_three = [_open(clients, broker, OTHER_HOST) for _ in range(3)]
        assert all(client.served() for client in first_three)
        fourth = _open(clients, broker, OTHER_HOST)
        assert fourth.closed_by_broker()
        assert _wait_for_log(broker, f"Rejected connection from {OTHER_HOST}, address already has the configured "
                                     "maximum of 3 connections.")
        assert all(client.served() for client in first_three)  # the first three are untouched
        # 127.0.0.1 (its override) is not limited to 3: several raw connections on top of the clients'.
        locals_ = [_open(clients, broker) for _ in range(5)]
        assert all(client.served() for client in locals_)
        assert loop.is_alive()  # still producing and consuming, past the refusal
        assert loop.wait_consumed(len(loop.consumed) + 20)
    finally:
        loop.stopping.set()
        loop.join(60)
    assert not loop.is_alive() and not loop.errors, loop.errors
    assert loop.consumed == loop.produced and len(loop.produced) >= 40
    # A slot given back is usable again by the same address (once the broker has seen the close).
    first_three[0].close()
    assert _served_within_retries(clients, broker, OTHER_HOST)


def _served_within_retries(clients: list[RawClient], broker: BrokerProcess, source: str, attempts: int = 20) -> bool:
    for _ in range(attempts):
        client = _open(clients, broker, source)
        try:
            client.ask()
            return client.answer(timeout=TIMEOUT_S) == client.correlation_id
        except (ConnectionError, OSError):
            time.sleep(0.1)  # refused: the broker had not yet counted the close
    return False


def test_per_ip_overrides_change_live(per_ip_broker: BrokerProcess, clients: list[RawClient]) -> None:
    broker = per_ip_broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def alter(operation: AlterConfigOpType, value: str | None) -> None:
        entry = ConfigEntry("max.connections.per.ip.overrides", value, incremental_operation=operation)
        futures = admin.incremental_alter_configs([CResource(ResourceType.BROKER, "0", incremental_configs=[entry])])
        next(iter(futures.values())).result(TIMEOUT_S)

    alter(AlterConfigOpType.SET, f"{HOST}:1000,127.0.0.3:1")
    try:
        first = _open(clients, broker, "127.0.0.3")
        assert first.served()
        assert _open(clients, broker, "127.0.0.3").closed_by_broker()
        assert first.served()
    finally:
        alter(AlterConfigOpType.DELETE, None)


# -- max.connections ----------------------------------------------------------------------------------------
def test_a_connection_beyond_max_connections_is_served_once_another_closes(clients: list[RawClient]) -> None:
    with BrokerProcess("max.connections=3") as broker:
        first = [_open(clients, broker) for _ in range(3)]
        assert all(client.served() for client in first)
        waiting = _open(clients, broker)  # the kernel completes the handshake; the broker does not accept it
        waiting.ask()
        with pytest.raises(TimeoutError):
            waiting.answer(timeout=1.0)
        assert all(client.served() for client in first)
        first[0].close()
        assert waiting.answer() == 1  # accepted now, and its waiting request answered
        assert waiting.served()


# -- max.connection.creation.rate --------------------------------------------------------------------------
def test_connection_creation_rate_spaces_connections_out(clients: list[RawClient]) -> None:
    rate, connections = 5, 16
    with BrokerProcess(f"max.connection.creation.rate={rate}", "quota.window.num=2",
                       "quota.window.size.seconds=1") as broker:
        started = time.monotonic()
        for _ in range(connections):
            assert _open(clients, broker).served()
        elapsed = time.monotonic() - started
    # One window's worth at once (the start-up probe took one), then `rate` per second.
    assert elapsed >= (connections - rate) / rate * 0.8, elapsed
    assert elapsed < 30


# -- the protected inter-broker listener (KIP-402) ------------------------------------------------------------
def test_the_inter_broker_listener_gets_room_past_max_connections(clients: list[RawClient]) -> None:
    external, internal = free_port(), free_port()
    with BrokerProcess(f"listeners=EXTERNAL://{HOST}:{external},INTERNAL://{HOST}:{internal}",
                       "listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
                       "inter.broker.listener.name=INTERNAL", "max.connections=2", port=external) as broker:
        inter_broker = Endpoint(HOST, internal)
        idle, busy = _open(clients, broker), _open(clients, broker)
        assert idle.served() and busy.served()
        time.sleep(0.1)
        assert busy.served()  # idle is now the least recently used
        other = _open(clients, broker)
        other.ask()
        with pytest.raises(TimeoutError):  # the broker is full for clients...
            other.answer(timeout=0.5)
        replica = _open(clients, inter_broker)
        assert replica.served()  # ... not for the inter-broker listener,
        assert idle.closed_by_broker()  # which took the least recently used client connection's place
        assert busy.served()
        with pytest.raises(TimeoutError):  # still full: total is back at max.connections
            other.answer(timeout=0.5)
        busy.close()
        assert other.answer() == 1


# -- connection_creation_rate (KIP-612, a client quota of ip entities) --------------------------------
def test_an_address_over_its_connection_creation_rate_is_refused_while_others_connect(
        clients: list[RawClient]) -> None:
    """1 connection/s for 127.0.0.2, set by AlterClientQuotas: measured as Kafka's Rate (ten windows
    at least), its first ten connections in a burst are served and the rest closed at once, while
    connections from 127.0.0.1 are all served."""
    from tests.broker.test_client_quotas_api import alter

    with BrokerProcess() as broker:
        with BrokerConnection(broker.host, broker.port) as admin:
            assert alter(admin, {"ip": OTHER_HOST}, {"connection_creation_rate": 1.0}) == (0, None)
        outcomes = []
        for _ in range(20):
            other = _open(clients, broker, OTHER_HOST)
            outcomes.append("served" if _answers_or_closes(other) else "closed")
            assert _open(clients, broker, HOST).served()
            other.close()
        assert outcomes[:10] == ["served"] * 10, outcomes
        assert outcomes[10:] == ["closed"] * 10, outcomes
        assert "is over its connection creation rate quota of 1/s" in broker.log_text()


def _answers_or_closes(client: RawClient) -> bool:
    """True if the broker answers an ApiVersions request, False if it closed the connection."""
    try:
        return client.served()
    except (ConnectionClosed, OSError):
        return False
