"""spark.readStream.format("pafka"): micro-batches, limits, starting points and new partitions."""

from __future__ import annotations

import json

from pytest_pafka.waiting import wait_until
from testing.topics import create_topic
from tests.spark.kafka_data import add_partitions, produce

BASE_TS = 1_700_000_000_000


def _records(n: int, partitions: int, *, first: int = 0, partition: int | None = None) -> list[tuple]:
    return [
        (i % partitions if partition is None else partition, f"k{i}".encode(), f"v{i}".encode(), [], BASE_TS + i)
        for i in range(first, first + n)
    ]


def _stream(spark, bootstrap: str, topic: str, **options: str):  # type: ignore[no-untyped-def]
    reader = (spark.readStream.format("pafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _run_available_now(df, name: str, checkpoint: str):  # type: ignore[no-untyped-def]
    query = (df.writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120), "AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query



def _count_then_process(spark, name: str, query, wanted: int) -> int:  # type: ignore[no-untyped-def]
    """The rows in the query's table; below ``wanted``, the query processes what has arrived meanwhile."""
    count: int = spark.table(name).count()
    if count < wanted:
        query.processAllAvailable()
    return count

def test_max_offsets_per_trigger_limits_each_micro_batch(spark, spark_broker, topic_name, work_dir) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 3)
    produced = produce(spark_broker.bootstrap, topic_name, _records(1000, 3))
    df = _stream(spark, spark_broker.bootstrap, topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="300")
    name = "limited_" + topic_name.replace("-", "_")
    query = _run_available_now(df, name, str(work_dir / "ckpt"))
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [300, 300, 300, 100]
    got = sorted((r.partition, r.offset) for r in spark.table(name).collect())
    assert got == sorted((p.partition, p.offset) for p in produced)


def test_starting_offsets_json_starts_where_asked(spark, spark_broker, topic_name, work_dir) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 3)
    produced = produce(spark_broker.bootstrap, topic_name, _records(300, 3))
    starting = {topic_name: {"0": 40, "1": -2, "2": -1}}
    df = _stream(spark, spark_broker.bootstrap, topic_name, startingOffsets=json.dumps(starting))
    name = "json_" + topic_name.replace("-", "_")
    _run_available_now(df, name, str(work_dir / "ckpt"))
    got = sorted((r.partition, r.offset, bytes(r.value)) for r in spark.table(name).collect())
    assert got == sorted((p.partition, p.offset, p.value) for p in produced
                         if (p.partition == 0 and p.offset >= 40) or p.partition == 1)


def test_starting_timestamp_starts_where_asked(spark, spark_broker, topic_name, work_dir) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 3)
    produced = produce(spark_broker.bootstrap, topic_name, _records(300, 3))
    df = _stream(spark, spark_broker.bootstrap, topic_name, startingTimestamp=str(BASE_TS + 250))
    name = "ts_" + topic_name.replace("-", "_")
    _run_available_now(df, name, str(work_dir / "ckpt"))
    got = sorted((r.partition, r.offset) for r in spark.table(name).collect())
    assert got == sorted((p.partition, p.offset) for p in produced if p.timestamp_ms >= BASE_TS + 250)
    assert len(got) == 50


def test_partition_added_mid_stream_is_read_from_its_beginning(spark, spark_broker, topic_name, work_dir) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 2)
    produced = produce(spark_broker.bootstrap, topic_name, _records(200, 2))
    df = _stream(spark, spark_broker.bootstrap, topic_name, startingOffsets="earliest")
    name = "grow_" + topic_name.replace("-", "_")
    query = (df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(work_dir / "ckpt"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        assert spark.table(name).count() == 200
        add_partitions(spark_broker.bootstrap, topic_name, 3)
        produced += produce(spark_broker.bootstrap, topic_name, _records(50, 3, first=200, partition=2))
        produced += produce(spark_broker.bootstrap, topic_name, _records(20, 2, first=250))
        wait_until(lambda: _count_then_process(spark, name, query, 270), 60, "270 rows in the table", interval=0.2,
                   until=lambda count: count >= 270)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    got = sorted((r.partition, r.offset, bytes(r.key)) for r in spark.table(name).collect())
    assert got == sorted((p.partition, p.offset, p.key) for p in produced)
    assert [o for p, o, _ in got if p == 2] == list(range(50))


def test_subscribe_pattern_picks_up_a_new_topic_from_its_beginning(spark, spark_broker, topic_name, work_dir) -> None:
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(spark_broker.bootstrap, first, 1)
    produced = produce(spark_broker.bootstrap, first, _records(30, 1))
    df = (spark.readStream.format("pafka")
          .option("kafka.bootstrap.servers", spark_broker.bootstrap)
          .option("subscribePattern", topic_name + "-[ab]")
          .option("startingOffsets", "earliest")
          .load())
    name = "pattern_" + topic_name.replace("-", "_")
    query = (df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(work_dir / "ckpt"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        create_topic(spark_broker.bootstrap, second, 2)
        later = produce(spark_broker.bootstrap, second, _records(40, 2))
        wait_until(lambda: _count_then_process(spark, name, query, 70), 60, "70 rows in the table", interval=0.2,
                   until=lambda count: count >= 70)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    got = sorted((r.topic, r.partition, r.offset) for r in spark.table(name).collect())
    assert got == sorted([(first, p.partition, p.offset) for p in produced]
                         + [(second, p.partition, p.offset) for p in later])


def test_stream_rides_out_a_broker_restart(spark, spark_broker, topic_name, work_dir) -> None:
    create_topic(spark_broker.bootstrap, topic_name, 2)
    produced = produce(spark_broker.bootstrap, topic_name, _records(100, 2))
    df = _stream(spark, spark_broker.bootstrap, topic_name, startingOffsets="earliest")
    name = "restart_" + topic_name.replace("-", "_")
    query = (df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(work_dir / "ckpt"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        spark_broker.restart()
        produced += produce(spark_broker.bootstrap, topic_name, _records(60, 2, first=100))
        def rows() -> int:
            assert query.exception() is None, query.exception()
            return spark.table(name).count()

        wait_until(rows, 60, "160 rows in the table", interval=0.2, until=lambda count: count >= 160)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    got = sorted((r.partition, r.offset) for r in spark.table(name).collect())
    assert got == sorted((p.partition, p.offset) for p in produced)
