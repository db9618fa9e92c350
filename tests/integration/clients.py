"""Drivers for the real clients the matrix runs: one small class per client.

Each driver creates a topic with its client's admin API, produces a list of
``Produced`` records with a codec, and consumes a topic from the beginning by
assigning every partition explicitly (consumer groups do not exist yet), until
it holds the expected count or a deadline passes. Errors reported by a client
fail the test with the client's own message.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Protocol

from tests.integration.records import CONSTANT_HEADERS, Consumed, Produced

CONSUME_DEADLINE_S = 120.0


class ClientDriver(Protocol):
    name: str
    #: kcat can neither set a record's timestamp nor per-record headers.
    exact_timestamps: bool
    per_record_headers: bool

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None: ...
    def produce(self, bootstrap: str, topic: str, codec: str, records: list[Produced]) -> None: ...
    def consume(self, bootstrap: str, topic: str, partitions: int, expected: int) -> list[Consumed]: ...


def _headers(pairs: object) -> tuple[tuple[str, bytes], ...]:
    return tuple((k, b"" if v is None else bytes(v)) for k, v in (pairs or ()))  # type: ignore[union-attr]


# -- confluent-kafka (librdkafka) -------------------------------------------
class ConfluentDriver:
    name = "confluent-kafka"
    exact_timestamps = True
    per_record_headers = True

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                      operation_timeout=30)
        futures[topic].result(timeout=30)

    def produce(self, bootstrap: str, topic: str, codec: str, records: list[Produced]) -> None:
        from confluent_kafka import Producer

        errors: list[str] = []

        def on_delivery(err: object, msg: object) -> None:
            if err is not None:
                errors.append(str(err))

        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                             "queue.buffering.max.messages": len(records) + 1000, "batch.num.messages": 10000})
        for record in records:
            producer.produce(topic, key=record.key, value=record.value, headers=list(record.headers),
                             timestamp=record.timestamp_ms, on_delivery=on_delivery)
            producer.poll(0)
        remaining = producer.flush(60)
        assert remaining == 0, f"{remaining} records not delivered"
        assert not errors, f"{len(errors)} delivery errors, first: {errors[0]}"

    def consume(self, bootstrap: str, topic: str, partitions: int, expected: int | None) -> list[Consumed]:
        """Until ``expected`` records, or (None) until every partition's end was reached."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        # confluent-kafka refuses to create a consumer without group.id ("group.id
        # must be set"); with assign() and no commits the group is never joined.
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pafka-tests-unused",
                             "enable.auto.commit": False, "enable.auto.offset.store": False,
                             "auto.offset.reset": "earliest", "enable.partition.eof": expected is None})
        out: list[Consumed] = []
        at_end: set[int] = set()

        def done() -> bool:
            return len(at_end) == partitions if expected is None else len(out) >= expected

        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
            deadline = time.monotonic() + CONSUME_DEADLINE_S
            while not done() and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=10000, timeout=1.0):
                    if msg.error() is not None:
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            at_end.add(msg.partition())
                            continue
                        raise AssertionError(f"consume error: {msg.error()}")
                    out.append(Consumed(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                        _headers(msg.headers()), msg.timestamp()[1]))
        finally:
            consumer.close()
        return out


# -- kafka-python ------------------------------------------------------------
class KafkaPythonDriver:
    name = "kafka-python"
    exact_timestamps = True
    per_record_headers = True

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        finally:
            admin.close()

    def produce(self, bootstrap: str, topic: str, codec: str, records: list[Produced]) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5,
                                 batch_size=256 * 1024)
        try:
            futures = [producer.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                                     timestamp_ms=r.timestamp_ms) for r in records]
            producer.flush(timeout=120)
            for future in futures:
                future.get(timeout=0)  # raises the delivery error, if any
        finally:
            producer.close(timeout=10)

    def consume(self, bootstrap: str, topic: str, partitions: int, expected: int) -> list[Consumed]:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset="earliest")
        out: list[Consumed] = []
        try:
            assignment = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(assignment)
            consumer.seek_to_beginning(*assignment)
            deadline = time.monotonic() + CONSUME_DEADLINE_S
            while len(out) < expected and time.monotonic() < deadline:
                for tp, batch in consumer.poll(timeout_ms=1000, max_records=20000).items():
                    out.extend(Consumed(tp.partition, m.offset, m.key, m.value, _headers(m.headers), m.timestamp)
                               for m in batch)
        finally:
            consumer.close()
        return out


# -- aiokafka ----------------------------------------------------------------
class AioKafkaDriver:
    name = "aiokafka"
    exact_timestamps = True
    per_record_headers = True

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        async def run() -> None:
            from aiokafka.admin import AIOKafkaAdminClient, NewTopic

            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            try:
                await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
            finally:
                await admin.close()

        asyncio.run(run())

    def produce(self, bootstrap: str, topic: str, codec: str, records: list[Produced]) -> None:
        async def run() -> None:
            from aiokafka import AIOKafkaProducer

            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5,
                                        max_batch_size=256 * 1024)
            await producer.start()
            try:
                futures = [await producer.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                                               timestamp_ms=r.timestamp_ms) for r in records]
                await producer.flush()
                await asyncio.gather(*futures)  # raises the first delivery error
            finally:
                await producer.stop()

        asyncio.run(run())

    def consume(self, bootstrap: str, topic: str, partitions: int, expected: int) -> list[Consumed]:
        async def run() -> list[Consumed]:
            from aiokafka import AIOKafkaConsumer, TopicPartition

            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                        auto_offset_reset="earliest")
            await consumer.start()
            out: list[Consumed] = []
            try:
                assignment = [TopicPartition(topic, p) for p in range(partitions)]
                consumer.assign(assignment)
                await consumer.seek_to_beginning(*assignment)
                deadline = time.monotonic() + CONSUME_DEADLINE_S
                while len(out) < expected and time.monotonic() < deadline:
                    batches = await consumer.getmany(timeout_ms=1000, max_records=20000)
                    for tp, batch in batches.items():
                        out.extend(Consumed(tp.partition, m.offset, m.key, m.value, _headers(m.headers),
                                            m.timestamp) for m in batch)
            finally:
                await consumer.stop()
            return out

        return asyncio.run(run())


# -- kcat (Debian's package, librdkafka 2.0) ---------------------------------
class KcatDriver:
    name = "kcat"
    exact_timestamps = False
    per_record_headers = False

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        # kcat has no admin commands: pafka's own kafka-topics equivalent does it.
        subprocess.run([sys.executable, "-m", "tools", "topics", "--bootstrap-server", bootstrap, "--create",
                        "--topic", topic, "--partitions", str(partitions)], check=True, capture_output=True,
                       timeout=60)

    def produce(self, bootstrap: str, topic: str, codec: str, records: list[Produced]) -> None:
        assert all(r.headers == CONSTANT_HEADERS for r in records)
        header_args = [arg for k, v in CONSTANT_HEADERS for arg in ("-H", f"{k}={v.decode()}")]
        with tempfile.TemporaryDirectory(prefix="pafka-kcat-") as tmp:
            data = Path(tmp) / "records.txt"
            data.write_bytes(b"".join(r.key + b"\t" + r.value + b"\n" for r in records))
            result = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-z", codec, "-K", "\t",
                                     *header_args, "-X", "linger.ms=5", "-l", str(data)],
                                    capture_output=True, timeout=300)
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        assert b"failed" not in result.stderr.lower(), result.stderr.decode(errors="replace")

    def consume(self, bootstrap: str, topic: str, partitions: int, expected: int) -> list[Consumed]:
        result = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-q"],
                                capture_output=True, timeout=CONSUME_DEADLINE_S)
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        out = []
        for line in result.stdout.splitlines():
            doc = json.loads(line)
            flat = doc.get("headers") or []
            headers = tuple((flat[i], (flat[i + 1] or "").encode()) for i in range(0, len(flat), 2))
            key = None if doc["key"] is None else doc["key"].encode()
            out.append(Consumed(doc["partition"], doc["offset"], key, doc["payload"].encode(), headers, doc["ts"]))
        return out


DRIVERS: dict[str, ClientDriver] = {
    d.name: d for d in (ConfluentDriver(), KafkaPythonDriver(), AioKafkaDriver(), KcatDriver())
}
