"""Executor side: fetch one topic-partition offset range and hand it to Spark as Arrow batches.

Runs inside a Spark Python worker. It opens its own connection (readers are
pickled to executors, connections are not), fetches ``[from_offset,
until_offset)`` with pafka's own client and protocol code, decodes each
fetch's record batches column-wise (``spark_jobs.arrow_records``) and hands
Spark ``pyarrow.RecordBatch`` objects with exactly the Arrow types its
converter checks for (binary, string, int32, int64, timestamp[us, UTC],
list<struct<key: string, value: binary>>).

This path was chosen after measuring it against confluent-kafka and against
pafka's client decoding Record objects, at building the same batches (see
docs/benchmarks.md, "Spark source").
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from client import (
    KafkaClient,
    KafkaClientError,
    KafkaConnectionError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TopicPartition,
)
from client.errors import check_error
from protocol.buffers import Buffer
from protocol.messages import fetch as _fetch
from protocol.request_constants import READ_COMMITTED, READ_UNCOMMITTED
from spark_jobs.arrow_records import RecordColumns, decode_columns

_FETCH_ATTEMPTS = 5

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
    partition_max_bytes: int = 8 * 1024 * 1024
    max_wait_ms: int = 200
    poll_timeout_s: float = 30.0


class DataLossError(RuntimeError):
    """Records of the planned range are gone (deleted, truncated) and failOnDataLoss is true."""


def to_record_batch(columns: RecordColumns, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    n = len(columns)
    arrays = [
        pa.array(columns.keys, pa.binary()),
        pa.array(columns.values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(columns.offsets, pa.int64()),
        # Kafka's milliseconds become Spark's microseconds.
        pa.array(columns.timestamps_ms * 1000, TIMESTAMP_TYPE),
        pa.array(columns.timestamp_types, pa.int32()),
    ]
    if columns.headers is not None:
        arrays.append(_headers_array(columns.headers))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


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


@dataclass(slots=True)
class _RawFetch:
    records: Buffer | None
    high_watermark: int
    aborted: list[_fetch.AbortedTransaction] | None


def _fetch_raw(client: KafkaClient, settings: FetchSettings, topic: str, partition: int, offset: int) -> _RawFetch:
    """One Fetch of one partition, its records left as the broker sent them (decoded column-wise later)."""
    conn = client.leader_connection(topic, partition)
    request, version = client.fetch_request(
        conn, {TopicPartition(topic, partition): offset}, max_wait_ms=settings.max_wait_ms, min_bytes=1,
        max_bytes=settings.partition_max_bytes, partition_max_bytes=settings.partition_max_bytes,
        isolation_level=settings.isolation_level)
    response = conn.request(request, version=version)
    assert isinstance(response, _fetch.FetchResponse)
    check_error(response.error_code, api_name="Fetch")
    for topic_response in response.responses:
        for p in topic_response.partitions:
            if p.partition_index != partition:
                continue
            check_error(p.error_code, api_name="Fetch", topic=topic, partition=partition)
            aborted = p.aborted_transactions if settings.isolation_level == READ_COMMITTED else None
            # A decoded response's records are a memoryview of its frame; the field's type is what encoders accept.
            return _RawFetch(p.records, p.high_watermark,  # type: ignore[arg-type]
                             list(aborted) if aborted is not None else None)
    raise KafkaClientError(f"Fetch response without {topic}-{partition}")


def read_range(
    settings: FetchSettings, topic: str, partition: int, from_offset: int, until_offset: int
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records at offsets ``[from_offset, until_offset)`` of one partition.

    One RecordBatch per fetch (at most ``partition_max_bytes`` of records):
    big enough to amortise Spark's per-batch costs, small enough for memory.
    """
    if from_offset >= until_offset:
        return
    schema = arrow_schema(settings.include_headers)
    with KafkaClient(settings.bootstrap_servers, client_id="pafka-spark-source") as client:
        offset = from_offset
        deadline = time.monotonic() + settings.poll_timeout_s
        while offset < until_offset:
            try:
                fetched = _fetch_with_retries(client, settings, topic, partition, offset)
            except OffsetOutOfRangeError:
                offset = _skip_lost_records(client, settings, topic, partition, offset, until_offset)
                continue
            columns, next_offset = (None, offset) if not fetched.records else decode_columns(
                fetched.records, offset, until_offset, fetched.aborted, include_headers=settings.include_headers)
            if columns is not None:
                yield to_record_batch(columns, topic, partition, schema)
            if next_offset > offset:
                offset = next_offset
                deadline = time.monotonic() + settings.poll_timeout_s
            elif fetched.high_watermark <= offset or time.monotonic() > deadline:
                # The range was planned below the high watermark: a log that no
                # longer reaches it was truncated (or deleted and recreated).
                _data_lost(settings, f"{topic}-{partition}: offsets {offset}..{until_offset} are no longer "
                                     f"available (high watermark {fetched.high_watermark})")
                return


def _fetch_with_retries(
    client: KafkaClient, settings: FetchSettings, topic: str, partition: int, offset: int
) -> _RawFetch:
    """A fetch that rides out leader moves and dropped connections (refresh metadata, try again)."""
    for attempt in range(_FETCH_ATTEMPTS):
        try:
            return _fetch_raw(client, settings, topic, partition, offset)
        except (NotLeaderOrFollowerError, KafkaConnectionError) as exc:
            if attempt == _FETCH_ATTEMPTS - 1:
                raise
            if isinstance(exc, KafkaConnectionError):
                client.close()
            time.sleep(0.1 * (attempt + 1))
            client.refresh_metadata([topic])
    raise AssertionError("unreachable")


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
