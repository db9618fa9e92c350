"""The access-log statistics both nginx jobs compute: one definition, so they cannot drift.

Per one-minute event-time window (``window_start`` inclusive, ``window_end`` exclusive):

- ``requests``: requests in the window;
- ``bytes_served``: sum of ``$body_bytes_sent``;
- ``p95_request_time``: exact 95th percentile of ``$request_time`` in seconds (Spark's
  ``percentile``: linear interpolation between the two nearest ranks);
- ``status_counts``: map of HTTP status to requests;
- ``top_paths``: the ``TOP_PATHS`` most requested paths (URI without query string) as
  ``(path, requests)``, most requested first, ties by path.

The streaming job applies these with a watermark on the event time (the time in the log line),
so a window is emitted once the watermark passes its end; the batch job applies them to the whole
topic. The generator's end-of-stream marker takes part in the watermark but is not a request.
Everything here is deterministic (exact percentile, counts computed from the window's rows), so the
two jobs' rows are equal, not just close.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from spark_jobs.nginx_log_generator import END_OF_STREAM_KEY

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

WINDOW_DURATION = "1 minute"
WATERMARK_DELAY = "2 minutes"  # well above the generator's MAX_DISORDER_S
TOP_PATHS = 5
STATS_TOPIC = "nginx_access_stats"

# nginx combined format followed by $request_time; one group per field the statistics need.
ACCESS_LINE_PATTERN = (
    r'^(\S+) \S+ (\S+) \[([^\]]+)\] "(\S+) (\S+) ([^"]*)" (\d{3}) (\d+|-) "([^"]*)" "([^"]*)" ([0-9.]+)$'
)
_TIME_LOCAL_FORMAT = "dd/MMM/yyyy:HH:mm:ss Z"
STATS_COLUMNS = ("window_start", "window_end", "requests", "bytes_served", "p95_request_time",
                 "status_counts", "top_paths")


def parse_access_log(records: DataFrame) -> DataFrame:
    """Kafka records (``key``, ``value`` columns) to ``event_time, status, path, bytes, request_time,
    end_marker``; lines that are not access-log lines are dropped."""
    from pyspark.sql import functions as F

    line = F.col("value").cast("string")

    def field(group: int) -> Column:
        return F.regexp_extract(line, ACCESS_LINE_PATTERN, group)

    uri = field(5)
    parsed = records.select(
        F.to_timestamp(field(3), _TIME_LOCAL_FORMAT).alias("event_time"),
        field(7).cast("int").alias("status"),
        F.split(uri, r"\?", 2).getItem(0).alias("path"),
        F.when(field(8) == "-", F.lit(0)).otherwise(field(8)).cast("long").alias("bytes"),
        field(11).cast("double").alias("request_time"),
        F.coalesce(F.col("key") == F.lit(END_OF_STREAM_KEY), F.lit(False)).alias("end_marker"),
    )
    return parsed.where(F.col("event_time").isNotNull() & F.col("status").isNotNull())


def stats_per_window(parsed: DataFrame, *, watermark_delay: str | None = None) -> DataFrame:
    """The statistics of ``parsed`` (from :func:`parse_access_log`) per window, in ``STATS_COLUMNS``.

    With ``watermark_delay`` (streaming) the end marker moves the watermark but counts nowhere."""
    from pyspark.sql import functions as F

    if watermark_delay is not None:
        parsed = parsed.withWatermark("event_time", watermark_delay)
    # The end marker must reach the watermark operator, so it is not filtered out (Spark pushes
    # filters that do not read the event time below the watermark); every aggregate skips it
    # instead, and the window it opens alone (requests = 0) is dropped after aggregation.
    request = ~F.col("end_marker")

    def only_requests(column: str) -> Column:
        return F.when(request, F.col(column))

    windows = parsed.groupBy(F.window("event_time", WINDOW_DURATION).alias("window")).agg(
        F.count(F.when(request, F.lit(1))).alias("requests"),
        F.sum(only_requests("bytes")).alias("bytes_served"),
        F.percentile(only_requests("request_time"), F.lit(0.95)).alias("p95_request_time"),
        # The window's statuses and paths; counted per value below (no per-value state needed).
        F.collect_list(only_requests("status")).alias("statuses"),
        F.collect_list(only_requests("path")).alias("paths"),
    ).where(F.col("requests") > 0)
    return windows.select(
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "requests",
        "bytes_served",
        "p95_request_time",
        F.expr(_STATUS_COUNTS).alias("status_counts"),
        F.expr(_TOP_PATHS).alias("top_paths"),
    )


_STATUS_COUNTS = """map_from_entries(transform(array_sort(array_distinct(statuses)),
    s -> struct(s, cast(size(filter(statuses, x -> x = s)) as bigint))))"""
_TOP_PATHS = f"""slice(array_sort(
    transform(array_distinct(paths),
              p -> named_struct('path', p, 'requests', cast(size(filter(paths, x -> x = p)) as bigint))),
    (a, b) -> case when a.requests > b.requests then -1 when a.requests < b.requests then 1
                   when a.path < b.path then -1 when a.path > b.path then 1 else 0 end),
    1, {TOP_PATHS})"""


def stats_as_records(stats: DataFrame) -> DataFrame:
    """Stats rows as sink rows: key = window start (ISO 8601, UTC), value = the row as JSON."""
    from pyspark.sql import functions as F

    return stats.select(
        F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("key"),
        F.to_json(F.struct(*STATS_COLUMNS), {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss'Z'"}).alias("value"),
    )


DEFAULT_SHUFFLE_PARTITIONS = 8


def spark_session(app_name: str, master: str | None = None,
                  shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS) -> SparkSession:
    """A session for the jobs' command lines, with the ``pafka`` data source registered.

    ``shuffle_partitions`` is also the number of state-store partitions of the streaming job
    (fixed by its first run's checkpoint): Spark's default of 200 makes every micro-batch of a
    small job pay for 200 state stores."""
    from pyspark.sql import SparkSession

    import spark_jobs

    # Python workers must run this interpreter: the one with pafka and pyarrow installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.appName(app_name)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions)))
    if master:
        builder = builder.master(master)
    session = builder.getOrCreate()
    spark_jobs.register(session)
    return session
