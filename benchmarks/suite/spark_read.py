"""Rows per second from pafka into Spark through the ``pafka`` data source (local[2]).

    .venv/bin/python benchmarks/suite/spark_read.py [--records 1000000] [--value-bytes 100] [--partitions 2] [--runs 5]

Starts a real ``pafka broker`` (temp dir, loopback port), produces the records
with pafka's client, then measures:

1. the executor-side fetch alone, one partition range at a time in this
   process, building the same Arrow batches three ways: with pafka's own
   client and the column-wise decoder (``spark_jobs.kafka_fetch.read_range``,
   what the source uses), with confluent-kafka (librdkafka) consuming the same range, and with pafka's
   ``KafkaClient.fetch`` decoding each record into a ``Record`` object;
2. Spark: ``spark.read.format("pafka")...load().groupBy().count()`` over the
   whole topic (batch), and the same count as a streaming query with
   Trigger.AvailableNow, after two warm-up runs (Python workers start, the JVM
   compiles its hot paths). Each figure is whole queries, planning included.

Prints one line per figure. Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import pyarrow as pa
import pyarrow.compute as pc

from client import KafkaClient, ProducerRecord, TopicPartition
from pytest_pafka.broker_process import BrokerProcess
from spark_jobs.kafka_fetch import FetchSettings, arrow_schema, read_range
from testing.topics import create_topics

TOPIC = "spark-read-bench"
EMPTY_TOPIC = "spark-read-bench-empty"


def produce(bootstrap: str, records: int, value_bytes: int, partitions: int) -> None:
    create_topics(bootstrap, [TOPIC, EMPTY_TOPIC], partitions)
    with KafkaClient(bootstrap) as client:
        value = os.urandom(value_bytes // 2).hex().encode()[:value_bytes]
        per_batch = 4000
        done = 0
        while done < records:
            batches = {}
            for p in range(partitions):
                n = min(per_batch, records - done)
                if n <= 0:
                    break
                batches[TopicPartition(TOPIC, p)] = client.build_batch(
                    [ProducerRecord(value, b"%d" % (done + i)) for i in range(n)])
                done += n
            client.produce_batches(batches)


def end_offsets(bootstrap: str, partitions: int) -> dict[int, int]:
    with KafkaClient(bootstrap) as client:
        return {p: client.latest_offset(TOPIC, p) for p in range(partitions)}


def confluent_read_range(bootstrap: str, topic: str, partition: int, start: int, end: int,
                         batch_rows: int = 20_000) -> Iterator[pa.RecordBatch]:
    """The same Arrow batches as ``read_range``, consumed with confluent-kafka."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pafka-spark-bench",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                         "max.partition.fetch.bytes": 8 * 1024 * 1024, "queued.min.messages": 200000})
    schema = arrow_schema(False)
    consumer.assign([CTopicPartition(topic, partition, start)])
    offset = start
    try:
        while offset < end:
            messages = [m for m in consumer.consume(num_messages=batch_rows, timeout=0.05)
                        if m.error() is None and m.offset() < end]
            if not messages:
                continue
            offset = messages[-1].offset() + 1
            n = len(messages)
            stamps = [m.timestamp() for m in messages]
            millis = pa.array([t[1] for t in stamps], pa.int64())
            yield pa.RecordBatch.from_arrays([
                pa.array([m.key() for m in messages], pa.binary()),
                pa.array([m.value() for m in messages], pa.binary()),
                pa.repeat(pa.scalar(topic, pa.string()), n),
                pa.repeat(pa.scalar(partition, pa.int32()), n),
                pa.array([m.offset() for m in messages], pa.int64()),
                pc.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")),
                pa.array([t[0] - 1 for t in stamps], pa.int32()),
            ], schema=schema)
    finally:
        consumer.close()


def records_read_range(bootstrap: str, topic: str, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
    """The same Arrow batches from pafka's KafkaClient.fetch, which decodes each record into a Record object."""
    schema = arrow_schema(False)
    with KafkaClient(bootstrap) as client:
        offset = start
        while offset < end:
            result = client.fetch(topic, partition, offset, partition_max_bytes=8 * 1024 * 1024,
                                  max_bytes=8 * 1024 * 1024)
            records = [r for b in result.batches for r in b.records if r.offset < end]
            offset = result.next_offset
            if not records:
                continue
            n = len(records)
            millis = pa.array([r.timestamp for r in records], pa.int64())
            yield pa.RecordBatch.from_arrays([
                pa.array([r.key for r in records], pa.binary()),
                pa.array([r.value for r in records], pa.binary()),
                pa.repeat(pa.scalar(topic, pa.string()), n),
                pa.repeat(pa.scalar(partition, pa.int32()), n),
                pa.array([r.offset for r in records], pa.int64()),
                pc.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")),
                pa.array([0] * n, pa.int32()),
            ], schema=schema)


def time_fetch(label: str, read: Callable[[int, int, int], Iterator[pa.RecordBatch]], ends: dict[int, int],
               runs: int) -> None:
    rates = []
    for _ in range(runs):
        started = time.perf_counter()
        rows = sum(batch.num_rows for p, end in ends.items() for batch in read(p, 0, end))
        elapsed = time.perf_counter() - started
        assert rows == sum(ends.values()), (rows, ends)
        rates.append(rows / elapsed)
    print(f"fetch -> Arrow, {label:<22} {statistics.median(rates):>12,.0f} rows/s median "
          f"(best {max(rates):,.0f}, {runs} runs, one process)")


def spark_session():  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    import spark_jobs

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    spark = (SparkSession.builder.master("local[2]").appName("pafka-spark-read-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.local.dir", tempfile.mkdtemp(prefix="pafka-spark-bench-"))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_jobs.register(spark)
    return spark


def time_spark(label: str, run: Callable[[str], int], records: int, runs: int, warmups: int = 2) -> None:
    """Whole queries over the topic, and over an empty topic for the fixed cost of a query."""
    for _ in range(warmups):
        # Python workers start and import, the JVM compiles the hot paths.
        assert run(TOPIC) == records
    seconds, empty_seconds = [], []
    for _ in range(runs):
        started = time.perf_counter()
        counted = run(TOPIC)
        seconds.append(time.perf_counter() - started)
        assert counted == records, (counted, records)
        started = time.perf_counter()
        assert run(EMPTY_TOPIC) == 0
        empty_seconds.append(time.perf_counter() - started)
    median, fixed = statistics.median(seconds), statistics.median(empty_seconds)
    print(f"spark count, {label:<27} {records / median:>12,.0f} rows/s median "
          f"(best {records / min(seconds):,.0f}, {runs} runs; load average {os.getloadavg()[0]:.1f}); "
          f"an empty topic's query takes {fixed:.2f}s, {records / max(median - fixed, 1e-9):,.0f} rows/s beyond it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-fetch", action="store_true", help="only the Spark figures")
    parser.add_argument("--skip-spark", action="store_true", help="only the fetch figures")
    args = parser.parse_args()

    with BrokerProcess() as broker:
        started = time.perf_counter()
        produce(broker.bootstrap, args.records, args.value_bytes, args.partitions)
        print(f"produced {args.records:,} records of {args.value_bytes} bytes into {args.partitions} partitions "
              f"in {time.perf_counter() - started:.1f}s")
        ends = end_offsets(broker.bootstrap, args.partitions)
        if not args.skip_fetch:
            settings = FetchSettings(broker.bootstrap)
            time_fetch("pafka, column-wise", lambda p, s, e: read_range(settings, TOPIC, p, s, e), ends, args.runs)
            time_fetch("pafka, Record objects", lambda p, s, e: records_read_range(broker.bootstrap, TOPIC, p, s, e),
                       ends, args.runs)
            time_fetch("confluent-kafka", lambda p, s, e: confluent_read_range(broker.bootstrap, TOPIC, p, s, e),
                       ends, args.runs)
        if not args.skip_spark:
            spark = spark_session()
            try:
                bench_spark(spark, broker.bootstrap, args.records, args.runs)
            finally:
                spark.stop()


def bench_spark(spark, bootstrap: str, records: int, runs: int) -> None:  # type: ignore[no-untyped-def]
    def batch_count(topic: str) -> int:
        df = spark.read.format("pafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
        return df.groupBy().count().collect()[0][0]

    time_spark("batch read", batch_count, records, runs)

    def streaming_count(topic: str) -> int:
        with tempfile.TemporaryDirectory(prefix="pafka-spark-bench-ckpt-") as checkpoint:
            name = f"bench_count_{time.monotonic_ns()}"
            df = (spark.readStream.format("pafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest").load())
            query = (df.groupBy().count().writeStream.outputMode("complete").format("memory").queryName(name)
                     .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
            query.awaitTermination()
            rows = spark.table(name).collect()
            return rows[0][0] if rows else 0

    time_spark("streaming, AvailableNow", streaming_count, records, runs)


if __name__ == "__main__":
    main()
