"""The ``pafka`` sink: what Spark writes, a plain confluent-kafka consumer reads back unchanged.

Every test writes through Spark (local[2]) into a real broker process and reads the topic back
with librdkafka, independently of pafka's own client and of the pafka source.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from client.partitioner import partition_for_key
from testing.topics import create_topic

HEADERS = "array<struct<key string, value binary>>"
CONSUME_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def consume_all(bootstrap: str, topic: str) -> list[Consumed]:
    """Every record of ``topic`` in partition and offset order, read with confluent-kafka."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sink-tests",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[Consumed] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(done) < len(ends) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"consumer error: {msg.error()}")
                if msg.offset() >= ends[msg.partition()]:
                    done.add(msg.partition())
                continue
            records.append(Consumed(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                    tuple(msg.headers() or ())))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        assert len(done) == len(ends), f"timed out reading {topic}: {len(records)} records"
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def by_partition(records: list[Consumed]) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for r in records:
        out.setdefault(r.partition, []).append((r.key, r.value, r.headers))
    return out


def test_batch_write_keys_values_headers_partitions_read_back_unchanged(spark, spark_broker, topic_name) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 3)
    rows = [
        (f"key-{i}".encode(), bytes([i % 256]) * (i % 7) + f"value-{i}".encode(), topic_name, i % 3,
         [("trace", f"t{i}".encode()), ("empty", b""), ("null", None)] if i % 4 else [])
        for i in range(300)
    ]
    rows.append((None, b"no key", topic_name, 1, []))
    rows.append((b"tombstone", None, topic_name, 2, [("why", b"deleted")]))
    # One Spark partition: one producer, so the order within each Kafka partition is the rows' order.
    df = spark.createDataFrame(rows, f"key binary, value binary, topic string, partition int, headers {HEADERS}")
    df.coalesce(1).write.format("pafka").mode("append") \
        .option("kafka.bootstrap.servers", spark_broker.bootstrap).save()

    expected: dict[int, list[tuple]] = {}
    for key, value, _, partition, headers in rows:
        expected.setdefault(partition, []).append((key, value, tuple((k, v) for k, v in headers)))
    consumed = consume_all(spark_broker.bootstrap, topic_name)
    assert by_partition(consumed) == expected
    assert [r.offset for r in consumed if r.partition == 0] == list(range(len(expected[0])))


def test_string_columns_topic_option_and_java_partitioner(spark, spark_broker, topic_name) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 3)
    rows = [(f"user-{i}", f"événement {i}", "ignored-topic-column") for i in range(200)]
    df = spark.createDataFrame(rows, "key string, value string, topic string").repartition(2)
    # The topic option overrides the topic column, as in Spark's Kafka sink.
    df.write.format("pafka").mode("append") \
        .option("kafka.bootstrap.servers", spark_broker.bootstrap).option("topic", topic_name).save()

    consumed = consume_all(spark_broker.bootstrap, topic_name)
    assert sorted((r.key, r.value) for r in consumed) == sorted(
        (k.encode(), v.encode()) for k, v, _ in rows)
    # Keyed records land where Java's default partitioner (murmur2) puts them, like Spark's sink.
    for r in consumed:
        assert r.partition == partition_for_key(r.key, 3), r
        assert r.headers == ()
    assert {r.partition for r in consumed} == {0, 1, 2}


def test_streaming_write_micro_batches_read_back_unchanged(spark, spark_broker, topic_name, work_dir: Path) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 2)
    source_dir = work_dir / "in"
    source_dir.mkdir()
    expected: list[tuple[str, str, int]] = []
    for file_no in range(3):
        lines = []
        for i in range(50):
            key, value, partition = f"f{file_no}-k{i}", f"file {file_no} row {i}", (file_no + i) % 2
            expected.append((key, value, partition))
            lines.append(json.dumps({"key": key, "value": value, "partition": partition, "hdr": f"h{i}"}))
        (source_dir / f"part-{file_no}.json").write_text("\n".join(lines) + "\n")

    stream = (spark.readStream.schema("key string, value string, partition int, hdr string")
              .option("maxFilesPerTrigger", 1).json(str(source_dir)))
    out = stream.selectExpr("key", "value", "partition",
                            "array(named_struct('key', 'src', 'value', cast(hdr as binary))) as headers")
    query = (out.writeStream.format("pafka")
             .option("kafka.bootstrap.servers", spark_broker.bootstrap).option("topic", topic_name)
             .option("checkpointLocation", str(work_dir / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    assert query.exception() is None
    assert len([p for p in query.recentProgress if p["numInputRows"] > 0]) == 3  # one micro-batch per file

    consumed = consume_all(spark_broker.bootstrap, topic_name)
    assert sorted((r.key.decode(), r.value.decode(), r.partition) for r in consumed) == sorted(expected)
    by_key = {r.key.decode(): r for r in consumed}
    for key, _, _ in expected:
        assert by_key[key].headers == (("src", f"h{key.split('-k')[1]}".encode()),)


def test_delivery_error_fails_the_write(spark, spark_broker, topic_name) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 2)
    df = spark.createDataFrame([(b"v", 7)], "value binary, partition int")  # no partition 7
    with pytest.raises(Exception, match=r"not delivered|Unknown partition"):
        df.write.format("pafka").mode("append") \
            .option("kafka.bootstrap.servers", spark_broker.bootstrap).option("topic", topic_name) \
            .option("kafka.message.timeout.ms", "5000").save()


def test_delivery_error_fails_the_streaming_query(spark, spark_broker, topic_name, work_dir: Path) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 1)
    source_dir = work_dir / "in"
    source_dir.mkdir()
    (source_dir / "rows.json").write_text('{"value": "ok", "partition": 0}\n{"value": "lost", "partition": 3}\n')
    query = (spark.readStream.schema("value string, partition int").json(str(source_dir))
             .writeStream.format("pafka")
             .option("kafka.bootstrap.servers", spark_broker.bootstrap).option("topic", topic_name)
             .option("kafka.message.timeout.ms", "5000")
             .option("checkpointLocation", str(work_dir / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        with pytest.raises(Exception, match=r"not delivered|Unknown partition"):
            query.awaitTermination(120)
    finally:
        query.stop()
    assert query.exception() is not None
    assert query.lastProgress is None  # the failed micro-batch was never committed


@pytest.mark.parametrize("schema, mode, message", [
    ("key binary, partition int", "append", "required attribute 'value' not found"),
    ("value binary, extra int", "append", "unexpected columns"),
    ("value int", "append", "value attribute type must be binary or string"),
    ("value binary, headers array<struct<key string, value string>>", "append", "headers attribute type"),
    ("value binary", "overwrite", "overwrite is not supported"),
])
def test_invalid_writes_are_rejected_before_any_task(spark, spark_broker, topic_name, schema, mode, message) -> None:
    df = spark.createDataFrame([], schema)
    with pytest.raises(Exception, match=message):
        df.write.format("pafka").mode(mode) \
            .option("kafka.bootstrap.servers", spark_broker.bootstrap).option("topic", topic_name).save()


def test_topic_required_without_topic_column(spark, spark_broker) -> None:
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception, match="topic option required"):
        df.write.format("pafka").mode("append").option("kafka.bootstrap.servers", spark_broker.bootstrap).save()
