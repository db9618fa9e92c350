"""ListOffsets and mid-batch fetches as real clients use them.

One partition holds 10,000 lz4-compressed records with timestamps 10 ms
apart. Every client's offsets-for-times must find the first record at or after
a time, "earliest"/"latest" must be 0 and the end, and a consumer positioned
in the middle of a compressed batch must start exactly at its offset (the
broker serves whole batches; the client drops the records before its
position).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time

import pytest

from pytest_pafka.broker_process import BrokerProcess
from tests.integration.clients import ConfluentDriver

TOPIC = "timed"
RECORDS = 10_000
STEP_MS = 10
BASE_MS = int(time.time() * 1000) - RECORDS * STEP_MS - 60_000
SEEK_TO = 4321  # inside a batch: the producer batches hundreds of records
PROBES = {  # target timestamp -> expected offset
    BASE_MS - 1: 0,
    BASE_MS: 0,
    BASE_MS + 5: 1,
    BASE_MS + 1234 * STEP_MS: 1234,
    BASE_MS + (RECORDS - 1) * STEP_MS: RECORDS - 1,
}
BEYOND_LAST = BASE_MS + RECORDS * STEP_MS


@pytest.fixture(scope="module")
def timed_topic(broker: BrokerProcess) -> BrokerProcess:
    from confluent_kafka import Producer

    ConfluentDriver().create_topic(broker.bootstrap, TOPIC, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4",
                         "linger.ms": 20, "batch.num.messages": 500})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"%d" % i, partition=0, timestamp=BASE_MS + i * STEP_MS)
    assert producer.flush(60) == 0
    return broker


def test_confluent_offsets_for_times_and_watermarks(timed_topic: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": timed_topic.bootstrap, "group.id": "pafka-tests-unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10) == (0, RECORDS)
        for target, offset in {**PROBES, BEYOND_LAST: -1}.items():
            (found,) = consumer.offsets_for_times([TopicPartition(TOPIC, 0, target)], timeout=10)
            assert found.error is None and found.offset == offset, (target, found)
    finally:
        consumer.close()


def test_kafka_python_offsets_for_times(timed_topic: BrokerProcess) -> None:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=timed_topic.bootstrap, group_id=None)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: RECORDS}
        for target, offset in PROBES.items():
            found = consumer.offsets_for_times({tp: target})[tp]
            assert found is not None and found.offset == offset, (target, found)
            assert found.timestamp == BASE_MS + offset * STEP_MS
        assert consumer.offsets_for_times({tp: BEYOND_LAST})[tp] is None
    finally:
        consumer.close()


def test_aiokafka_offsets_for_times(timed_topic: BrokerProcess) -> None:
    async def run() -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        tp = TopicPartition(TOPIC, 0)
        consumer = AIOKafkaConsumer(bootstrap_servers=timed_topic.bootstrap, group_id=None)
        await consumer.start()
        try:
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: RECORDS}
            for target, offset in PROBES.items():
                found = (await consumer.offsets_for_times({tp: target}))[tp]
                assert found is not None and found.offset == offset, (target, found)
        finally:
            await consumer.stop()

    asyncio.run(run())


def _first_offsets_confluent(bootstrap: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pafka-tests-unused"})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, SEEK_TO)])
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += [m.offset() for m in consumer.consume(3 - len(got), timeout=1) if m.error() is None]
        return got
    finally:
        consumer.close()


def _first_offsets_kafka_python(bootstrap: str) -> list[int]:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, max_poll_records=3)
    try:
        consumer.assign([tp])
        consumer.seek(tp, SEEK_TO)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            records = consumer.poll(timeout_ms=1000).get(tp)
            if records:
                return [r.offset for r in records]
        return []
    finally:
        consumer.close()


def _first_offsets_aiokafka(bootstrap: str) -> list[int]:
    async def run() -> list[int]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        tp = TopicPartition(TOPIC, 0)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        await consumer.start()
        try:
            consumer.assign([tp])
            consumer.seek(tp, SEEK_TO)
            records = (await consumer.getmany(tp, timeout_ms=10000, max_records=3)).get(tp, [])
            return [r.offset for r in records]
        finally:
            await consumer.stop()

    return asyncio.run(run())


def _first_offsets_kcat(bootstrap: str) -> list[int]:
    assert shutil.which("kcat"), "kcat is not installed (apt-get install -y kcat)"
    result = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-p", "0", "-o", str(SEEK_TO),
                             "-c", "3", "-J", "-q"], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return [json.loads(line)["offset"] for line in result.stdout.splitlines()]


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka", "kcat"])
def test_consuming_from_the_middle_of_a_compressed_batch(timed_topic: BrokerProcess, client: str) -> None:
    first = {
        "confluent-kafka": _first_offsets_confluent,
        "kafka-python": _first_offsets_kafka_python,
        "aiokafka": _first_offsets_aiokafka,
        "kcat": _first_offsets_kcat,
    }[client](timed_topic.bootstrap)
    assert first[:3] == [SEEK_TO, SEEK_TO + 1, SEEK_TO + 2]


def test_kcat_relative_offset_from_the_end(timed_topic: BrokerProcess) -> None:
    assert shutil.which("kcat"), "kcat is not installed (apt-get install -y kcat)"
    result = subprocess.run(["kcat", "-C", "-b", timed_topic.bootstrap, "-t", TOPIC, "-p", "0", "-o", "-10", "-e",
                             "-J", "-q"], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["offset"] for d in docs] == list(range(RECORDS - 10, RECORDS))
    assert [d["ts"] for d in docs] == [BASE_MS + o * STEP_MS for o in range(RECORDS - 10, RECORDS)]


def test_tiny_fetch_limits_still_return_whole_batches(timed_topic: BrokerProcess) -> None:
    """KIP-74: a batch larger than every fetch limit is still served, one at a time."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=timed_topic.bootstrap, group_id=None, fetch_max_bytes=1024,
                             max_partition_fetch_bytes=512)
    offsets: list[int] = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 60
        while len(offsets) < RECORDS and time.monotonic() < deadline:
            offsets += [r.offset for r in consumer.poll(timeout_ms=1000, max_records=5000).get(tp, [])]
    finally:
        consumer.close()
    assert offsets == list(range(RECORDS))


def test_kcat_query_offsets_by_time_and_metadata_list(timed_topic: BrokerProcess) -> None:
    assert shutil.which("kcat"), "kcat is not installed (apt-get install -y kcat)"
    target = BASE_MS + 1234 * STEP_MS
    query = subprocess.run(["kcat", "-Q", "-b", timed_topic.bootstrap, "-t", f"{TOPIC}:0:{target}"],
                           capture_output=True, timeout=60)
    assert query.returncode == 0, query.stderr.decode(errors="replace")
    assert f"{TOPIC} [0] offset 1234".encode() in query.stdout, query.stdout
    listing = subprocess.run(["kcat", "-L", "-J", "-b", timed_topic.bootstrap], capture_output=True, timeout=60)
    assert listing.returncode == 0, listing.stderr.decode(errors="replace")
    doc = json.loads(listing.stdout)
    assert [b["id"] for b in doc["brokers"]] == [0]
    (topic,) = [t for t in doc["topics"] if t["topic"] == TOPIC]
    assert [(p["partition"], p["leader"]) for p in topic["partitions"]] == [(0, 0)]


def test_consumers_reset_past_deleted_records(broker: BrokerProcess) -> None:
    """Fetching below the log start offset is OFFSET_OUT_OF_RANGE; clients reset to the new start."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    topic = "trimmed"
    ConfluentDriver().create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(1000):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.delete_records([TopicPartition(topic, 0, 600)]).values()
    assert future.result(timeout=30).low_watermark == 600

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pafka-tests-unused",
                         "auto.offset.reset": "earliest"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (600, 1000)
        consumer.assign([TopicPartition(topic, 0, 100)])  # below the log start
        first = None
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                first = msg.offset()
    finally:
        consumer.close()
    assert first == 600

    tp = KafkaTopicPartition(topic, 0)
    legacy = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, auto_offset_reset="earliest")
    try:
        legacy.assign([tp])
        legacy.seek(tp, 100)
        records = []
        deadline = time.monotonic() + 30
        while not records and time.monotonic() < deadline:
            records = legacy.poll(timeout_ms=1000).get(tp, [])
        assert legacy.beginning_offsets([tp]) == {tp: 600}
    finally:
        legacy.close()
    assert records and records[0].offset == 600
