"""kafka-python and aiokafka, each with its own producer and consumer, against a real broker.

For each client: while a transaction is open, a ``read_uncommitted`` consumer
sees its records and a ``read_committed`` one sees nothing (the last stable
offset holds it back); the commit releases them in order; the records of an
aborted transaction never reach ``read_committed``, which then reads the next
committed transaction right after the first one.
(confluent-kafka has the same checks in test_transactions.py.)
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic

#: After every test: `pafka transactions find-hanging` finds nothing on the broker (conftest).
pytestmark = pytest.mark.usefixtures("no_hanging_transactions")

#: How long a read_committed consumer is given to show (wrongly) a record of an open transaction.
HELD_BACK_S = 1.5
READ_TIMEOUT_S = 15.0


Reader = Callable[[float, int], list[bytes]]


def _kafka_python_reader(bootstrap: str, topic: str, isolation: str) -> tuple[Reader, Callable[[], None]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=50)
    consumer.assign([TopicPartition(topic, 0)])

    def read(wait_s: float, expected: int) -> list[bytes]:
        seen: list[bytes] = []
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(seen) < expected:
            for records in consumer.poll(timeout_ms=100).values():
                seen.extend(r.value for r in records)
        return seen

    return read, consumer.close


def test_kafka_python_read_committed_waits_for_the_commit(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    topic = f"txn-kpc-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"tid-{topic}")
    committed, close_committed = _kafka_python_reader(broker.bootstrap, topic, "read_committed")
    uncommitted, close_uncommitted = _kafka_python_reader(broker.bootstrap, topic, "read_uncommitted")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, b"first-%d" % i, partition=0)
        producer.flush(10)
        assert uncommitted(READ_TIMEOUT_S, 3) == [b"first-0", b"first-1", b"first-2"]
        assert committed(HELD_BACK_S, 1) == []  # held back at the last stable offset
        producer.commit_transaction()
        assert committed(READ_TIMEOUT_S, 3) == [b"first-0", b"first-1", b"first-2"]

        producer.begin_transaction()
        producer.send(topic, b"aborted", partition=0)
        producer.flush(10)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"second", partition=0)
        producer.commit_transaction()
        assert committed(READ_TIMEOUT_S, 1) == [b"second"]
        assert committed(0.5, 1) == []
        assert uncommitted(READ_TIMEOUT_S, 2) == [b"aborted", b"second"]
    finally:
        close_committed()
        close_uncommitted()
        producer.close(5)


def test_aiokafka_read_committed_waits_for_the_commit(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = f"txn-aioc-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)

    async def reader(isolation: str) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=50)
        await consumer.start()
        consumer.assign([TopicPartition(topic, 0)])
        return consumer

    async def read(consumer: AIOKafkaConsumer, wait_s: float, expected: int) -> list[bytes]:
        seen: list[bytes] = []
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(seen) < expected:
            for records in (await consumer.getmany(timeout_ms=100)).values():
                seen.extend(r.value for r in records)
        return seen

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"tid-{topic}")
        await producer.start()
        committed, uncommitted = await reader("read_committed"), await reader("read_uncommitted")
        try:
            await producer.begin_transaction()
            for i in range(3):
                await producer.send_and_wait(topic, b"first-%d" % i, partition=0)
            assert await read(uncommitted, READ_TIMEOUT_S, 3) == [b"first-0", b"first-1", b"first-2"]
            assert await read(committed, HELD_BACK_S, 1) == []  # held back at the last stable offset
            await producer.commit_transaction()
            assert await read(committed, READ_TIMEOUT_S, 3) == [b"first-0", b"first-1", b"first-2"]

            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"aborted", partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait(topic, b"second", partition=0)
            assert await read(committed, READ_TIMEOUT_S, 1) == [b"second"]
            assert await read(committed, 0.5, 1) == []
            assert await read(uncommitted, READ_TIMEOUT_S, 2) == [b"aborted", b"second"]
        finally:
            await committed.stop()
            await uncommitted.stop()
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), 90))
