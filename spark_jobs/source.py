"""The ``pafka`` PySpark data source: schema, options, and the readers and writers it hands out.

Options use the names of Spark's Kafka source (``kafka.bootstrap.servers``,
``subscribe``, ``startingOffsets``...). Spark passes option keys lower-cased
(its case-insensitive map), so every lookup here goes through
:class:`SourceOptions`, which lower-cases keys itself too: options built by
hand in tests or jobs behave the same.

The writing side (the sink) lives in ``spark_jobs/sink.py``; this class only
forwards ``writer()`` / ``streamWriter()`` to it, so the reading and writing
halves stay separate modules.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass, field
from typing import Mapping

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from client import READ_COMMITTED, READ_UNCOMMITTED, TopicPartition
from spark_jobs.kafka_fetch import FetchSettings
from spark_jobs.offsets import OffsetSpec, parse_assign, parse_offset_spec

SHORT_NAME = "pafka"
DEFAULT_PARTITION_FETCH_BYTES = 8 * 1024 * 1024

HEADERS_SPARK_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (``headers`` only with includeHeaders=true)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_SPARK_TYPE))
    return StructType(fields)


def _bool_option(value: str | None, default: bool, name: str) -> bool:
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(f"{name} must be true or false, got {value!r}")


@dataclass(frozen=True)
class SourceOptions:
    """The reading options of one query, parsed once and checked up front."""

    bootstrap_servers: str
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting_offsets: OffsetSpec = "latest"
    ending_offsets: OffsetSpec = "latest"
    starting_timestamp: int | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: int = READ_UNCOMMITTED
    #: Kafka's consumer setting, the most a fetch returns per partition: also
    #: the size of the Arrow batches handed to Spark (one per fetch).
    max_partition_fetch_bytes: int = DEFAULT_PARTITION_FETCH_BYTES
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, str], *, streaming: bool) -> "SourceOptions":
        options = {str(k).lower(): str(v) for k, v in raw.items()}
        bootstrap = options.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise ValueError("option kafka.bootstrap.servers is required")
        strategies = [k for k in ("subscribe", "subscribepattern", "assign") if options.get(k)]
        if len(strategies) != 1:
            raise ValueError("exactly one of subscribe, subscribePattern, assign is required"
                             f" (got {strategies or 'none'})")
        subscribe = tuple(t.strip() for t in options.get("subscribe", "").split(",") if t.strip())
        pattern = options.get("subscribepattern")
        if pattern is not None:
            re.compile(pattern)  # a bad regex fails now, not inside a micro-batch
        assign = tuple(parse_assign(options["assign"])) if "assign" in options else ()
        # A streaming query starts at the latest offsets by default, a batch one at the earliest (as Spark does).
        starting = parse_offset_spec(options.get("startingoffsets"), default="latest" if streaming else "earliest",
                                     option="startingOffsets")
        ending = parse_offset_spec(options.get("endingoffsets"), default="latest", option="endingOffsets")
        if streaming and "endingoffsets" in options:
            raise ValueError("endingOffsets is for batch queries only")
        if ending == "earliest":
            raise ValueError("endingOffsets cannot be 'earliest'")
        if isinstance(ending, dict) and any(o == -2 for o in ending.values()):
            raise ValueError("endingOffsets cannot use -2 (earliest) for a partition")
        if isinstance(starting, dict) and any(o == -1 for o in starting.values()) and not streaming:
            raise ValueError("startingOffsets cannot use -1 (latest) for a partition in a batch query")
        timestamp = options.get("startingtimestamp")
        max_per_trigger = options.get("maxoffsetspertrigger")
        isolation = options.get("kafka.isolation.level", "read_uncommitted").lower()
        if isolation not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"kafka.isolation.level must be read_uncommitted or read_committed, got {isolation!r}")
        if max_per_trigger is not None and int(max_per_trigger) <= 0:
            raise ValueError("maxOffsetsPerTrigger must be positive")
        fetch_bytes = int(options.get("kafka.max.partition.fetch.bytes", DEFAULT_PARTITION_FETCH_BYTES))
        if fetch_bytes <= 0:
            raise ValueError("kafka.max.partition.fetch.bytes must be positive")
        return cls(
            bootstrap_servers=bootstrap,
            subscribe=subscribe,
            subscribe_pattern=pattern,
            assign=assign,
            starting_offsets=starting,
            ending_offsets=ending,
            starting_timestamp=int(timestamp) if timestamp is not None else None,
            max_offsets_per_trigger=int(max_per_trigger) if max_per_trigger is not None else None,
            fail_on_data_loss=_bool_option(options.get("failondataloss"), True, "failOnDataLoss"),
            include_headers=_bool_option(options.get("includeheaders"), False, "includeHeaders"),
            isolation_level=READ_COMMITTED if isolation == "read_committed" else READ_UNCOMMITTED,
            max_partition_fetch_bytes=fetch_bytes,
            extra=options,
        )

    def fetch_settings(self) -> FetchSettings:
        return FetchSettings(
            bootstrap_servers=self.bootstrap_servers,
            include_headers=self.include_headers,
            isolation_level=self.isolation_level,
            fail_on_data_loss=self.fail_on_data_loss,
            partition_max_bytes=self.max_partition_fetch_bytes,
        )


class PafkaDataSource(DataSource):
    """``spark.readStream.format("pafka")`` / ``spark.read.format("pafka")`` (and the sink's ``write``)."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        include = _bool_option(_lower(self.options).get("includeheaders"), False, "includeHeaders")
        return kafka_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        from spark_jobs.reader import PafkaBatchReader

        return PafkaBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from spark_jobs.stream_reader import PafkaStreamReader

        return PafkaStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool):  # type: ignore[no-untyped-def]
        return _sink().make_writer(schema, self.options, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):  # type: ignore[no-untyped-def]
        return _sink().make_stream_writer(schema, self.options)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _sink():  # type: ignore[no-untyped-def]
    """The sink module (``spark_jobs/sink.py``), imported only when a write is planned."""
    if importlib.util.find_spec("spark_jobs.sink") is None:
        raise NotImplementedError("the pafka sink (spark_jobs/sink.py) is not installed")
    return importlib.import_module("spark_jobs.sink")
