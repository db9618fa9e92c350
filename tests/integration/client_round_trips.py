"""One produce-then-consume round trip per client library, over whatever security a test's
settings give it (tests/integration/test_ssl_clients.py, test_sasl_clients.py).

Each function sends ``values`` to partition 0 of ``topic``, reads the partition from the start
until it has as many records or ``deadline_s`` passes, and returns what it read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)


def confluent_round_trip(config: Mapping[str, Any], topic: str, values: list[bytes],
                         deadline_s: float) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    errors: list[str] = []
    producer = Producer({**config, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _m: err and errors.append(str(err)))
    assert producer.flush(30) == 0 and not errors, errors
    consumer = Consumer({**config, "group.id": "pafka-tests-unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + deadline_s
        while len(got) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value())
        return got
    finally:
        consumer.close()


def kafka_python_round_trip(config: Mapping[str, Any], topic: str, values: list[bytes],
                            deadline_s: float) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(**config, linger_ms=5)
    try:
        for future in [producer.send(topic, value=value) for value in values]:
            future.get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(**config, group_id=None, enable_auto_commit=False)
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        got: list[bytes] = []
        deadline = time.monotonic() + deadline_s
        while len(got) < len(values) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                got += [record.value for record in batch]
        return got
    finally:
        consumer.close()


def aiokafka_round_trip(settings: Mapping[str, Any], topic: str, values: list[bytes],
                        deadline_s: float) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**settings, linger_ms=5)
        await producer.start()
        try:
            await asyncio.gather(*[await producer.send(topic, value=value) for value in values])
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**settings, group_id=None, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            got: list[bytes] = []
            deadline = time.monotonic() + deadline_s
            while len(got) < len(values) and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=1000)).values():
                    got += [record.value for record in batch]
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())
