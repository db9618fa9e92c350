"""Planning reads: which partitions a query covers, the input partitions, and the batch reader.

One Spark input partition is one topic-partition offset range
(:class:`OffsetRangePartition`), as in Spark's Kafka source. Planning runs on
the driver with a short-lived :class:`KafkaClient`; the ranges (plain data)
travel to the executors, which fetch them in ``spark_jobs.kafka_fetch``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from client import KafkaClient, TopicPartition
from spark_jobs.kafka_fetch import FetchSettings, read_range
from spark_jobs.offsets import LATEST, PartitionOffsets, list_offsets, resolve_spec
from spark_jobs.source_options import SourceOptions


class OffsetRangePartition(InputPartition):
    """Records ``[from_offset, until_offset)`` of one topic-partition."""

    def __init__(self, topic: str, partition: int, from_offset: int, until_offset: int) -> None:
        super().__init__((topic, partition, from_offset, until_offset))
        self.topic = topic
        self.partition = partition
        self.from_offset = from_offset
        self.until_offset = until_offset

    def __repr__(self) -> str:
        return f"OffsetRangePartition({self.topic}-{self.partition} [{self.from_offset}, {self.until_offset}))"


def discover_partitions(client: KafkaClient, options: SourceOptions) -> list[TopicPartition]:
    """The topic-partitions the query reads right now (subscribe, subscribePattern or assign)."""
    if options.assign:
        return list(options.assign)
    if options.subscribe_pattern is not None:
        pattern = re.compile(options.subscribe_pattern)
        cluster = client.refresh_metadata(None)
        topics = sorted(name for name, meta in cluster.topics.items()
                        if not meta.is_internal and not meta.error_code and pattern.fullmatch(name))
    else:
        cluster = client.refresh_metadata(list(options.subscribe))
        topics = [t for t in options.subscribe if t in cluster.topics and not cluster.topics[t].error_code]
    return sorted(TopicPartition(t, p) for t in topics for p in cluster.topics[t].partitions)


def offset_ranges(start: PartitionOffsets, end: PartitionOffsets) -> list[OffsetRangePartition]:
    """One input partition per topic-partition with records between ``start`` and ``end``."""
    return [
        OffsetRangePartition(tp.topic, tp.partition, start[tp], until)
        for tp, until in sorted(end.items())
        if tp in start and until > start[tp]
    ]


def read_partition(settings: FetchSettings, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, OffsetRangePartition):
        # Spark plans one InputPartition(None) when a batch read has no ranges at all.
        if partition.value is not None:
            raise TypeError(f"not a pafka input partition: {partition!r}")
        return iter(())
    return read_range(settings, partition.topic, partition.partition, partition.from_offset, partition.until_offset)


class PafkaBatchReader(DataSourceReader):
    """``spark.read.format("pafka")``: the records between startingOffsets and endingOffsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.settings = options.fetch_settings()

    def partitions(self) -> list[InputPartition]:
        with KafkaClient(self.options.bootstrap_servers, client_id="pafka-spark-planner") as client:
            start, end = self.plan(client)
        return list(offset_ranges(start, end))

    def plan(self, client: KafkaClient) -> tuple[PartitionOffsets, PartitionOffsets]:
        partitions = discover_partitions(client, self.options)
        isolation = self.options.isolation_level
        if self.options.starting_timestamp is not None:
            start = list_offsets(client, partitions, self.options.starting_timestamp, isolation_level=isolation)
        else:
            start = resolve_spec(client, self.options.starting_offsets, partitions, isolation_level=isolation)
        end = resolve_spec(client, self.options.ending_offsets, partitions, isolation_level=isolation, unlisted=LATEST)
        return start, end

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.settings, partition)
