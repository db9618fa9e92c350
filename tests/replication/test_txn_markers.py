"""Transaction markers on the partition side (Kafka's WriteTxnMarkers path), on real logs on disk:
the COMMIT/ABORT control batch, the last stable offset, the .txnindex, read_committed fetches,
the producer and coordinator epoch checks, leadership, acks=-1 and a restart of the log dir."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.control_records import ControlRecordType, parse_end_txn_marker
from protocol.errors import ErrorCode
from protocol.record_batch import iter_batch_headers
from protocol.records import iter_records
from protocol.request_constants import READ_COMMITTED, READ_UNCOMMITTED
from replication.append_thread import AppendThread
from replication.partition import LogReadResult
from replication.replica_manager import FetchParams, ReplicaManager, TxnMarker
from storage.log import now_ms
from storage.log_manager import LogManager
from storage.transaction_index import AbortedTxn
from tests.storage.helpers import make_batch

PID, EPOCH = 4000, 3
T0 = ("t", 0)


class _Wanted:
    def __init__(self, topic: str, partition: int, fetch_offset: int) -> None:
        self.topic, self.partition, self.fetch_offset = topic, partition, fetch_offset
        self.max_bytes, self.current_leader_epoch = 1 << 20, -1
        self.last_fetched_epoch = -1


class Broker:
    """A log dir with a replica manager over it, reopened by ``restart`` as a broker would."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.executor = concurrent.futures.ThreadPoolExecutor(1)
        self.log_manager: LogManager | None = None
        self.manager: ReplicaManager | None = None
        self.topic_id = uuid.uuid4()
        self.start()

    def start(self) -> None:
        self.log_manager = LogManager([self.root])
        self.log_manager.startup()
        self.manager = ReplicaManager(0, self.log_manager, AppendThread(self.executor))
        for index in (0, 1):
            self.manager.make_leader("t", index, self.topic_id, [0])

    @property
    def rm(self) -> ReplicaManager:
        assert self.manager is not None
        return self.manager

    def restart(self, clean: bool) -> None:
        assert self.log_manager is not None
        if clean:
            self.log_manager.shutdown()
        else:
            self.log_manager.close_without_clean_shutdown()
        self.start()

    def close(self) -> None:
        if self.log_manager is not None and self.log_manager.started:
            self.log_manager.shutdown()
        self.executor.shutdown()


@pytest.fixture
def replica_broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "logs")
    try:
        yield b
    finally:
        b.close()


def _produce(rm: ReplicaManager, count: int, *, pid: int = PID, epoch: int = EPOCH, seq: int = 0,
             transactional: bool = True, tp: tuple[str, int] = T0) -> int:
    # Stamped now, as the markers are: a week-old batch would make the marker roll a segment (segment.ms).
    batch = make_batch(count, timestamp=now_ms(), producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=transactional)
    result = rm.append_records([(tp[0], tp[1], batch)], 1, 1000)
    assert isinstance(result, list) and result[0].error_code == ErrorCode.NO_ERROR, result
    assert result[0].info is not None
    return result[0].info.first_offset


async def _markers(rm: ReplicaManager, *markers: TxnMarker, timeout_ms: int = 1000) -> list[dict[tuple[str, int], int]]:
    outcome = rm.write_txn_markers(list(markers), timeout_ms)
    return outcome if isinstance(outcome, list) else await outcome


def _marker(committed: bool, *partitions: tuple[str, int], pid: int = PID, epoch: int = EPOCH,
            coordinator_epoch: int = 0) -> TxnMarker:
    return TxnMarker(pid, epoch, coordinator_epoch, committed, list(partitions) or [T0])


def _fetch(rm: ReplicaManager, isolation: int, tp: tuple[str, int] = T0) -> LogReadResult:
    params = FetchParams(-1, 0, 0, 1 << 20, isolation)
    results = rm.fetch_messages(params, [_Wanted(tp[0], tp[1], 0)])
    assert isinstance(results, list)
    return results[0]


def _batches(result: LogReadResult) -> list[tuple[int, bool, int]]:
    """(base offset, is control, record count) of every batch a fetch returned."""
    assert result.info is not None
    if result.info.records is None:
        return []
    data = result.info.records.read_bytes()
    return [(h.base_offset, h.is_control, h.records_count) for _, h in iter_batch_headers(data)]


def _txnindex_entries(broker: Broker, tp: tuple[str, int] = T0) -> list[AbortedTxn]:
    partition = broker.rm.get_partition(*tp)
    assert partition is not None
    return [e for segment in partition.log.log_segments() for e in segment.txn_index.entries]


def test_commit_marker_moves_the_lso_past_the_transaction(replica_broker: Broker) -> None:
    async def scenario() -> None:
        rm = replica_broker.rm
        first = _produce(rm, 3)
        _produce(rm, 2, pid=PID + 1, transactional=False)  # another producer's plain write, after it
        partition = rm.get_partition(*T0)
        assert partition is not None
        assert (first, partition.high_watermark, partition.last_stable_offset) == (0, 5, 0)
        # read_committed stops at the open transaction; read_uncommitted sees everything.
        assert _batches(_fetch(rm, READ_COMMITTED)) == []
        assert _fetch(rm, READ_COMMITTED).last_stable_offset == 0
        assert len(_batches(_fetch(rm, READ_UNCOMMITTED))) == 2

        assert await _markers(rm, _marker(True, coordinator_epoch=7)) == [{T0: ErrorCode.NO_ERROR}]
        assert partition.log_end_offset == 6 and partition.last_stable_offset == 6 == partition.high_watermark
        committed = _fetch(rm, READ_COMMITTED)
        assert _batches(committed) == [(0, False, 3), (3, False, 2), (5, True, 1)]
        assert committed.info is not None and committed.info.aborted_transactions == []
        assert _txnindex_entries(replica_broker) == []
        # The control record is Kafka's EndTransactionMarker with the coordinator epoch.
        assert committed.info.records is not None
        data = committed.info.records.read_bytes()
        position, header = list(iter_batch_headers(data))[-1]
        assert header.producer_id == PID and header.producer_epoch == EPOCH and header.is_transactional
        assert header.partition_leader_epoch == partition.leader_epoch
        [record] = list(iter_records(data, position))
        assert parse_end_txn_marker(record) == (ControlRecordType.COMMIT, 7)
        entry = partition.log.producer_state.last_entry(PID)  # type: ignore[union-attr]
        assert entry is not None and entry.coordinator_epoch == 7 and entry.current_txn_first_offset is None

    asyncio.run(scenario())


def test_abort_marker_goes_into_the_txnindex_and_read_committed_lists_it(replica_broker: Broker) -> None:
    async def scenario() -> None:
        rm = replica_broker.rm
        _produce(rm, 2, tp=("t", 1))  # the same transaction on two partitions
        _produce(rm, 3)
        _produce(rm, 1, pid=PID + 1, transactional=False)
        assert await _markers(rm, _marker(False, T0, ("t", 1))) == [
            {T0: ErrorCode.NO_ERROR, ("t", 1): ErrorCode.NO_ERROR}]
        assert _txnindex_entries(replica_broker) == [AbortedTxn(PID, 0, 4, 5)]
        assert _txnindex_entries(replica_broker, ("t", 1)) == [AbortedTxn(PID, 0, 2, 3)]
        result = _fetch(rm, READ_COMMITTED)
        assert result.last_stable_offset == 5
        assert _batches(result) == [(0, False, 3), (3, False, 1), (4, True, 1)]
        assert result.info is not None and result.info.aborted_transactions == [AbortedTxn(PID, 0, 4, 5)]
        # A later transaction of the same producer (new sequence after the marker) commits.
        _produce(rm, 1, seq=3)
        assert (await _markers(rm, _marker(True)))[0] == {T0: ErrorCode.NO_ERROR}
        assert _txnindex_entries(replica_broker) == [AbortedTxn(PID, 0, 4, 5)]
        assert rm.get_partition(*T0).last_stable_offset == 7  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_stale_coordinator_and_producer_epochs_are_fenced(replica_broker: Broker) -> None:
    async def scenario() -> None:
        rm = replica_broker.rm
        _produce(rm, 1)
        assert (await _markers(rm, _marker(False, coordinator_epoch=5)))[0] == {T0: ErrorCode.NO_ERROR}
        end = rm.get_partition(*T0).log_end_offset  # type: ignore[union-attr]
        _produce(rm, 1, seq=1)
        # A zombie coordinator (an older epoch of __transaction_state's partition) is refused...
        assert (await _markers(rm, _marker(True, coordinator_epoch=4)))[0] == {
            T0: ErrorCode.TRANSACTION_COORDINATOR_FENCED}
        # ... as is a marker for an older epoch of the producer than the partition has seen.
        assert (await _markers(rm, _marker(True, epoch=EPOCH - 1, coordinator_epoch=5)))[0] == {
            T0: ErrorCode.INVALID_PRODUCER_EPOCH}
        partition = rm.get_partition(*T0)
        assert partition is not None and partition.log_end_offset == end + 1  # nothing written
        assert partition.last_stable_offset == end  # the transaction is still open
        # The same epoch, or a newer coordinator, is accepted.
        assert (await _markers(rm, _marker(True, coordinator_epoch=6)))[0] == {T0: ErrorCode.NO_ERROR}
        assert partition.last_stable_offset == partition.log_end_offset

    asyncio.run(scenario())


def test_markers_on_partitions_not_led_here_are_refused(replica_broker: Broker) -> None:
    async def scenario() -> None:
        rm = replica_broker.rm
        _produce(rm, 1)
        follower = rm.get_partition("t", 1)
        assert follower is not None
        follower.leader_id = 1  # another broker leads t-1 now
        answer = await _markers(rm, _marker(True, T0, ("t", 1), ("gone", 0)),
                                _marker(False, ("t", 1), pid=PID + 9))
        assert answer == [
            {T0: ErrorCode.NO_ERROR, ("t", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER,
             ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION},
            {("t", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER}]
        assert follower.log_end_offset == 0

    asyncio.run(scenario())


def test_markers_wait_for_the_isr_like_acks_all(replica_broker: Broker) -> None:
    async def scenario() -> None:
        rm = replica_broker.rm
        partition = rm.get_partition(*T0)
        assert partition is not None
        partition.isr = [0, 1]  # a follower in the ISR: the high watermark waits for it
        _produce(rm, 2)
        partition.log.update_high_watermark(2)
        pending = rm.write_txn_markers([_marker(True)], 5000)
        assert not isinstance(pending, list)
        task = asyncio.ensure_future(pending)
        await asyncio.sleep(0.05)
        assert not task.done()
        partition.log.update_high_watermark(3)  # the follower has the marker
        rm.on_high_watermark_advanced(T0)
        assert await asyncio.wait_for(task, 1) == [{T0: ErrorCode.NO_ERROR}]
        _produce(rm, 1, seq=2)
        timed_out = await _markers(rm, _marker(False), timeout_ms=50)
        assert timed_out == [{T0: ErrorCode.REQUEST_TIMED_OUT}]

    asyncio.run(scenario())


def test_listener_of_a_topic_learns_of_its_acknowledged_markers_only(replica_broker: Broker) -> None:
    async def scenario() -> None:
        rm = replica_broker.rm
        heard: list[tuple[int, set[int], bool]] = []
        rm.add_txn_marker_listener("t", lambda pid, partitions, committed: heard.append((pid, partitions, committed)))
        rm.get_partition("t", 1).leader_id = 1  # type: ignore[union-attr]
        _produce(rm, 1)
        await _markers(rm, _marker(True, T0, ("t", 1)), _marker(False, T0, pid=PID + 1))
        assert heard == [(PID, {0}, True), (PID + 1, {0}, False)]
        await _markers(rm, _marker(True, coordinator_epoch=-5, pid=PID))  # fenced: nobody told
        assert len(heard) == 2

    asyncio.run(scenario())


@pytest.mark.parametrize("clean", [True, False], ids=["clean-shutdown", "crash"])
def test_markers_survive_a_restart(replica_broker: Broker, clean: bool) -> None:
    async def write() -> None:
        rm = replica_broker.rm
        _produce(rm, 2)  # aborted
        await _markers(rm, _marker(False, coordinator_epoch=2))
        _produce(rm, 1, seq=2)  # committed
        await _markers(rm, _marker(True, coordinator_epoch=2))
        _produce(rm, 1, pid=PID + 1, epoch=0)  # still open at the restart
        assert rm.get_partition(*T0).last_stable_offset == 5  # type: ignore[union-attr]

    asyncio.run(write())
    replica_broker.restart(clean)

    async def after() -> None:
        rm = replica_broker.rm
        partition = rm.get_partition(*T0)
        assert partition is not None
        assert (partition.log_end_offset, partition.high_watermark, partition.last_stable_offset) == (6, 6, 5)
        assert _txnindex_entries(replica_broker) == [AbortedTxn(PID, 0, 2, 3)]
        result = _fetch(rm, READ_COMMITTED)
        assert result.info is not None and result.info.aborted_transactions == [AbortedTxn(PID, 0, 2, 3)]
        assert [b[0] for b in _batches(result)] == [0, 2, 3, 4]
        state = partition.log.producer_state
        assert state is not None
        entry = state.last_entry(PID)
        assert entry is not None and entry.coordinator_epoch == 2 and entry.producer_epoch == EPOCH
        # The rebuilt state still fences a stale coordinator and ends the open transaction.
        _produce(rm, 1, seq=3)
        assert (await _markers(rm, _marker(True, coordinator_epoch=1)))[0] == {
            T0: ErrorCode.TRANSACTION_COORDINATOR_FENCED}
        assert (await _markers(rm, _marker(False, pid=PID + 1, epoch=0)))[0] == {T0: ErrorCode.NO_ERROR}
        assert partition.last_stable_offset == 6  # PID's newest transaction (offset 6) is still open
        assert (await _markers(rm, _marker(True, coordinator_epoch=2)))[0] == {T0: ErrorCode.NO_ERROR}
        assert partition.last_stable_offset == partition.log_end_offset == 9
        assert _txnindex_entries(replica_broker) == [AbortedTxn(PID, 0, 2, 3), AbortedTxn(PID + 1, 5, 7, 6)]

    asyncio.run(after())
