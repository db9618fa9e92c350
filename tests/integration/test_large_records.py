"""Records of several megabytes, produced and fetched byte for byte.

A fetch response this large cannot leave in one socket write: whatever path
the broker uses to move segment bytes to the socket (reads, sendfile), partial
writes must resume exactly where they stopped, or the client gets a corrupt
frame. The values are incompressible and checked by digest; the partition
limit (1 MiB) is below the record size, so KIP-74's "at least one batch" rule
is what lets the consumers progress.
"""

from __future__ import annotations

import hashlib
import random
import time

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic

TOPIC = "large"
RECORDS = 12
SIZE = 3 << 20
LIMIT = str(8 << 20)


def _value(seq: int) -> bytes:
    return random.Random(seq).randbytes(SIZE)


@pytest.fixture(scope="module")
def large_topic() -> BrokerProcess:
    from confluent_kafka import Producer

    with BrokerProcess(f"message.max.bytes={LIMIT}", f"socket.request.max.bytes={50 << 20}") as broker:
        create_topic(broker.bootstrap, TOPIC, 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": int(LIMIT),
                             "linger.ms": 0, "batch.num.messages": 1})
        for seq in range(RECORDS):
            producer.produce(TOPIC, key=b"%d" % seq, value=_value(seq), partition=0)
            producer.poll(0)
        assert producer.flush(60) == 0
        yield broker


def _digests() -> list[str]:
    return [hashlib.sha256(_value(seq)).hexdigest() for seq in range(RECORDS)]


def test_confluent_consumer(large_topic: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": large_topic.bootstrap, "group.id": "pafka-tests-unused",
                         "fetch.message.max.bytes": 1 << 20, "receive.message.max.bytes": 64 << 20})
    got: list[str] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 60
        while len(got) < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(hashlib.sha256(msg.value()).hexdigest())
    finally:
        consumer.close()
    assert got == _digests()


def test_kafka_python_consumer(large_topic: BrokerProcess) -> None:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=large_topic.bootstrap, group_id=None,
                             max_partition_fetch_bytes=1 << 20, fetch_max_bytes=1 << 20)
    got: list[str] = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while len(got) < RECORDS and time.monotonic() < deadline:
            got.extend(hashlib.sha256(record.value).hexdigest() for record in consumer.poll(timeout_ms=1000).get(tp, []))
    finally:
        consumer.close()
    assert got == _digests()
