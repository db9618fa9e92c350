"""Idempotent producing with confluent-kafka against real broker processes.

The client connects through ``KafkaProxy`` (the broker advertises the proxy's
address), which lets the broker append a Produce request and then cuts the
connection instead of forwarding the response: librdkafka must retry the
batch with the same producer id and sequence, and the broker must answer the
retry as the duplicate it is. Across a broker restart the producer keeps its
id and sequences, so the broker must have kept (snapshotted or rebuilt) its
producer state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request
from tests.integration.clients import ConfluentDriver
from tests.integration.kafka_proxy import KafkaProxy
from tests.integration.records import Consumed

TOPIC = "idempotent"
DESCRIBE_PRODUCERS_KEY = 61
PARTITIONS = 2


@pytest.fixture
def proxied_broker() -> Iterator[tuple[BrokerProcess, KafkaProxy]]:
    broker = BrokerProcess()
    try:
        with KafkaProxy(broker.port) as proxy:
            broker.overrides.append(f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy.port}")
            broker.start()
            yield broker, proxy
            print(broker.log_text()[-6000:])  # shown when the test failed
    finally:
        broker.cleanup()


class IdempotentProducer:
    """confluent-kafka with enable.idempotence, collecting delivery reports."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list[str] = []
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 2, "batch.num.messages": 200, "retry.backoff.ms": 20,
            "message.timeout.ms": 60000, "socket.timeout.ms": 10000,
        })

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]

    def send(self, first: int, count: int) -> None:
        for seq in range(first, first + count):
            self.producer.produce(TOPIC, key=b"k%d" % (seq % 7), value=b"%08d" % seq, on_delivery=self._on_delivery)
            self.producer.poll(0)

    def flush(self, timeout: float = 60) -> None:
        assert self.producer.flush(timeout) == 0, "records left undelivered"
        assert not self.errors, f"{len(self.errors)} delivery errors, first: {self.errors[0]}"


def _create_topic(bootstrap: str) -> None:
    ConfluentDriver().create_topic(bootstrap, TOPIC, PARTITIONS)


def _producer_states(broker: BrokerProcess) -> dict[int, tuple[int, int, int]]:
    """partition -> (producer id, epoch, last sequence) from DescribeProducers, for the one producer."""
    from protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest

    request = DescribeProducersRequest(topics=[TopicRequest(name=TOPIC, partition_indexes=list(range(PARTITIONS)))])
    response = send_request(broker, DESCRIBE_PRODUCERS_KEY, 0, request)
    states = {}
    for topic in response.topics:
        for partition in topic.partitions:
            assert partition.error_code == 0, partition
            for producer in partition.active_producers:
                states[partition.partition_index] = (producer.producer_id, producer.producer_epoch,
                                                     producer.last_sequence)
    return states


def _check_exactly_once(consumed: list[Consumed], total: int, acked: list[tuple[int, int, bytes]]) -> None:
    values = [int(r.value) for r in consumed]
    assert len(values) == len(set(values)), f"{len(values) - len(set(values))} duplicates"
    assert sorted(values) == list(range(total))
    by_partition: dict[int, list[int]] = {}
    for record in consumed:
        by_partition.setdefault(record.partition, []).append(int(record.value))
    for partition, seqs in by_partition.items():
        assert seqs == sorted(seqs), f"partition {partition} out of order"
    # The offsets the producer was told are where the records are.
    where = {(r.partition, r.offset): r.value for r in consumed}
    for partition, offset, value in acked:
        assert where.get((partition, offset)) == value, (partition, offset, value)


def test_retries_after_dropped_responses_make_no_duplicates(proxied_broker: tuple[BrokerProcess, KafkaProxy]) -> None:
    _, proxy = proxied_broker
    _create_topic(proxy.address)
    producer = IdempotentProducer(proxy.address)
    total, rounds, per_round = 0, 8, 1500
    for _ in range(rounds):
        proxy.drop_produce_responses(1)
        producer.send(total, per_round)
        total += per_round
        producer.flush()
    assert proxy.drops_done == rounds, "the proxy did not cut every armed Produce response"
    consumed = ConfluentDriver().consume(proxy.address, TOPIC, PARTITIONS, expected=total)
    _check_exactly_once(consumed, total, producer.acked)


def test_requests_cut_mid_frame_are_retried_once(proxied_broker: tuple[BrokerProcess, KafkaProxy]) -> None:
    broker, proxy = proxied_broker
    _create_topic(proxy.address)
    producer = IdempotentProducer(proxy.address)
    total, rounds, per_round = 0, 6, 1500
    for round_ in range(rounds):
        # Alternate: a request cut in half, then a response lost after the append.
        if round_ % 2:
            proxy.drop_produce_responses(1)
        else:
            proxy.cut_produce_requests(1)
        producer.send(total, per_round)
        total += per_round
        producer.flush()
    assert proxy.drops_done == rounds and proxy.drops_pending == 0
    consumed = ConfluentDriver().consume(proxy.address, TOPIC, PARTITIONS, expected=total)
    _check_exactly_once(consumed, total, producer.acked)
    assert "Traceback" not in broker.log_text()


def test_describe_producers_shows_the_last_sequences(proxied_broker: tuple[BrokerProcess, KafkaProxy]) -> None:
    broker, proxy = proxied_broker
    _create_topic(proxy.address)
    producer = IdempotentProducer(proxy.address)
    producer.send(0, 1000)
    producer.flush()
    per_partition: dict[int, int] = {}
    for partition, _, _ in producer.acked:
        per_partition[partition] = per_partition.get(partition, 0) + 1
    states = _producer_states(broker)
    assert {p: seq for p, (_, _, seq) in states.items()} == {p: n - 1 for p, n in per_partition.items()}
    assert len({(pid, epoch) for pid, epoch, _ in states.values()}) == 1  # one producer, one epoch


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_sequence_state_survives_a_restart(proxied_broker: tuple[BrokerProcess, KafkaProxy], stop: str) -> None:
    broker, proxy = proxied_broker
    _create_topic(proxy.address)
    producer = IdempotentProducer(proxy.address)
    producer.send(0, 3000)
    producer.flush()
    before = _producer_states(broker)
    assert before and all(pid >= 0 and seq >= 0 for pid, _, seq in before.values()), before
    if stop == "sigterm":
        assert broker.terminate() == 0
    else:
        broker.kill()
    broker.start()
    # What the broker knows of the producer (id, epoch, last sequence) came back with it.
    assert _producer_states(broker) == before
    producer.send(3000, 3000)
    producer.flush()
    consumed = ConfluentDriver().consume(proxy.address, TOPIC, PARTITIONS, expected=6000)
    _check_exactly_once(consumed, 6000, producer.acked)
    assert "OUT_OF_ORDER" not in broker.log_text()


def test_retry_of_a_lost_response_across_a_restart(proxied_broker: tuple[BrokerProcess, KafkaProxy]) -> None:
    """The broker appends a batch, the response is lost, the broker restarts: the retry is a duplicate."""
    broker, proxy = proxied_broker
    _create_topic(proxy.address)
    producer = IdempotentProducer(proxy.address)
    producer.send(0, 2000)
    producer.flush()
    dropped = threading.Event()
    proxy.on_drop = dropped.set
    proxy.drop_produce_responses(1)
    producer.send(2000, 1)
    def cut() -> bool:
        producer.producer.poll(0.01)  # serves the delivery callbacks
        return dropped.is_set()

    wait_until(cut, 30, "no Produce response was cut", interval=0)
    assert broker.terminate() == 0
    broker.start()
    producer.send(2001, 999)
    producer.flush()
    consumed = ConfluentDriver().consume(proxy.address, TOPIC, PARTITIONS, expected=3000)
    _check_exactly_once(consumed, 3000, producer.acked)


def _kafka_python_idempotent(bootstrap: str, count: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=2)
    try:
        futures = [producer.send(TOPIC, key=b"k%d" % (seq % 7), value=b"%08d" % seq) for seq in range(count)]
        producer.flush(timeout=60)
        for future in futures:
            future.get(timeout=0)
    finally:
        producer.close(timeout=10)


def _aiokafka_idempotent(bootstrap: str, count: int) -> None:
    import asyncio

    async def run() -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=2)
        await producer.start()
        try:
            futures = [await producer.send(TOPIC, key=b"k%d" % (seq % 7), value=b"%08d" % seq) for seq in range(count)]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_other_clients_idempotent_producers(client: str) -> None:
    """InitProducerId and sequenced produce as kafka-python and aiokafka speak them."""
    produce = {"kafka-python": _kafka_python_idempotent, "aiokafka": _aiokafka_idempotent}[client]
    with BrokerProcess() as broker:
        _create_topic(broker.bootstrap)
        produce(broker.bootstrap, 3000)
        consumed = ConfluentDriver().consume(broker.bootstrap, TOPIC, PARTITIONS, expected=None)
        _check_exactly_once(consumed, 3000, [])
        states = _producer_states(broker)
        assert states and len({pid for pid, _, _ in states.values()}) == 1
