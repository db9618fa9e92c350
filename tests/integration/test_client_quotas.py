"""Client quotas with real clients: a producer limited to 1 MB/s is held to it over 30 s while an
unlimited producer next to it is not slowed; a consumer limited by consumer_byte_rate is held to it.

The quota is set with AlterClientQuotas on the producer's client id, as
``kafka-configs.sh --alter --entity-type clients --entity-name limited --add-config
producer_byte_rate=1048576`` sets it. Rates are measured from the clients' own
acknowledgements and reads; the broker's throttling is seen by the client
(librdkafka's throttle callback).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from client.connection import BrokerConnection
from pytest_pafka.broker_process import BrokerProcess
from tests.broker.test_client_quotas_api import alter
from tests.integration.client_round_trips import create_topic

QUOTA = 1 << 20  # producer_byte_rate, bytes/s
VALUE = b"q" * 1000
MEASURE_S = 30.0
#: What the unlimited producer asks for: twenty times the quota, well within what one core sends.
FREE_RATE = 20 * QUOTA



@dataclass
class ProducerRun:
    """A confluent-kafka producer sending as fast as it is let (or at ``target`` bytes/s), counting
    acknowledged value bytes."""

    bootstrap: str
    topic: str
    client_id: str
    acked: list[tuple[float, int]] = field(default_factory=list)
    throttled_ms: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    target: float | None = None

    def run(self, seconds: float) -> None:
        from confluent_kafka import KafkaError, Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id, "linger.ms": 5,
                             "queue.buffering.max.kbytes": 2048, "batch.size": 65536,
                             "throttle_cb": lambda event: self.throttled_ms.append(int(event.throttle_time * 1000))})

        def delivered(err: Any, msg: object) -> None:
            if err is not None:
                if err.code() != KafkaError._PURGE_QUEUE:  # left unsent at the deadline, on purpose
                    self.errors.append(str(err))
            else:
                self.acked.append((time.monotonic(), len(VALUE)))

        started = time.monotonic()
        deadline, sent = started + seconds, 0
        while time.monotonic() < deadline and not self.stop.is_set():
            if self.target is not None and sent >= self.target * (time.monotonic() - started):
                producer.poll(0.001)  # ahead of its rate
                continue
            try:
                producer.produce(self.topic, value=VALUE, on_delivery=delivered)
            except BufferError:
                producer.poll(0.05)
            else:
                sent += len(VALUE)
                producer.poll(0)
        producer.purge(in_queue=True, in_flight=False)  # what was not sent by the deadline is not counted
        producer.flush(30)

    def rate(self, start: float, end: float) -> float:
        return sum(size for at, size in self.acked if start <= at < end) / (end - start)


def test_a_producer_is_held_to_its_quota_and_an_unlimited_one_is_not_slowed(pafka_broker: BrokerProcess) -> None:
    create_topic(pafka_broker.bootstrap, "quota-limited")
    create_topic(pafka_broker.bootstrap, "quota-free")
    with BrokerConnection(pafka_broker.host, pafka_broker.port) as admin:
        assert alter(admin, {"client-id": "limited"}, {"producer_byte_rate": float(QUOTA)}) == (0, None)
    free = ProducerRun(pafka_broker.bootstrap, "quota-free", "free", target=FREE_RATE)
    limited = ProducerRun(pafka_broker.bootstrap, "quota-limited", "limited")
    free_thread = threading.Thread(target=free.run, args=(MEASURE_S + 4,))
    free_thread.start()
    try:
        time.sleep(2)  # the unlimited producer is up to speed
        started = time.monotonic()
        limited.run(MEASURE_S)
        ended = started + MEASURE_S
    finally:
        free.stop.set()
        free_thread.join(60)
    assert not free.errors and not limited.errors, (free.errors[:3], limited.errors[:3])
    limited_rate = limited.rate(started, ended)
    free_rate = free.rate(started, ended)
    print(f"limited {limited_rate / QUOTA:.3f} MiB/s (throttled {len(limited.throttled_ms)} times); "
          f"unlimited {free_rate / QUOTA:.1f} MiB/s of the {FREE_RATE / QUOTA:.0f} MiB/s it asked for")
    print("limited, per second (MiB):", [round(limited.rate(started + i, started + i + 1) / QUOTA, 2)
                                         for i in range(int(MEASURE_S))])
    assert limited_rate == pytest.approx(QUOTA, rel=0.10)
    assert limited.throttled_ms and max(limited.throttled_ms) > 0  # the client was told, in throttle_time_ms
    assert not free.throttled_ms
    assert free_rate >= 0.95 * FREE_RATE


def test_a_consumer_is_held_to_its_consumer_byte_rate(pafka_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer

    topic = "quota-read"
    create_topic(pafka_broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": pafka_broker.bootstrap, "linger.ms": 5})
    for _ in range(16_000):  # 16 MB, more than the consumer may read in the measured time
        while True:
            try:
                producer.produce(topic, value=VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    with BrokerConnection(pafka_broker.host, pafka_broker.port) as admin:
        assert alter(admin, {"client-id": "slow-reader"}, {"consumer_byte_rate": float(QUOTA)}) == (0, None)
    throttled: list[float] = []
    consumer = Consumer({"bootstrap.servers": pafka_broker.bootstrap, "client.id": "slow-reader", "group.id": "quota-g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "throttle_cb": lambda event: throttled.append(event.throttle_time)})
    read: list[tuple[float, int]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not read and time.monotonic() < deadline:  # the group forms, the first records arrive
            read += [(time.monotonic(), len(m.value())) for m in consumer.consume(1000, 0.2) if m.error() is None]
        first = read[0][0]
        while time.monotonic() < first + 12.0:
            read += [(time.monotonic(), len(m.value())) for m in consumer.consume(1000, 0.2) if m.error() is None]
    finally:
        consumer.close()
    rate = sum(size for at, size in read if at < first + 12.0) / 12.0
    print(f"consumer {rate / QUOTA:.3f} MiB/s, throttled {len(throttled)} times")
    assert rate == pytest.approx(QUOTA, rel=0.15)
    assert throttled
