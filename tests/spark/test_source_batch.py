"""spark.read.format("pafka"): batch reads over offset ranges, schema and Arrow types."""

from __future__ import annotations

import json
import re

import pytest
from pyspark.sql import functions as F

from testing.topics import create_topic
from tests.spark.kafka_data import Produced, produce

BASE_TS = 1_700_000_000_000


def _records(n: int, partitions: int) -> list[tuple]:
    return [
        (i % partitions, f"k{i}".encode(), f"value-{i}".encode() * 3, [("h", str(i).encode()), ("n", None)] if i % 2 else [],
         BASE_TS + i)
        for i in range(n)
    ]


def _row_key(row) -> tuple:  # type: ignore[no-untyped-def]
    return (row["partition"], row["offset"])


def test_batch_read_offset_range_returns_exactly_those_records(spark, spark_broker, topic_name) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 3)
    produced = produce(spark_broker.bootstrap, topic_name, _records(300, 3))
    starting = {topic_name: {"0": 10, "1": -2, "2": 50}}
    ending = {topic_name: {"0": 60, "1": 5, "2": -1}}
    df = (spark.read.format("pafka")
          .option("kafka.bootstrap.servers", spark_broker.bootstrap)
          .option("subscribe", topic_name)
          .option("startingOffsets", json.dumps(starting))
          .option("endingOffsets", json.dumps(ending))
          .option("includeHeaders", "true")
          .load())
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = sorted(df.withColumn("ts_us", F.unix_micros("timestamp")).collect(), key=_row_key)
    wanted = sorted(
        (p for p in produced
         if (p.partition == 0 and 10 <= p.offset < 60) or (p.partition == 1 and p.offset < 5)
         or (p.partition == 2 and p.offset >= 50)),
        key=lambda p: (p.partition, p.offset),
    )
    assert len(rows) == len(wanted) == 50 + 5 + 50
    for row, want in zip(rows, wanted, strict=True):
        _assert_row_equals(row, want, topic_name)


def _assert_row_equals(row, want: Produced, topic: str) -> None:  # type: ignore[no-untyped-def]
    assert (row["partition"], row["offset"]) == (want.partition, want.offset)
    assert row["topic"] == topic
    assert bytes(row["key"]) == want.key
    assert bytes(row["value"]) == want.value
    assert [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"]] == list(want.headers)
    assert row["ts_us"] == want.timestamp_ms * 1000
    assert row["timestampType"] == 0


def test_batch_read_defaults_to_whole_topic_without_headers(spark, spark_broker, topic_name) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 2)
    produced = produce(spark_broker.bootstrap, topic_name, _records(120, 2))
    df = (spark.read.format("pafka")
          .option("kafka.bootstrap.servers", spark_broker.bootstrap)
          .option("assign", json.dumps({topic_name: [1]}))
          .load())
    assert "headers" not in df.columns
    got = sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())
    assert got == sorted((p.partition, p.offset, p.value) for p in produced if p.partition == 1)


def test_batch_read_starting_timestamp(spark, spark_broker, topic_name) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 2)
    produced = produce(spark_broker.bootstrap, topic_name, _records(100, 2))
    df = (spark.read.format("pafka")
          .option("kafka.bootstrap.servers", spark_broker.bootstrap)
          .option("subscribePattern", re.escape(topic_name[:-2]) + "..")
          .option("startingTimestamp", str(BASE_TS + 60))
          .load())
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == sorted((p.partition, p.offset) for p in produced if p.timestamp_ms >= BASE_TS + 60)


def _delete_records_below(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.delete_records([TopicPartition(topic, partition, offset)]).values()
    assert future.result(timeout=30).low_watermark == offset


def test_deleted_records_fail_the_read_or_are_skipped_per_fail_on_data_loss(spark, spark_broker, topic_name) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 1)
    produce(spark_broker.bootstrap, topic_name, _records(100, 1))
    _delete_records_below(spark_broker.bootstrap, topic_name, 0, 40)

    def read(fail_on_data_loss: str):  # type: ignore[no-untyped-def]
        return (spark.read.format("pafka")
                .option("kafka.bootstrap.servers", spark_broker.bootstrap)
                .option("subscribe", topic_name)
                .option("startingOffsets", json.dumps({topic_name: {"0": 10}}))
                .option("failOnDataLoss", fail_on_data_loss)
                .load())

    with pytest.raises(Exception, match="failOnDataLoss"):
        read("true").collect()
    assert sorted(r.offset for r in read("false").collect()) == list(range(40, 100))


def test_batch_read_of_an_empty_topic_has_no_rows(spark, spark_broker, topic_name) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 2)
    df = (spark.read.format("pafka")
          .option("kafka.bootstrap.servers", spark_broker.bootstrap)
          .option("subscribe", topic_name)
          .load())
    assert df.count() == 0
