"""A small real-client workload for the metrics tests: produce, consume with a group, commit."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

VALUE = b"v" * 100


def create_topic(bootstrap: str, partitions: int = 1, replication_factor: int = 1) -> str:
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication_factor)])[topic].result(30)
    return topic


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=VALUE, partition=0)
    assert producer.flush(30) == 0


def consume_and_commit(bootstrap: str, topic: str, group: str, wanted: int, commit_at: int) -> int:
    """Read ``wanted`` records of partition 0 with ``group``, commit ``commit_at``; the records read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    read = 0
    deadline = time.monotonic() + 60
    try:
        while read < wanted and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read += 1
        consumer.commit(offsets=[TopicPartition(topic, 0, commit_at)], asynchronous=False)
    finally:
        consumer.close()
    return read
