"""A coordinator's view of its internal topic: append records, load a partition back.

Kafka's PartitionWriter and CoordinatorLoader in one narrow interface. A
coordinator's logic talks to :class:`CoordinatorLog` only, so it runs against
the broker's replica manager (:class:`ReplicaCoordinatorLog`) and against an
in-memory log in unit tests. Appends complete through a callback, as Kafka's
``ReplicaManager.appendRecords`` does, always on a later turn of the event
loop: the coordinator never blocks, and never sees its callback run inside
its own ``append`` call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Protocol

from protocol.errors import ErrorCode
from protocol.record_batch import CONTROL_FLAG, iter_batch_headers
from protocol.records import Record, build_batch, iter_records
from replication.replica_manager import PartitionAppendResult, ReplicaManager
from storage.log_append import AppendOrigin

log = logging.getLogger(__name__)

#: (key, value) pairs; a None value is a tombstone.
KeyValues = list[tuple[bytes, bytes | None]]
#: Called on the event loop with the append's error and the first offset it got.
AppendCallback = Callable[[ErrorCode, int | None], None]
#: Kafka's offsets.load.buffer.size / transaction.state.log.load.buffer.size default.
LOAD_BUFFER_SIZE = 5 * 1024 * 1024


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
    """An internal topic as hosted by this broker, through its replica manager only.

    Appends are ``acks=-1`` with the coordinator's append timeout (Kafka's
    ``offsets.commit.timeout.ms``), so they are acknowledged once in the ISR.
    """

    def __init__(self, topic: str, num_partitions: int, replica_manager: ReplicaManager,
                 append_timeout_ms: int) -> None:
        self.topic = topic
        self.num_partitions = num_partitions
        self.replica_manager = replica_manager
        self.append_timeout_ms = append_timeout_ms
        self._in_flight: set[asyncio.Future[list[PartitionAppendResult]]] = set()

    def is_local_leader(self, partition: int) -> bool:
        p = self.replica_manager.get_partition(self.topic, partition)
        return p is not None and p.is_leader

    def log_end_offset(self, partition: int) -> int:
        p = self.replica_manager.get_partition(self.topic, partition)
        return 0 if p is None else p.log_end_offset

    def append(self, partition: int, records: KeyValues, timestamp: int, callback: AppendCallback) -> None:
        batch = build_records_batch(records, timestamp)
        outcome = self.replica_manager.append_records([(self.topic, partition, batch)], -1,
                                                      self.append_timeout_ms, AppendOrigin.COORDINATOR)
        loop = asyncio.get_running_loop()
        if isinstance(outcome, list):
            loop.call_soon(self._complete, partition, outcome[0], callback)
            return
        future = asyncio.ensure_future(outcome)
        self._in_flight.add(future)

        def done(f: asyncio.Future[list[PartitionAppendResult]]) -> None:
            self._in_flight.discard(f)
            if f.cancelled():
                callback(ErrorCode.NOT_COORDINATOR, None)
                return
            exc = f.exception()
            if exc is not None:
                log.error("append to %s-%d failed", self.topic, partition, exc_info=exc)
                callback(ErrorCode.UNKNOWN_SERVER_ERROR, None)
                return
            self._complete(partition, f.result()[0], callback)

        future.add_done_callback(done)

    def _complete(self, partition: int, result: PartitionAppendResult, callback: AppendCallback) -> None:
        if result.error_code != ErrorCode.NO_ERROR:
            log.debug("append to %s-%d failed: %s", self.topic, partition, result.error_message)
        first = result.info.first_offset if result.info is not None else None
        callback(ErrorCode(result.error_code), first)

    def read_records(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """Read the partition from its log start to its current end, a buffer at a time
        (Kafka's CoordinatorLoader); control batches are skipped."""
        tp = (self.topic, partition)
        hosted = self.replica_manager.get_partition(*tp)
        if hosted is None:
            return
        offset, end = hosted.log_start_offset, hosted.log_end_offset
        while offset < end:
            read = self.replica_manager.read_log(tp, offset, LOAD_BUFFER_SIZE)
            info = read.info
            if info is None or info.records is None or info.records.size == 0:
                return
            data = info.records.read_bytes()
            for position, header in iter_batch_headers(data):
                if header.base_offset >= end:
                    return
                offset = header.last_offset + 1
                if header.attributes & CONTROL_FLAG:
                    continue  # transaction markers: no transactional offset commits yet
                for record in iter_records(data, position):
                    if record.key is not None:
                        yield record.offset, record.key, record.value

    def __repr__(self) -> str:
        return f"ReplicaCoordinatorLog({self.topic}, partitions={self.num_partitions})"
