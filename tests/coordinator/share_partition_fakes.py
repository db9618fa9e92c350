"""Test doubles for the share-partition manager: an in-memory Persister and a replica manager over a list of batches.

Never wired into the broker: the real Persister is the share coordinator's.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from coordinator.share.persister import PersisterError, PersisterStateBatch, ShareGroupPartitionState
from coordinator.share.share_partition_manager import ShareRead
from protocol.buffers import FileRange
from protocol.errors import ErrorCode
from protocol.record_batch import RecordBatchHeader, iter_batch_headers
from protocol.records import Record, build_batch
from replication.fetch_params import FetchParams
from replication.partition import LogReadResult
from replication.replica_manager_lookups import ListOffsetsResult
from storage.log_segment import FetchDataInfo, LogOffsetMetadata
from storage.transaction_index import AbortedTxn

_Key = tuple[str, uuid.UUID, int]


class MemoryPersister:
    """Keeps each share partition's state in a dict; ``fail_with`` makes writes fail and
    ``read_fails_with`` reads, ``hold`` parks writes until it is set; ``writes`` counts what was made
    durable, ``reads`` the reads."""

    def __init__(self) -> None:
        self.states: dict[_Key, ShareGroupPartitionState] = {}
        self.fail_with: ErrorCode | None = None
        self.hold: asyncio.Event | None = None
        self.writes = 0
        self.reads = 0
        self.write_attempts = 0
        self.read_fails_with: ErrorCode | None = None

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> None:
        self.states[(group_id, topic_id, partition)] = ShareGroupPartitionState(state_epoch, start_offset, -1, ())

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
                         ) -> ShareGroupPartitionState | None:
        self.reads += 1
        await asyncio.sleep(0)  # a turn of the loop, as a call to a coordinator takes
        if self.read_fails_with is not None:
            raise PersisterError(self.read_fails_with, "read refused by the test")
        return self.states.get((group_id, topic_id, partition))

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state: ShareGroupPartitionState) -> None:
        self.write_attempts += 1
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_with is not None:
            raise PersisterError(self.fail_with, "write refused by the test")
        key = (group_id, topic_id, partition)
        stored = self.states.get(key)
        if stored is not None and state.state_epoch < stored.state_epoch:
            raise PersisterError(ErrorCode.FENCED_STATE_EPOCH, "older state epoch")
        self.states[key] = _merge(stored, state)
        self.writes += 1

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        self.states.pop((group_id, topic_id, partition), None)

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
                                 ) -> tuple[int, int, int] | None:
        state = self.states.get((group_id, topic_id, partition))
        return None if state is None else (state.state_epoch, state.start_offset, state.leader_epoch)


def _merge(stored: ShareGroupPartitionState | None, state: ShareGroupPartitionState) -> ShareGroupPartitionState:
    """The written batches replace the stored ones they cover; nothing below the start offset is kept."""
    kept: list[PersisterStateBatch] = []
    if stored is not None:
        covered = [(b.first_offset, b.last_offset) for b in state.state_batches]
        kept = [b for b in stored.state_batches
                if b.first_offset >= state.start_offset
                and not any(lo <= b.last_offset and b.first_offset <= hi for lo, hi in covered)]
    batches = tuple(sorted(kept + list(state.state_batches), key=lambda b: b.first_offset))
    return ShareGroupPartitionState(state.state_epoch, state.start_offset, state.leader_epoch, batches)


@dataclass
class FakePartition:
    """A hosted partition as the manager sees it."""

    is_leader: bool = True
    leader_id: int = 0
    leader_epoch: int = 0
    log_start_offset: int = 0
    high_watermark: int = 0
    last_stable_offset: int = 0


class _MemoryFile:
    """Stands in for a segment file: batch headers read as FileRecords reads them, and a real descriptor
    (an in-memory file) for a FileRange of it to be sent or read back."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.fd = os.memfd_create("share-partition-fake")
        os.write(self.fd, data)

    def fileno(self) -> int:
        return self.fd

    def batch_headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, RecordBatchHeader]]:
        for pos, header in iter_batch_headers(self.data[start:end]):
            yield start + pos, header

    def __del__(self) -> None:
        os.close(self.fd)


class _Bytes:
    """Stands in for a FileSlice: a whole in-memory file."""

    def __init__(self, data: bytes) -> None:
        self.file = _MemoryFile(data)
        self.position = 0
        self.size = len(data)


def records_bytes(records: FileRange | bytes | memoryview) -> bytes:
    """The bytes a ShareFetch answer's records stand for (a FileRange is read from its file)."""
    if isinstance(records, FileRange):
        return os.pread(records.file.fileno(), records.length, records.offset)
    return bytes(records)


@dataclass
class FakeReplicaManager:
    """One topic's partitions as lists of (base offset, last offset, batch bytes); reads return whole
    batches from the one holding the fetch offset, up to ``max_bytes`` (at least one batch)."""

    logs: dict[tuple[str, int], list[tuple[int, int, bytes]]] = field(default_factory=dict)
    partitions: dict[tuple[str, int], FakePartition] = field(default_factory=dict)
    aborted: dict[tuple[str, int], list[AbortedTxn]] = field(default_factory=dict)
    reads: list[tuple[str, int, int]] = field(default_factory=list)
    #: (base offset, timestamp) of each batch, per partition
    timestamps: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)

    def append(self, topic: str, partition: int, count: int, *, producer_id: int = -1,
               transactional: bool = False, control: bool = False, timestamp: int = 1000) -> tuple[int, int]:
        log = self.logs.setdefault((topic, partition), [])
        base = log[-1][1] + 1 if log else 0
        self.timestamps.setdefault((topic, partition), []).append((base, timestamp))
        records = [Record(base + i, timestamp, None, b"v%d" % (base + i)) for i in range(count)]
        data = bytes(build_batch(records, base_offset=base, producer_id=producer_id,
                                 producer_epoch=0 if producer_id >= 0 else -1,
                                 base_sequence=0 if producer_id >= 0 else -1,
                                 is_transactional=transactional, is_control=control))
        log.append((base, base + count - 1, data))
        view = self.partitions.setdefault((topic, partition), FakePartition())
        view.high_watermark = view.last_stable_offset = base + count
        return base, base + count - 1

    def fetch_offset_for_timestamp(self, tp: tuple[str, int], timestamp: int, isolation_level: int | None,
                                   current_leader_epoch: int, fetch_only_from_leader: bool = True
                                   ) -> ListOffsetsResult:
        for base, at in self.timestamps.get(tp, []):
            if at >= timestamp:
                return ListOffsetsResult(ErrorCode.NO_ERROR, at, base)
        return ListOffsetsResult(ErrorCode.OFFSET_NOT_AVAILABLE)

    def get_partition(self, topic: str, partition_index: int) -> FakePartition | None:
        return self.partitions.get((topic, partition_index))

    def fetch_messages(self, params: FetchParams, partitions: Sequence[ShareRead]
                       ) -> list[LogReadResult] | Awaitable[list[LogReadResult]]:
        return [self._read(params, wanted) for wanted in partitions]

    def _read(self, params: FetchParams, wanted: ShareRead) -> LogReadResult:
        key = (wanted.topic, wanted.partition)
        self.reads.append((wanted.topic, wanted.partition, wanted.fetch_offset))
        view = self.partitions[key]
        if wanted.fetch_offset < view.log_start_offset:
            return LogReadResult(ErrorCode.OFFSET_OUT_OF_RANGE, None, view.high_watermark,
                                 view.last_stable_offset, view.log_start_offset, view.high_watermark)
        out = b""
        for _base, last, data in self.logs.get(key, []):
            if last < wanted.fetch_offset or (out and len(out) + len(data) > params.max_bytes):
                continue
            out += data
        aborted = self.aborted.get(key, []) if params.isolation_level == 1 else None
        info = FetchDataInfo(LogOffsetMetadata(wanted.fetch_offset), _slice(out), aborted_transactions=aborted)
        return LogReadResult(ErrorCode.NO_ERROR, info, view.high_watermark, view.last_stable_offset,
                             view.log_start_offset, view.high_watermark)


def _slice(data: bytes) -> Any:
    return _Bytes(data) if data else None
