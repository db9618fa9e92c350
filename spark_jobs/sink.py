"""The write side of the ``pafka`` data source: Spark's Kafka sink, on confluent-kafka.

A DataFrame written with ``df.write.format("pafka")`` or ``df.writeStream.format("pafka")``
takes the columns of Spark's Kafka sink:

- ``value`` (required), binary or string; a null value is a tombstone;
- ``key`` (optional), binary or string;
- ``topic`` (string), required unless the ``topic`` option is set; the option overrides it;
- ``partition`` (int, optional); null or absent lets the partitioner choose;
- ``headers`` (optional), ``array<struct<key string, value binary>>``.

Any other column is rejected, as Spark's Kafka sink does. Options prefixed ``kafka.`` go to the
producer without the prefix (``kafka.bootstrap.servers`` is required).

Each task writes its rows with its own librdkafka producer and flushes it before returning, so a
task that commits has had every record acknowledged by the broker; any delivery error fails the
task. Like Spark's Kafka sink the guarantee is at least once: a retried task or micro-batch may
write its records again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

log = logging.getLogger(__name__)

KAFKA_OPTION_PREFIX = "kafka."
SINK_COLUMNS = ("key", "value", "topic", "partition", "headers")
HEADERS_TYPE = ArrayType(
    StructType().add("key", StringType(), True).add("value", BinaryType(), True), True
)

# Producer settings that make librdkafka behave like the Java producer Spark's Kafka sink uses:
# keyed records land on the partition Java's murmur2 partitioner picks, every record is
# acknowledged by all in-sync replicas, and retries cannot duplicate within a producer session.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "partitioner": "murmur2_random",
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
}
# Options a Spark user may pass that make no sense for a producer driven by rows.
REJECTED_KAFKA_OPTIONS = ("key.serializer", "value.serializer")
QUEUE_FULL_POLL_S = 0.05
POLL_EVERY_ROWS = 1024
UNASSIGNED_PARTITION = -1  # librdkafka's RD_KAFKA_PARTITION_UA: let the partitioner choose


class SinkError(ValueError):
    """A write that cannot run: bad columns or options (raised on the driver, before any task)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"pafka sink: {message}")


class DeliveryError(RuntimeError):
    """A record the broker did not acknowledge; raised inside the task so the task fails."""


@dataclass(frozen=True)
class SinkPlan:
    """Everything a task needs to turn Arrow batches into produce calls; small and picklable."""

    producer_config: dict[str, Any]
    topic_option: str | None
    has_key: bool
    has_topic: bool
    has_partition: bool
    has_headers: bool


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task delivered: records per (topic, partition)."""

    records: int
    per_partition: dict[tuple[str, int], int] = field(default_factory=dict)


def make_writer(schema: StructType, options: Mapping[str, str], overwrite: bool) -> PafkaWriter:
    """The batch writer behind ``df.write.format("pafka")``."""
    if overwrite:
        raise SinkError("save mode overwrite is not supported: a topic can only be appended to")
    return PafkaWriter(plan_sink(schema, options))


def make_stream_writer(schema: StructType, options: Mapping[str, str]) -> PafkaStreamWriter:
    """The micro-batch writer behind ``df.writeStream.format("pafka")`` (any output mode)."""
    return PafkaStreamWriter(plan_sink(schema, options))


def plan_sink(schema: StructType, options: Mapping[str, str]) -> SinkPlan:
    """Validate the columns and options the way Spark's Kafka sink does, before any task runs."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    unknown = sorted(set(fields) - set(SINK_COLUMNS))
    if unknown:
        raise SinkError(f"unexpected columns {unknown}; the sink takes {list(SINK_COLUMNS)}")
    if "value" not in fields:
        raise SinkError("required attribute 'value' not found")
    _require_type("value", fields["value"], (BinaryType(), StringType()), "binary or string")
    if "key" in fields:
        _require_type("key", fields["key"], (BinaryType(), StringType()), "binary or string")
    if "topic" in fields:
        _require_type("topic", fields["topic"], (StringType(),), "string")
    if "partition" in fields:
        _require_type("partition", fields["partition"], (IntegerType(),), "int")
    if "headers" in fields:
        _require_headers_type(fields["headers"])
    topic_option = _option(options, "topic")
    if topic_option is None and "topic" not in fields:
        raise SinkError("topic option required when no 'topic' attribute is present")
    return SinkPlan(
        producer_config=producer_config(options),
        topic_option=topic_option,
        has_key="key" in fields,
        has_topic="topic" in fields,
        has_partition="partition" in fields,
        has_headers="headers" in fields,
    )


def producer_config(options: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka settings: our defaults, overridden by every ``kafka.*`` option."""
    config: dict[str, Any] = dict(PRODUCER_DEFAULTS)
    for name, value in options.items():
        key = name.lower()
        if not key.startswith(KAFKA_OPTION_PREFIX):
            continue
        setting = key[len(KAFKA_OPTION_PREFIX):]
        if setting in REJECTED_KAFKA_OPTIONS:
            raise SinkError(f"kafka option '{setting}' is not supported: the sink writes bytes")
        config[setting] = value
    if not config.get("bootstrap.servers"):
        raise SinkError("option 'kafka.bootstrap.servers' must be specified")
    return config


def _option(options: Mapping[str, str], name: str) -> str | None:
    # Spark hands options over lower-cased; look both ways so a plain dict works too.
    for key, value in options.items():
        if key.lower() == name:
            return value
    return None


def _require_type(column: str, actual: DataType, allowed: tuple[DataType, ...], wanted: str) -> None:
    if actual not in allowed:
        raise SinkError(f"{column} attribute type must be {wanted}, not {actual.simpleString()}")


def _require_headers_type(actual: DataType) -> None:
    ok = (
        isinstance(actual, ArrayType)
        and isinstance(actual.elementType, StructType)
        and [f.name for f in actual.elementType.fields] == ["key", "value"]
        and actual.elementType.fields[0].dataType == StringType()
        and actual.elementType.fields[1].dataType == BinaryType()
    )
    if not ok:
        raise SinkError(
            f"headers attribute type must be {HEADERS_TYPE.simpleString()}, not {actual.simpleString()}"
        )


class PafkaWriter(DataSourceArrowWriter):
    """Batch write: one producer per task; the job commits once every task has flushed."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return produce_batches(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("pafka sink: wrote %d records", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records already acknowledged cannot be taken back from a log; say how many there were.
        log.warning("pafka sink: write aborted after %d acknowledged records", _total(messages))


class PafkaStreamWriter(DataSourceStreamArrowWriter):
    """Micro-batch write: same as the batch writer, once per micro-batch."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return produce_batches(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("pafka sink: micro-batch %d wrote %d records", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("pafka sink: micro-batch %d aborted after %d acknowledged records",
                    batchId, _total(messages))


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.records for m in messages if isinstance(m, SinkCommitMessage))


class _Deliveries:
    """Counts acknowledgements per partition and keeps the first failure (librdkafka callback)."""

    def __init__(self) -> None:
        self.per_partition: dict[tuple[str, int], int] = {}
        self.acknowledged = 0
        self.error: str | None = None

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            if self.error is None:
                self.error = f"{msg.topic()} [{msg.partition()}]: {err}"
            return
        tp = (msg.topic(), msg.partition())
        self.per_partition[tp] = self.per_partition.get(tp, 0) + 1
        self.acknowledged += 1

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise DeliveryError(f"pafka sink: record not delivered: {self.error}")


def produce_batches(plan: SinkPlan, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    """Produce every row and return only once the broker acknowledged all of them."""
    from confluent_kafka import Producer  # executor-side import: the driver never produces

    deliveries = _Deliveries()
    producer = Producer({**plan.producer_config, "on_delivery": deliveries})
    sent = 0
    for batch in batches:
        sent += _produce_batch(plan, producer, deliveries, batch)
    remaining = producer.flush()
    deliveries.raise_if_failed()
    if remaining or deliveries.acknowledged != sent:
        raise DeliveryError(
            f"pafka sink: {sent - deliveries.acknowledged} of {sent} records not acknowledged"
        )
    return SinkCommitMessage(records=sent, per_partition=deliveries.per_partition)


def _produce_batch(plan: SinkPlan, producer: Any, deliveries: _Deliveries, batch: pa.RecordBatch) -> int:
    rows: int = batch.num_rows  # pyarrow ships no types
    if rows == 0:
        return 0
    values = _column(batch, "value")
    keys = _column(batch, "key") if plan.has_key else [None] * rows
    topics = [plan.topic_option] * rows if plan.topic_option or not plan.has_topic else _column(batch, "topic")
    partitions = _column(batch, "partition") if plan.has_partition else [None] * rows
    headers = _column(batch, "headers") if plan.has_headers else [None] * rows
    for index, (value, key, topic, partition, row_headers) in enumerate(
            zip(values, keys, topics, partitions, headers, strict=True)):
        if topic is None:
            raise DeliveryError("pafka sink: null topic present in the data")
        if partition is None:
            partition = UNASSIGNED_PARTITION
        kafka_headers = [(h["key"], h["value"]) for h in row_headers] if row_headers else None
        _produce_one(producer, topic, value, key, partition, kafka_headers)
        if index % POLL_EVERY_ROWS == 0:
            producer.poll(0)  # serve delivery reports as we go, so a failure stops the task early
            deliveries.raise_if_failed()
    return rows


def _column(batch: pa.RecordBatch, name: str) -> list[Any]:
    # Column names are matched case-insensitively, as Spark resolves them.
    for index, column_name in enumerate(batch.schema.names):
        if column_name.lower() == name:
            values: list[Any] = batch.column(index).to_pylist()
            return values
    raise DeliveryError(f"pafka sink: column {name!r} missing from the batch")


def _produce_one(producer: Any, topic: str, value: Any, key: Any, partition: int,
                 headers: list[tuple[str, bytes | None]] | None) -> None:
    while True:
        try:
            producer.produce(topic, value, key, partition, headers=headers)
            return
        except BufferError:
            # librdkafka's queue is full: serve delivery reports until there is room.
            producer.poll(QUEUE_FULL_POLL_S)
