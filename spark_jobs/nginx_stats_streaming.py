"""Streaming job: per-minute access-log statistics from ``nginx_access_log`` to a topic and Parquet.

Run against a broker::

    python -m spark_jobs.nginx_stats_streaming --bootstrap-servers 127.0.0.1:9092 --output-dir ./nginx-stats

It reads ``nginx_access_log`` with the ``pafka`` source, computes the statistics of
``spark_jobs/nginx_aggregates.py`` per one-minute event-time window with a watermark, and writes
each finished window (append mode) to the topic ``nginx_access_stats`` through the ``pafka`` sink
(key: window start, value: JSON) and to Parquet under ``OUTPUT_DIR/streaming``. Checkpoints live
under ``OUTPUT_DIR/checkpoints`` unless ``--checkpoint-dir`` says otherwise, so a restarted job
resumes where it stopped.

``--trigger available-now`` (the default) processes everything in the topic and stops; windows
are emitted once the watermark passes their end, which the generator's end-of-stream marker
guarantees for all of them. ``--trigger processing-time`` keeps running, one micro-batch every
``--interval``.

The end marker closes every window only if it is read in the same micro-batch as, or after, the
last lines of every partition: a line read after it is older than the watermark and dropped as
late. That holds when the whole rest of the topic fits one micro-batch, so the final run should
not set ``--max-offsets-per-trigger`` (the job warns when it is set together with available-now).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spark_jobs.nginx_aggregates import (
    DEFAULT_SHUFFLE_PARTITIONS,
    STATS_TOPIC,
    WATERMARK_DELAY,
    parse_access_log,
    spark_session,
    stats_as_records,
    stats_per_window,
)
from spark_jobs.nginx_log_generator import ACCESS_LOG_TOPIC, ensure_topic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

STATS_TOPIC_PARTITIONS = 1


@dataclass(frozen=True)
class StreamingSettings:
    bootstrap_servers: str
    output_dir: Path
    checkpoint_dir: Path | None = None
    source_topic: str = ACCESS_LOG_TOPIC
    stats_topic: str = STATS_TOPIC
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    available_now: bool = True
    interval: str = "10 seconds"
    watermark_delay: str = WATERMARK_DELAY

    @property
    def parquet_dir(self) -> Path:
        return self.output_dir / "streaming"

    @property
    def checkpoints(self) -> Path:
        return self.checkpoint_dir or self.output_dir / "checkpoints"


def read_access_log(spark: SparkSession, settings: StreamingSettings) -> DataFrame:
    """The one place the job reads its input: the ``pafka`` streaming source."""
    reader = (spark.readStream.format("pafka")
              .option("kafka.bootstrap.servers", settings.bootstrap_servers)
              .option("subscribe", settings.source_topic)
              .option("startingOffsets", settings.starting_offsets))
    if settings.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
    return reader.load()


def start(spark: SparkSession, settings: StreamingSettings) -> list[StreamingQuery]:
    """Start the two queries (topic and Parquet); each has its own checkpoint."""
    stats = stats_per_window(parse_access_log(read_access_log(spark, settings)),
                             watermark_delay=settings.watermark_delay)
    to_topic = (stats_as_records(stats).writeStream.format("pafka").outputMode("append")
                .queryName("nginx_stats_to_topic")
                .option("kafka.bootstrap.servers", settings.bootstrap_servers)
                .option("topic", settings.stats_topic)
                .option("checkpointLocation", str(settings.checkpoints / "topic")))
    to_parquet = (stats.writeStream.format("parquet").outputMode("append")
                  .queryName("nginx_stats_to_parquet")
                  .option("path", str(settings.parquet_dir))
                  .option("checkpointLocation", str(settings.checkpoints / "parquet")))
    queries = []
    for writer in (to_topic, to_parquet):
        writer = writer.trigger(availableNow=True) if settings.available_now \
            else writer.trigger(processingTime=settings.interval)
        queries.append(writer.start())
    return queries


def run(spark: SparkSession, settings: StreamingSettings, timeout_s: int | None = None) -> list[StreamingQuery]:
    """Run both queries until they stop (AvailableNow: when the topic is processed); raise if one failed."""
    ensure_topic(settings.bootstrap_servers, settings.stats_topic, STATS_TOPIC_PARTITIONS)
    queries = start(spark, settings)
    try:
        for query in queries:
            query.awaitTermination(timeout_s)
    finally:
        for query in queries:
            query.stop()
    for query in queries:
        error = query.exception()
        if error is not None:
            raise RuntimeError(f"query {query.name} failed: {error}")
    return queries


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--output-dir", type=Path, default=Path("nginx-stats"))
    parser.add_argument("--checkpoint-dir", type=Path, default=None)
    parser.add_argument("--source-topic", default=ACCESS_LOG_TOPIC)
    parser.add_argument("--stats-topic", default=STATS_TOPIC)
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--trigger", choices=("available-now", "processing-time"), default="available-now")
    parser.add_argument("--interval", default="10 seconds", help="micro-batch interval for processing-time")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, or local[*])")
    parser.add_argument("--shuffle-partitions", type=int, default=DEFAULT_SHUFFLE_PARTITIONS,
                        help="spark.sql.shuffle.partitions (and the streaming job's state-store partitions)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    settings = StreamingSettings(
        bootstrap_servers=args.bootstrap_servers, output_dir=args.output_dir, checkpoint_dir=args.checkpoint_dir,
        source_topic=args.source_topic, stats_topic=args.stats_topic, starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=args.max_offsets_per_trigger, available_now=args.trigger == "available-now",
        interval=args.interval)
    if settings.available_now and settings.max_offsets_per_trigger is not None:
        print("warning: with --max-offsets-per-trigger the end-of-stream marker may be read before the "
              "last lines of other partitions, which are then dropped as late", file=sys.stderr)
    spark = spark_session("nginx-stats-streaming", args.master, args.shuffle_partitions)
    try:
        run(spark, settings)
        print(f"windows written to {settings.stats_topic} and {settings.parquet_dir}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
