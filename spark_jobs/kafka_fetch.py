"""Executor side: fetch one topic-partition offset range and hand it to Spark as Arrow batches.

Runs inside a Spark Python worker. It opens its own connection (readers are
pickled to executors, connections are not), fetches ``[from_offset,
until_offset)`` with pafka's client and turns each fetch's records into
columns, then into ``pyarrow.RecordBatch`` objects with exactly the Arrow
types Spark's converter checks for (binary, string, int32, int64,
timestamp[us, UTC], list<struct<key: string, value: binary>>).

pafka's client was chosen over confluent-kafka after measuring both at building
these batches (see docs/benchmarks.md, "Spark source"): it has no consumer
group machinery or background threads to start per task, and knows exactly
where a fetch ended, which the range end needs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from broker.client import READ_UNCOMMITTED, FetchedBatch, KafkaClient, OffsetOutOfRangeError
from protocol.record_batch import TIMESTAMP_TYPE_MASK

#: Kafka's timestampType column values (TimestampType ids).
CREATE_TIME_ID = 0
LOG_APPEND_TIME_ID = 1

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of Spark's Kafka source (plus ``headers`` when asked)."""
    return pa.schema(_BASE_FIELDS + ([pa.field("headers", HEADERS_TYPE)] if include_headers else []))


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """What every task of one query fetches with (small and picklable)."""

    bootstrap_servers: str
    include_headers: bool = False
    isolation_level: int = READ_UNCOMMITTED
    fail_on_data_loss: bool = True
    #: Rows per Arrow batch handed to Spark: big enough to amortise the
    #: per-batch costs, small enough to keep a task's memory modest.
    batch_rows: int = 65_536
    partition_max_bytes: int = 8 * 1024 * 1024
    poll_timeout_s: float = 30.0


class DataLossError(RuntimeError):
    """Records of the planned range are gone (deleted, truncated) and failOnDataLoss is true."""


class _Columns:
    """Column lists of the rows seen so far, flushed into one RecordBatch at a time."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self.reset()

    def reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[tuple[str, bytes | None]]] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add_batch(self, batch: FetchedBatch, until_offset: int) -> None:
        records = batch.records
        if records[-1].offset >= until_offset:
            records = [r for r in records if r.offset < until_offset]
            if not records:
                return
        self.keys += [r.key for r in records]
        self.values += [r.value for r in records]
        self.offsets += [r.offset for r in records]
        self.timestamps += [r.timestamp for r in records]
        ts_type = LOG_APPEND_TIME_ID if batch.header.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME_ID
        self.timestamp_types += [ts_type] * len(records)
        if self.include_headers:
            self.headers += [r.headers for r in records]

    def to_record_batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        # Kafka's milliseconds become Spark's microseconds.
        millis = pa.array(self.timestamps, pa.int64())
        micros = pc.multiply(millis, 1000).cast(TIMESTAMP_TYPE)
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            micros,
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            columns.append(_headers_array(self.headers))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def _headers_array(per_record: Sequence[Sequence[tuple[str, bytes | None]]]) -> pa.Array:
    offsets = [0]
    keys: list[str] = []
    values: list[bytes | None] = []
    for headers in per_record:
        for key, value in headers:
            keys.append(key)
            values.append(value)
        offsets.append(len(keys))
    try:
        key_array = pa.array(keys, pa.string())
    except (UnicodeEncodeError, pa.ArrowInvalid):
        # pafka decodes header keys with surrogateescape (librdkafka sends raw
        # bytes); an Arrow string must be valid UTF-8, so such keys are shown
        # with replacement characters, as a Java String would show them.
        key_array = pa.array(
            [k.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for k in keys], pa.string()
        )
    structs = pa.StructArray.from_arrays([key_array, pa.array(values, pa.binary())], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), structs, type=HEADERS_TYPE)


def read_range(
    settings: FetchSettings, topic: str, partition: int, from_offset: int, until_offset: int
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records at offsets ``[from_offset, until_offset)`` of one partition."""
    if from_offset >= until_offset:
        return
    columns = _Columns(topic, partition, settings.include_headers)
    with KafkaClient(settings.bootstrap_servers, client_id="pafka-spark-source") as client:
        offset = from_offset
        deadline = time.monotonic() + settings.poll_timeout_s
        while offset < until_offset:
            try:
                result = client.fetch(topic, partition, offset, max_wait_ms=200,
                                      partition_max_bytes=settings.partition_max_bytes,
                                      max_bytes=settings.partition_max_bytes,
                                      isolation_level=settings.isolation_level)
            except OffsetOutOfRangeError:
                offset = _skip_lost_records(client, settings, topic, partition, offset, until_offset)
                continue
            for batch in result.batches:
                columns.add_batch(batch, until_offset)
            if result.next_offset > offset:
                offset = result.next_offset
                deadline = time.monotonic() + settings.poll_timeout_s
            elif result.high_watermark <= offset or time.monotonic() > deadline:
                # The range was planned below the high watermark: a log that no
                # longer reaches it was truncated (or deleted and recreated).
                _data_lost(settings, f"{topic}-{partition}: offsets {offset}..{until_offset} are no longer "
                                     f"available (high watermark {result.high_watermark})")
                break
            if len(columns) >= settings.batch_rows:
                yield columns.to_record_batch()
                columns.reset()
    if len(columns):
        yield columns.to_record_batch()


def _skip_lost_records(
    client: KafkaClient, settings: FetchSettings, topic: str, partition: int, offset: int, until_offset: int
) -> int:
    earliest = client.earliest_offset(topic, partition)
    _data_lost(settings, f"{topic}-{partition}: offsets {offset}..{min(earliest, until_offset)} were deleted "
                         f"before they were read (log start offset is now {earliest})")
    return max(earliest, offset + 1) if earliest > offset else until_offset


def _data_lost(settings: FetchSettings, message: str) -> None:
    if settings.fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip lost records")
