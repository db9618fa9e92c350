"""Offline batch job: the same per-minute access-log statistics over the whole topic.

Run against a broker::

    python -m spark_jobs.nginx_stats_batch --bootstrap-servers 127.0.0.1:9092 --output-dir ./nginx-stats

It reads ``nginx_access_log`` from its earliest to its latest offsets with the ``pafka`` batch
source, applies ``spark_jobs/nginx_aggregates.py`` (no watermark: every window is complete), writes
the windows to Parquet under ``OUTPUT_DIR/batch`` (replacing an earlier run) and prints the totals.
With ``--compare`` it also reads the streaming job's Parquet output (``OUTPUT_DIR/streaming``) and
exits with status 1 unless both have exactly the same windows with exactly the same statistics.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_jobs.nginx_aggregates import (
    DEFAULT_SHUFFLE_PARTITIONS,
    STATS_COLUMNS,
    parse_access_log,
    spark_session,
    stats_per_window,
)
from spark_jobs.nginx_log_generator import ACCESS_LOG_TOPIC

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession


@dataclass(frozen=True)
class BatchSettings:
    bootstrap_servers: str
    output_dir: Path
    source_topic: str = ACCESS_LOG_TOPIC

    @property
    def parquet_dir(self) -> Path:
        return self.output_dir / "batch"

    @property
    def streaming_parquet_dir(self) -> Path:
        return self.output_dir / "streaming"


def read_access_log(spark: SparkSession, settings: BatchSettings) -> DataFrame:
    """The one place the job reads its input: the ``pafka`` batch source, the whole topic."""
    return (spark.read.format("pafka")
            .option("kafka.bootstrap.servers", settings.bootstrap_servers)
            .option("subscribe", settings.source_topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load())


def run(spark: SparkSession, settings: BatchSettings) -> list[Row]:
    """Compute, write to Parquet, and return the windows in window order."""
    stats = stats_per_window(parse_access_log(read_access_log(spark, settings)))
    stats.write.mode("overwrite").parquet(str(settings.parquet_dir))
    return windows_in_order(spark.read.parquet(str(settings.parquet_dir)))


def windows_in_order(stats: DataFrame) -> list[Row]:
    return stats.select(*STATS_COLUMNS).orderBy("window_start").collect()


def comparable(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Rows as plain values (maps as dicts, structs as tuples), for exact comparison."""
    out = []
    for row in rows:
        values = row.asDict(recursive=True)
        values["top_paths"] = [(p["path"], p["requests"]) for p in values["top_paths"]]
        out.append(values)
    return out


def differences(batch: Sequence[Row], streaming: Sequence[Row]) -> list[str]:
    """What differs between two sets of windows; empty when they agree exactly."""
    by_start_b = {r["window_start"]: r for r in comparable(batch)}
    by_start_s = {r["window_start"]: r for r in comparable(streaming)}
    problems = [f"window {start} only in the batch output" for start in sorted(set(by_start_b) - set(by_start_s))]
    problems += [f"window {start} only in the streaming output" for start in sorted(set(by_start_s) - set(by_start_b))]
    for start in sorted(set(by_start_b) & set(by_start_s)):
        for column in STATS_COLUMNS:
            if by_start_b[start][column] != by_start_s[start][column]:
                problems.append(f"window {start} {column}: batch {by_start_b[start][column]!r} "
                                f"!= streaming {by_start_s[start][column]!r}")
    return problems


def totals(rows: Sequence[Row]) -> dict[str, int]:
    return {"windows": len(rows), "requests": sum(r["requests"] for r in rows),
            "bytes_served": sum(r["bytes_served"] for r in rows)}


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--output-dir", type=Path, default=Path("nginx-stats"))
    parser.add_argument("--source-topic", default=ACCESS_LOG_TOPIC)
    parser.add_argument("--compare", action="store_true",
                        help="compare with the streaming job's Parquet output; exit 1 on any difference")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, or local[*])")
    parser.add_argument("--shuffle-partitions", type=int, default=DEFAULT_SHUFFLE_PARTITIONS,
                        help="spark.sql.shuffle.partitions (and the streaming job's state-store partitions)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    settings = BatchSettings(args.bootstrap_servers, args.output_dir, args.source_topic)
    spark = spark_session("nginx-stats-batch", args.master, args.shuffle_partitions)
    try:
        rows = run(spark, settings)
        for row in rows:
            print(f"{row['window_start']:%Y-%m-%d %H:%M}  requests={row['requests']:>7}  "
                  f"bytes={row['bytes_served']:>12}  p95={row['p95_request_time']:.3f}s  "
                  f"statuses={dict(sorted(row['status_counts'].items()))}")
        print("totals:", totals(rows))
        if not args.compare:
            return 0
        streaming = windows_in_order(spark.read.parquet(str(settings.streaming_parquet_dir)))
        problems = differences(rows, streaming)
        for problem in problems:
            print(problem)
        print("streaming totals:", totals(streaming))
        print("batch and streaming agree" if not problems else f"{len(problems)} differences")
        return 1 if problems else 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
