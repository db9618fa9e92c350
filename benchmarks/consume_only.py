"""Consume-only throughput of a Kafka-compatible broker (not a test).

Produces N records of S bytes to a fresh one-partition topic, then times a
confluent-kafka consumer reading them back with kbench's consumer settings,
stopping at the N-th record (no end-of-partition wait in the timed window).
Run it against pafka and a peer broker on the same machine:

    python benchmarks/consume_only.py --bootstrap 127.0.0.1:9092
    python benchmarks/consume_only.py --bootstrap 127.0.0.1:19092
"""

from __future__ import annotations

import argparse
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    topic = "consume-only-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": args.bootstrap})  # must outlive its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5, "batch.size": 1_000_000, "acks": 1})
    value = b"x" * args.size
    for _ in range(args.records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(args.timeout)

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": "consume-only", "enable.auto.commit": False,
        "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760, "fetch.wait.max.ms": 100,
        "queued.min.messages": 1000000, "fetch.queue.backoff.ms": 5,
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    received, started, deadline = 0, None, time.monotonic() + args.timeout
    while received < args.records and time.monotonic() < deadline:
        batch = consumer.consume(num_messages=10000, timeout=0.5)
        if batch and started is None:
            started = time.perf_counter()
        received += sum(1 for m in batch if m.error() is None)
    elapsed = time.perf_counter() - (started or time.perf_counter())
    consumer.close()
    print(f"consumed {received} records of {args.size} B in {elapsed:.2f} s: {received / elapsed:,.0f} msg/s")


if __name__ == "__main__":
    main()
