"""The coordinator's view of ``__consumer_offsets``: append records, read a partition back.

``GroupMetadataManager`` talks to this interface only, so its logic runs
against a real broker (:class:`ReplicaCoordinatorLog`: the replica manager's
partitions, appends on the broker's append thread) and against an in-memory
log in unit tests. Appends complete through a callback, as Kafka's
``ReplicaManager.appendRecords`` does: the coordinator never blocks.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from protocol.errors import ErrorCode
from protocol.record_batch import CONTROL_FLAG
from protocol.records import Record, build_batch, iter_records
from storage.log_append import AppendOrigin

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"

#: (key, value) pairs; a None value is a tombstone.
KeyValues = list[tuple[bytes, bytes | None]]
#: Called on the coordinator's thread with the append's error and the first offset it got.
AppendCallback = Callable[[ErrorCode, int | None], None]


class CoordinatorLog(Protocol):
    num_partitions: int

    def is_local_leader(self, partition: int) -> bool: ...

    def log_end_offset(self, partition: int) -> int: ...

    def append(self, partition: int, records: KeyValues, timestamp: int, callback: AppendCallback) -> None: ...

    def read_records(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every data record, in offset order (blocking)."""
        ...


def build_records_batch(records: KeyValues, timestamp: int) -> bytearray:
    return build_batch([Record(i, timestamp, key, value) for i, (key, value) in enumerate(records)])


class ReplicaCoordinatorLog:
    """``__consumer_offsets`` as hosted by this broker's replica manager."""

    def __init__(self, server: "KafkaServer") -> None:
        self.server = server
        self.num_partitions = server.config.offsets_topic_num_partitions
        self._in_flight: set[asyncio.Future[object]] = set()

    def _partition(self, partition: int):  # type: ignore[no-untyped-def]
        return self.server.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, partition)

    def topic_exists(self) -> bool:
        return GROUP_METADATA_TOPIC_NAME in self.server.metadata

    def is_local_leader(self, partition: int) -> bool:
        p = self._partition(partition)
        return p is not None and p.is_leader

    def log_end_offset(self, partition: int) -> int:
        p = self._partition(partition)
        return 0 if p is None else p.log_end_offset

    def append(self, partition: int, records: KeyValues, timestamp: int, callback: AppendCallback) -> None:
        p = self._partition(partition)
        if p is None:
            callback(ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
            return
        batch = build_records_batch(records, timestamp)
        future = self.server.run_append(self.server.replica_manager.append_records, [(p, batch)],
                                        AppendOrigin.COORDINATOR)
        self._in_flight.add(future)

        def done(f: "asyncio.Future[object]") -> None:
            self._in_flight.discard(f)
            if f.cancelled():
                callback(ErrorCode.NOT_COORDINATOR, None)
                return
            exc = f.exception()
            if exc is not None:
                log.error("append to %s-%d failed", GROUP_METADATA_TOPIC_NAME, partition, exc_info=exc)
                callback(ErrorCode.UNKNOWN_SERVER_ERROR, None)
                return
            result = f.result()[0]  # type: ignore[index]
            first = result.info.first_offset if result.info is not None else None
            if result.error_code == ErrorCode.NO_ERROR:
                # Fetchers of __consumer_offsets (tools, followers later) wake up as for a produce.
                self.server.fetch_purgatory.notify((GROUP_METADATA_TOPIC_NAME, partition))
            callback(ErrorCode(result.error_code), first)

        future.add_done_callback(done)

    def read_records(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        p = self._partition(partition)
        if p is None:
            return
        log_ = p.log
        end = log_.log_end_offset
        for segment in log_.log_segments():
            for position, header in segment.batches():
                if header.base_offset >= end:
                    return
                if header.attributes & CONTROL_FLAG:
                    continue  # transaction markers: no transactional offset commits yet
                data = segment.read_batch(position, header)
                for record in iter_records(data):
                    if record.key is not None:
                        yield record.offset, record.key, record.value

    def __repr__(self) -> str:
        return f"ReplicaCoordinatorLog(broker={self.server.broker_id})"
