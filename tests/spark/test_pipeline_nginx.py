"""The nginx pipeline end to end: generator -> broker -> streaming job and batch job -> equal windows.

Generated lines go into a real broker; the streaming job (pafka source, watermark, AvailableNow,
pafka sink and Parquet) and the batch job (pafka batch source) run in the shared local[2] session.
Their windows must be equal field by field, the stats topic must carry the same windows, and all of
them must match statistics computed here in plain Python from the generated entries.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from spark_jobs import nginx_stats_batch, nginx_stats_streaming
from spark_jobs.nginx_aggregates import ACCESS_LINE_PATTERN, TOP_PATHS
from spark_jobs.nginx_log_generator import (
    END_OF_STREAM_KEY,
    MAX_DISORDER_S,
    AccessLogEntry,
    ensure_topic,
    generate,
    produce,
)
from tests.spark.test_sink_roundtrip import consume_all

RECORDS = 6_000
MINUTES = 6


def spark_percentile(values: list[float], percentage: float) -> float:
    """Spark's exact ``percentile``: linear interpolation at position (n - 1) * p of the sorted values."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * percentage
    lower, higher = math.floor(position), math.ceil(position)
    if lower == higher:
        return ordered[lower]
    return (higher - position) * ordered[lower] + (position - lower) * ordered[higher]


def expected_windows(entries: list[AccessLogEntry]) -> dict[datetime, dict]:
    """The statistics per one-minute window, computed without Spark."""
    per_window: dict[datetime, list[AccessLogEntry]] = defaultdict(list)
    for e in entries:
        per_window[e.time.replace(second=0, microsecond=0)].append(e)
    out = {}
    for start, window in per_window.items():
        paths = Counter(e.path for e in window)
        out[start] = {
            "window_end": start + timedelta(minutes=1),
            "requests": len(window),
            "bytes_served": sum(e.body_bytes_sent for e in window),
            "p95_request_time": spark_percentile([e.request_time for e in window], 0.95),
            "status_counts": dict(Counter(e.status for e in window)),
            "top_paths": sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_PATHS],
        }
    return out


def as_utc(ts: datetime) -> datetime:
    # The session time zone is UTC; Spark hands back naive datetimes in the local zone.
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def test_generator_is_deterministic_realistic_and_parseable() -> None:
    import re

    entries = generate(2_000, seed=11, minutes=4)
    assert entries == generate(2_000, seed=11, minutes=4)
    assert entries != generate(2_000, seed=12, minutes=4)
    pattern = re.compile(ACCESS_LINE_PATTERN)
    for e in entries:
        m = pattern.match(e.line())
        assert m, e.line()
        assert (m.group(7), m.group(11)) == (str(e.status), f"{e.request_time:.3f}")
    minutes = {e.time.replace(second=0) for e in entries}
    assert len(minutes) == 4
    assert len({e.status for e in entries}) >= 8 and len({e.path for e in entries}) >= 20
    # Out of order, but never by more than the bound the watermark relies on.
    latest = entries[0].time
    for e in entries:
        assert (latest - e.time).total_seconds() <= MAX_DISORDER_S + 1
        latest = max(latest, e.time)
    assert any(b.time < a.time for a, b in itertools.pairwise(entries))


def test_generator_command_line_produces_into_three_partitions(spark_broker, topic_name) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "spark_jobs.nginx_log_generator", "--bootstrap-servers", spark_broker.bootstrap,
         "--records", "300", "--topic", topic_name, "--minutes", "2"],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    consumed = consume_all(spark_broker.bootstrap, topic_name)
    assert {r.partition for r in consumed} == {0, 1, 2}
    entries = generate(300, minutes=2)
    assert sorted(r.value.decode() for r in consumed if r.key != END_OF_STREAM_KEY) == sorted(e.line() for e in entries)
    assert [r.key for r in consumed].count(END_OF_STREAM_KEY) == 1


def test_batch_compare_reports_every_difference() -> None:
    from pyspark.sql import Row

    def window(minute: int, requests: int, statuses: dict[int, int]) -> Row:
        start = datetime(2026, 3, 1, 12, minute)  # noqa: DTZ001 -- naive, as Spark's collect() returns timestamps
        return Row(window_start=start, window_end=start + timedelta(minutes=1), requests=requests,
                   bytes_served=10 * requests, p95_request_time=0.25, status_counts=statuses,
                   top_paths=[Row(path="/", requests=requests)])

    batch = [window(0, 5, {200: 5}), window(1, 3, {200: 2, 404: 1}), window(2, 1, {200: 1})]
    assert nginx_stats_batch.differences(batch, list(batch)) == []
    streaming = [window(0, 5, {200: 5}), window(1, 3, {200: 3}), window(3, 1, {200: 1})]
    problems = nginx_stats_batch.differences(batch, streaming)
    assert len(problems) == 3
    assert "12:02:00 only in the batch output" in problems[0]
    assert "12:03:00 only in the streaming output" in problems[1]
    assert "status_counts" in problems[2] and "12:01:00" in problems[2]


@pytest.mark.slow
def test_streaming_and_batch_aggregates_agree_exactly(spark, spark_broker, topic_name, work_dir: Path) -> None:
    source_topic, stats_topic = f"{topic_name}-log", f"{topic_name}-stats"
    entries = generate(RECORDS, seed=7, minutes=MINUTES)
    first_run = RECORDS * 2 // 3
    ensure_topic(spark_broker.bootstrap, source_topic, 3)
    streaming = nginx_stats_streaming.StreamingSettings(
        bootstrap_servers=spark_broker.bootstrap, output_dir=work_dir, source_topic=source_topic,
        stats_topic=stats_topic)

    # Run 1 sees the first four minutes: the watermark (max event time - 2 min) closes the first
    # windows only; the later ones stay in the state store.
    produce(spark_broker.bootstrap, entries[:first_run], topic=source_topic, with_end_marker=False)
    early = nginx_stats_streaming.run(spark, streaming, timeout_s=300)
    assert all(sum(p["numInputRows"] for p in q.recentProgress) == first_run for q in early)
    emitted_early = spark.read.parquet(str(streaming.parquet_dir)).count()
    assert 1 <= emitted_early < MINUTES - 1

    # Run 2 restarts from the checkpoints with the rest and the end marker: every window closes.
    produce(spark_broker.bootstrap, entries[first_run:], topic=source_topic)
    late = nginx_stats_streaming.run(spark, streaming, timeout_s=300)
    assert all(sum(p["numInputRows"] for p in q.recentProgress) == RECORDS - first_run + 1 for q in late)

    batch_rows = nginx_stats_batch.run(spark, nginx_stats_batch.BatchSettings(
        spark_broker.bootstrap, work_dir, source_topic))
    streaming_rows = nginx_stats_batch.windows_in_order(spark.read.parquet(str(streaming.parquet_dir)))

    # Streaming and batch: the same windows, every statistic equal.
    assert nginx_stats_batch.differences(batch_rows, streaming_rows) == []
    assert nginx_stats_batch.comparable(batch_rows) == nginx_stats_batch.comparable(streaming_rows)
    assert len(batch_rows) == MINUTES
    assert sum(r["requests"] for r in streaming_rows) == RECORDS

    # Both equal the statistics computed without Spark from the generated entries.
    expected = expected_windows(entries)
    got = {as_utc(r["window_start"]): r for r in nginx_stats_batch.comparable(batch_rows)}
    assert sorted(got) == sorted(expected)
    for start, stats in expected.items():
        row = got[start]
        assert as_utc(row["window_end"]) == stats["window_end"]
        assert (row["requests"], row["bytes_served"]) == (stats["requests"], stats["bytes_served"])
        assert row["status_counts"] == stats["status_counts"]
        assert row["top_paths"] == stats["top_paths"]
        assert row["p95_request_time"] == pytest.approx(stats["p95_request_time"], rel=1e-12)

    # The stats topic, written by the pafka sink, carries the same windows as JSON.
    published = {r.key.decode(): json.loads(r.value) for r in consume_all(spark_broker.bootstrap, stats_topic)}
    assert len(published) == len(expected)
    for start in expected:
        record = published[start.strftime("%Y-%m-%dT%H:%M:%SZ")]
        row = got[start]
        assert record["requests"] == row["requests"] and record["bytes_served"] == row["bytes_served"]
        assert record["p95_request_time"] == row["p95_request_time"]
        assert {int(k): v for k, v in record["status_counts"].items()} == row["status_counts"]
        assert [(p["path"], p["requests"]) for p in record["top_paths"]] == row["top_paths"]
