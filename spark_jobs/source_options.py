"""The reading options of a ``pafka`` query, parsed once and checked before anything runs.

Options use the names of Spark's Kafka source (``kafka.bootstrap.servers``,
``subscribe``, ``startingOffsets``...). Spark passes option keys lower-cased
(its case-insensitive map), so every lookup goes through :func:`lower_keys`:
options built by hand in tests or jobs behave the same.

The data source (``spark_jobs.source``) parses them and hands them to the batch
and streaming readers (``spark_jobs.reader``, ``spark_jobs.stream_reader``),
which is why they live below all three.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from client import TopicPartition
from protocol.request_constants import READ_COMMITTED, READ_UNCOMMITTED
from spark_jobs.kafka_fetch import FetchSettings
from spark_jobs.offsets import OffsetSpec, parse_assign, parse_offset_spec

DEFAULT_PARTITION_FETCH_BYTES = 8 * 1024 * 1024


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with lower-cased keys, as Spark's case-insensitive map hands them over."""
    return {str(k).lower(): str(v) for k, v in options.items()}


def bool_option(value: str | None, default: bool, name: str) -> bool:
    """A true/false option (``default`` when absent); anything else is refused by name."""
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
    def parse(cls, raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        options = lower_keys(raw)
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
            fail_on_data_loss=bool_option(options.get("failondataloss"), True, "failOnDataLoss"),
            include_headers=bool_option(options.get("includeheaders"), False, "includeHeaders"),
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
