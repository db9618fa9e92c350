"""A streaming read stopped halfway and restarted from its checkpoint delivers every record exactly once."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pytest_pafka.waiting import wait_until
from testing.topics import create_topic
from tests.spark.kafka_data import produce

RECORDS = 200_000
PARTITIONS = 3
BASE_TS = 1_700_000_000_000


def _records() -> list[tuple]:
    out = []
    for i in range(RECORDS):
        key = None if i % 97 == 0 else f"key-{i}".encode()
        value = None if i % 101 == 0 else (f"value-{i}-".encode() * (1 + i % 5))
        headers = [("trace", f"t{i}".encode()), ("empty", None)] if i % 3 == 0 else []
        out.append((i % PARTITIONS, key, value, headers, BASE_TS + (i * 7) % 100_000))
    return out


def _stream_to_parquet(spark, bootstrap: str, topic: str, out: str, checkpoint: str, **trigger):  # type: ignore[no-untyped-def]
    df = (spark.readStream.format("pafka")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic)
          .option("startingOffsets", "earliest")
          .option("includeHeaders", "true")
          .option("maxOffsetsPerTrigger", "20000")
          .load())
    return (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
            .trigger(**trigger).start())


@pytest.mark.slow
def test_stream_stopped_halfway_and_restarted_delivers_each_record_once(spark, spark_broker, topic_name, work_dir) -> None:
    create_topic(spark_broker.bootstrap, topic_name, PARTITIONS)
    produced = produce(spark_broker.bootstrap, topic_name, _records())
    assert len(produced) == RECORDS
    out, checkpoint = str(work_dir / "out"), str(work_dir / "ckpt")

    first = _stream_to_parquet(spark, spark_broker.bootstrap, topic_name, out, checkpoint,
                               processingTime="100 milliseconds")
    try:
        def half_read() -> bool:
            assert first.exception() is None, first.exception()
            return sum(p["numInputRows"] for p in first.recentProgress) >= RECORDS // 2

        wait_until(half_read, 180, "the first run did not reach half the records")
    finally:
        first.stop()
    first_rows = sum(p["numInputRows"] for p in first.recentProgress)
    assert RECORDS // 2 <= first_rows < RECORDS, "the first run must stop partway"

    second = _stream_to_parquet(spark, spark_broker.bootstrap, topic_name, out, checkpoint, availableNow=True)
    assert second.awaitTermination(300), "the restarted run did not finish"
    assert second.exception() is None, second.exception()
    # The restarted run may re-plan the batch the stop interrupted; the sink's log keeps it once.
    assert sum(p["numInputRows"] for p in second.recentProgress) > 0

    table = spark.read.parquet(out).toArrow()
    _assert_table_equals(table, produced, topic_name)


def _assert_table_equals(table: pa.Table, produced, topic: str) -> None:  # type: ignore[no-untyped-def]
    assert table.num_rows == RECORDS
    rows = table.sort_by([("partition", "ascending"), ("offset", "ascending")])
    want = sorted(produced, key=lambda p: (p.partition, p.offset))
    assert rows.column("partition").to_pylist() == [p.partition for p in want]
    assert rows.column("offset").to_pylist() == [p.offset for p in want]
    assert set(rows.column("topic").to_pylist()) == {topic}
    assert rows.column("key").to_pylist() == [p.key for p in want]
    assert rows.column("value").to_pylist() == [p.value for p in want]
    micros = rows.column("timestamp").cast(pa.int64()).to_pylist()
    assert micros == [p.timestamp_ms * 1000 for p in want]
    assert set(rows.column("timestampType").to_pylist()) == {0}
    headers = [[(h["key"], h["value"]) for h in hs] for hs in rows.column("headers").to_pylist()]
    assert headers == [list(p.headers) for p in want]
