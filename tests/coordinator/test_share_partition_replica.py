"""The share-partition manager over a real log on disk, read through a real ReplicaManager: the records sent are
the log's batches, read_committed never acquires an aborted transaction's records (the aborted-transaction index,
as Fetch reads it) and stops at the last stable offset, read_uncommitted acquires them; a share fetch's max bytes
is a soft limit (a first batch larger than it is sent whole) but a fetch for no bytes gets no records."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.common.scheduler import ManualScheduler
from coordinator.share.share_partition import AcknowledgementBatch, AcquiredRecords, SharePartitionConfig
from coordinator.share.share_partition_manager import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ShareGroupSettings,
    SharePartitionManager,
    ShareTarget,
)
from protocol.errors import ErrorCode
from protocol.record_batch import iter_batch_headers
from protocol.records import Record, build_batch, iter_records
from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager, TxnMarker
from storage.log_manager import LogManager
from tests.coordinator.share_partition_fakes import MemoryPersister, records_bytes

TOPIC_ID = uuid.uuid4()
P0 = ShareTarget(TOPIC_ID, "t", 0)
PID, EPOCH = 4000, 0


class Node:
    def __init__(self, root: Path) -> None:
        self.executor = concurrent.futures.ThreadPoolExecutor(1)
        self.log_manager = LogManager([root])
        self.log_manager.startup()
        self.rm = ReplicaManager(0, self.log_manager, AppendThread(self.executor))
        self.rm.make_leader("t", 0, TOPIC_ID, [0])
        self.next_offset = 0
        self.sequence = 0

    async def append(self, count: int, transactional: bool = False) -> None:
        records = [Record(i, 1000, None, b"r%d" % (self.next_offset + i)) for i in range(count)]
        if transactional:
            batch = build_batch(records, producer_id=PID, producer_epoch=EPOCH, base_sequence=self.sequence,
                                is_transactional=True)
            self.sequence += count
        else:
            batch = build_batch(records)
        outcome = self.rm.append_records([("t", 0, batch)], 1, 5000)
        results = outcome if isinstance(outcome, list) else await outcome
        assert results[0].error_code == ErrorCode.NO_ERROR
        self.next_offset += count

    async def end_transaction(self, committed: bool) -> None:
        outcome = self.rm.write_txn_markers([TxnMarker(PID, EPOCH, 0, committed, [("t", 0)])], 5000)
        (outcome if isinstance(outcome, list) else await outcome)
        self.next_offset += 1

    def manager(self, isolation: int) -> SharePartitionManager:
        settings = ShareGroupSettings(SharePartitionConfig(), "earliest", isolation)
        return SharePartitionManager(self.rm, MemoryPersister(), ManualScheduler(), lambda group: settings)

    def close(self) -> None:
        self.log_manager.shutdown()
        self.executor.shutdown()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "logs")
    try:
        yield n
    finally:
        n.close()


async def _written(node: Node) -> None:
    await node.append(2)  # 0-1
    await node.append(2, transactional=True)  # 2-3
    await node.end_transaction(committed=False)  # 4: abort marker
    await node.append(2, transactional=True)  # 5-6
    await node.end_transaction(committed=True)  # 7: commit marker
    await node.append(1)  # 8


async def fetch_all(node: Node, manager: SharePartitionManager, member: str) -> tuple[list[AcquiredRecords], bytes]:
    """Fetch until the share partition has read the log to its end (a read returns one segment's batches)."""
    acquired: list[AcquiredRecords] = []
    records = b""
    for _ in range(10):
        got = (await manager.fetch("g", member, [P0], max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                   max_records=100))[P0]
        assert got.error_code == ErrorCode.NO_ERROR
        acquired += got.acquired
        records += records_bytes(got.records)
        sp = manager.cached("g", TOPIC_ID, 0)
        partition = node.rm.get_partition("t", 0)
        assert sp is not None and partition is not None
        if sp.next_fetch_offset() >= partition.last_stable_offset:
            break
    return acquired, records


def _values(records: bytes, acquired: list[AcquiredRecords]) -> list[bytes | None]:
    """What a share consumer keeps: the records of the batches sent that lie in acquired ranges."""
    kept = {o for r in acquired for o in range(r.first_offset, r.last_offset + 1)}
    return [r.value for pos, header in iter_batch_headers(records) if not header.is_control
            for r in iter_records(records, pos) if r.offset in kept]


def test_read_committed_skips_aborted_transactions_in_a_real_log(node: Node) -> None:
    async def scenario() -> None:
        await _written(node)
        manager = node.manager(READ_COMMITTED)
        acquired, records = await fetch_all(node, manager, "m1")
        assert acquired == [AcquiredRecords(0, 1, 1), AcquiredRecords(5, 6, 1), AcquiredRecords(8, 8, 1)]
        assert _values(records, acquired) == [b"r0", b"r1", b"r5", b"r6", b"r8"]
        batches = [AcknowledgementBatch(r.first_offset, r.last_offset, (1,)) for r in acquired]
        done = await manager.acknowledge("g", "m1", [(P0, batches)])
        assert done[P0] == (ErrorCode.NO_ERROR, None)
        sp = manager.cached("g", TOPIC_ID, 0)
        assert sp is not None and sp.start_offset == 9
    asyncio.run(scenario())


def test_read_committed_stops_at_an_open_transaction(node: Node) -> None:
    async def scenario() -> None:
        await node.append(2)  # 0-1
        await node.append(2, transactional=True)  # 2-3, still open
        manager = node.manager(READ_COMMITTED)
        got = (await manager.fetch("g", "m1", [P0], max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                   max_records=100))[P0]
        assert got.acquired == [AcquiredRecords(0, 1, 1)]
        await node.end_transaction(committed=True)  # 4
        again = (await manager.fetch("g", "m2", [P0], max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                     max_records=100))[P0]
        assert again.acquired == [AcquiredRecords(2, 3, 1)]
    asyncio.run(scenario())


def test_read_uncommitted_delivers_transactional_records(node: Node) -> None:
    async def scenario() -> None:
        await _written(node)
        manager = node.manager(READ_UNCOMMITTED)
        acquired, records = await fetch_all(node, manager, "m1")
        offsets = [o for r in acquired for o in range(r.first_offset, r.last_offset + 1)]
        assert offsets == [0, 1, 2, 3, 5, 6, 8]  # the markers (4, 7) are never delivered
        assert _values(records, acquired) == [b"r0", b"r1", b"r2", b"r3", b"r5", b"r6", b"r8"]
    asyncio.run(scenario())


def test_max_bytes_is_a_soft_limit_and_no_bytes_gets_no_records(node: Node) -> None:
    async def scenario() -> None:
        await node.append(3)  # 0-2, one batch
        await node.append(2)  # 3-4
        manager = node.manager(READ_UNCOMMITTED)
        nothing = (await manager.fetch("g", "m1", [P0], max_wait_ms=0, min_bytes=1, max_bytes=0,
                                       max_records=100))[P0]
        assert (nothing.error_code, nothing.acquired, nothing.records) == (ErrorCode.NO_ERROR, [], b"")
        first = (await manager.fetch("g", "m1", [P0], max_wait_ms=0, min_bytes=1, max_bytes=1,
                                     max_records=100))[P0]
        assert first.acquired == [AcquiredRecords(0, 2, 1)]
        rest = (await manager.fetch("g", "m1", [P0], max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                    max_records=100))[P0]
        assert rest.acquired == [AcquiredRecords(3, 4, 1)]
    asyncio.run(scenario())
