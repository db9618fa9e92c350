"""``spark.readStream.format("pafka")``: micro-batches as per-partition offset ranges.

Spark keeps this reader in one long-lived Python process on the driver and
asks it, per micro-batch, for the latest offset (``latestOffset``) and for the
input partitions between two offsets (``partitions``); the offsets it is given
and returns are Spark's Kafka JSON (``{"topic": {"0": 42}}``), which Spark
journals in the checkpoint. A restarted query therefore re-plans the same
ranges from the checkpointed offsets and then continues from the last
committed end: nothing is read twice and nothing is skipped.

Partitions that appear between micro-batches (CreatePartitions, a new topic
matching subscribePattern) enter the next end offset and are read from their
earliest offset, as Spark's Kafka source does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from client import (
    KafkaClient,
    KafkaConnectionError,
    NotLeaderOrFollowerError,
    TopicPartition,
)
from protocol.request_constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from spark_jobs.kafka_fetch import DataLossError
from spark_jobs.offsets import (
    EARLIEST,
    OffsetsJson,
    PartitionOffsets,
    list_offsets,
    offsets_from_json,
    offsets_to_json,
    resolve_spec,
)
from spark_jobs.reader import discover_partitions, offset_ranges, read_partition
from spark_jobs.source_options import SourceOptions

T = TypeVar("T")
#: Planning calls survive a broker restart or leader move of up to about this long.
_DRIVER_ATTEMPTS = 6


def rate_limit(start: PartitionOffsets, latest: PartitionOffsets, max_rows: int) -> PartitionOffsets:
    """End offsets holding at most ``max_rows`` records, shared in proportion to each partition's lag.

    The share is rounded down and the remainder handed out one record at a
    time in partition order, so every trigger reads exactly ``max_rows`` when
    that many are waiting and no partition starves.
    """
    lags = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(lags.values())
    if total <= max_rows:
        return dict(latest)
    take = {tp: lag * max_rows // total for tp, lag in lags.items()}
    left = max_rows - sum(take.values())
    for tp in sorted(lags):
        if left == 0:
            break
        if take[tp] < lags[tp]:
            take[tp] += 1
            left -= 1
    return {tp: start[tp] + take[tp] for tp in latest}


class PafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.settings = options.fetch_settings()
        self._client: KafkaClient | None = None
        #: Trigger.AvailableNow's target: nothing past these offsets is read.
        self._available_now: PartitionOffsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The reader's read() runs on executors: ship the settings, not the driver's connection.
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    # ------------------------------------------------------------ driver side

    @property
    def client(self) -> KafkaClient:
        if self._client is None:
            self._client = KafkaClient(self.options.bootstrap_servers, client_id="pafka-spark-driver").connect()
        return self._client

    def _retrying(self, call: Callable[[], T]) -> T:
        """``call`` again on a fresh connection when the broker went away or leadership moved."""
        for attempt in range(_DRIVER_ATTEMPTS):
            try:
                return call()
            except (KafkaConnectionError, NotLeaderOrFollowerError):
                if attempt == _DRIVER_ATTEMPTS - 1:
                    raise
                self.stop()
                time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")

    def initialOffset(self) -> OffsetsJson:
        return self._retrying(self._initial_offset)

    def _initial_offset(self) -> OffsetsJson:
        partitions = discover_partitions(self.client, self.options)
        isolation = self.options.isolation_level
        if self.options.starting_timestamp is not None:
            start = list_offsets(self.client, partitions, self.options.starting_timestamp, isolation_level=isolation)
        else:
            start = resolve_spec(self.client, self.options.starting_offsets, partitions, isolation_level=isolation)
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._retrying(lambda: self._latest(discover_partitions(self.client, self.options)))

    def latestOffset(self, start: OffsetsJson, limit: ReadLimit) -> OffsetsJson:
        return self._retrying(lambda: self._latest_offset(start, limit))

    def _latest_offset(self, start: OffsetsJson, limit: ReadLimit) -> OffsetsJson:
        base = self._with_new_partitions(offsets_from_json(start))
        latest = self._latest(list(base))
        if self._available_now is not None:
            target = self._available_now
            latest = {tp: min(latest[tp], target.get(tp, base[tp])) for tp in latest}
        for tp, offset in latest.items():
            if offset < base[tp]:
                self._lost(f"{tp}: the latest offset {offset} is below the offset {base[tp]} already read")
                latest[tp] = base[tp]
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(base, latest, limit.max_rows)
        return offsets_to_json(latest)

    def partitions(self, start: OffsetsJson, end: OffsetsJson) -> list[InputPartition]:
        return self._retrying(lambda: self._partitions(start, end))

    def _partitions(self, start: OffsetsJson, end: OffsetsJson) -> list[InputPartition]:
        start_offsets = offsets_from_json(start)
        end_offsets = offsets_from_json(end)
        new = [tp for tp in end_offsets if tp not in start_offsets]
        start_offsets.update(list_offsets(self.client, new, EARLIEST_TIMESTAMP,
                                          isolation_level=self.options.isolation_level))
        return list(offset_ranges(start_offsets, end_offsets))

    def commit(self, end: OffsetsJson) -> None:
        # Progress lives in Spark's checkpoint; there is no consumer group to commit to.
        return None

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _latest(self, partitions: list[TopicPartition]) -> PartitionOffsets:
        return list_offsets(self.client, partitions, LATEST_TIMESTAMP, isolation_level=self.options.isolation_level)

    def _with_new_partitions(self, start: PartitionOffsets) -> PartitionOffsets:
        """``start`` plus the partitions that appeared since (at their earliest offset), minus vanished ones."""
        current = set(discover_partitions(self.client, self.options))
        gone = sorted(tp for tp in start if tp not in current)
        if gone:
            self._lost(f"partitions {', '.join(map(str, gone))} no longer exist")
        base = {tp: offset for tp, offset in start.items() if tp in current}
        new = sorted(tp for tp in current if tp not in start)
        base.update(resolve_spec(self.client, dict.fromkeys(new, EARLIEST), new,
                                 isolation_level=self.options.isolation_level))
        return base

    def _lost(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(message + "; set failOnDataLoss=false to go on without them")

    # ------------------------------------------------------------ executor side

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.settings, partition)
