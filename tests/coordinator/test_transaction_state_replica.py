"""TransactionStateManager over a real ReplicaManager and on-disk logs: what it writes survives a restart."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from collections.abc import Awaitable
from pathlib import Path

import pytest

from broker.coordinator_wiring import start_transaction_state_manager
from coordinator.common.coordinator_log import ReplicaCoordinatorLog
from coordinator.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME as TOPIC
from coordinator.common.scheduler import AsyncioScheduler
from coordinator.transaction.transaction_log import key_to_bytes
from coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_2,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from coordinator.transaction.transaction_state_manager import TransactionStateManager, TransactionStateManagerConfig
from protocol.errors import CorruptRecordError, ErrorCode
from pytest_pafka.waiting import wait_until_async
from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager
from storage.log_manager import LogManager

S = TransactionState
TOPIC_ID = uuid.uuid4()


class Broker:
    """The storage half of a broker: a log dir, an append thread, a replica manager, the state manager."""

    def __init__(self, data_dir: Path, led: dict[int, int], **config: int) -> None:
        self.logs = LogManager([data_dir])
        self.logs.startup()
        self.executor = concurrent.futures.ThreadPoolExecutor(1)
        self.replicas = ReplicaManager(0, self.logs, AppendThread(self.executor))
        for partition, epoch in led.items():
            self.replicas.make_leader(TOPIC, partition, TOPIC_ID, [0], leader_epoch=epoch)
        self.manager = TransactionStateManager(
            0, ReplicaCoordinatorLog(TOPIC, 50, self.replicas, 5000), AsyncioScheduler(),
            TransactionStateManagerConfig(**config))

    async def close(self) -> None:
        await self.manager.shutdown()
        self.logs.shutdown()
        self.executor.shutdown()


def _write(manager: TransactionStateManager, tid: str, transit: TxnTransitMetadata, epoch: int
           ) -> Awaitable[ErrorCode]:
    done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
    manager.append_transaction_to_log(tid, epoch, transit, done.set_result)
    return done


async def _init(manager: TransactionStateManager, tid: str, pid: int, epoch: int) -> TransactionMetadata:
    created = TransactionMetadata(tid, pid, NO_PRODUCER_ID, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                                  60_000, S.EMPTY, set(), -1, manager.scheduler.now_ms(), TV_2)
    error, found = manager.put_transaction_state_if_not_exists(created)
    assert error == ErrorCode.NO_ERROR and found is not None
    m = found.transaction_metadata
    transit = m.prepare_increment_producer_epoch(60_000, None, manager.scheduler.now_ms())
    assert await _write(manager, tid, transit, epoch) == ErrorCode.NO_ERROR
    return m


def _snapshot(manager: TransactionStateManager) -> dict[str, tuple[object, ...]]:
    return {tid: (m.producer_id, m.prev_producer_id, m.producer_epoch, m.state, frozenset(m.topic_partitions),
                  m.txn_timeout_ms, m.txn_start_timestamp, m.txn_last_update_timestamp, m.client_transaction_version)
            for entry in manager.transaction_metadata_cache.values()
            for tid, m in entry.metadata_per_transactional_id.items()}


def _same_partition(manager: TransactionStateManager, partition: int, prefix: str, n: int) -> list[str]:
    found = [f"{prefix}-{i}" for i in range(10_000) if manager.partition_for(f"{prefix}-{i}") == partition]
    return found[:n]


def test_transitions_survive_a_restart_and_tombstones_stay_deleted(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker = Broker(tmp_path, {5: 0, 6: 0}, transactional_id_expiration_ms=1)
        manager = broker.manager
        manager.startup({5: 0, 6: 0}, enable_transactional_id_expiration=False)
        assert not manager.loading_partitions  # empty logs: owned at once
        committed, ongoing, expired = _same_partition(manager, 6, "txn", 3)
        other = _same_partition(manager, 5, "txn", 1)[0]
        a = await _init(manager, committed, 1000, 0)
        assert await _write(manager, committed, a.prepare_add_partitions({("out", 0), ("out", 2)}, 10, TV_2), 0) == 0
        assert await _write(manager, committed, a.prepare_abort_or_commit(
            S.PREPARE_COMMIT, TV_2, NO_PRODUCER_ID, 20, False), 0) == 0
        assert await _write(manager, committed, a.prepare_complete(30), 0) == 0
        b = await _init(manager, ongoing, 2000, 0)
        assert await _write(manager, ongoing, b.prepare_add_partitions({("out", 1)}, 40, TV_2), 0) == 0
        await _init(manager, expired, 3000, 0)
        await _init(manager, other, 4000, 0)
        # Everything but the ongoing transaction is idle past 1 ms: all three other ids expire.
        await asyncio.sleep(0.01)
        removed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        manager.remove_expired_transactional_ids(removed.set_result)
        assert await removed == 3
        assert set(_snapshot(manager)) == {ongoing}
        # Bring one back, so the log holds a tombstone followed by a newer value for the same key.
        await _init(manager, committed, 5000, 0)
        before = _snapshot(manager)
        assert set(before) == {ongoing, committed}
        assert before[ongoing][3] == S.ONGOING and before[ongoing][4] == {("out", 1)}
        await broker.close()

        restarted = Broker(tmp_path, {5: 1, 6: 1})
        restarted.manager.startup({5: 1, 6: 1}, enable_transactional_id_expiration=False)
        await wait_until_async(lambda: not restarted.manager.loading_partitions, 10.0, "the partitions to load")
        assert _snapshot(restarted.manager) == before
        assert restarted.manager.get_transaction_state(expired) == (ErrorCode.NO_ERROR, None)
        assert restarted.manager.get_transaction_state(committed)[1].coordinator_epoch == 1  # type: ignore[union-attr]
        # The reloaded state goes on: the ongoing transaction commits at the new coordinator epoch.
        m = restarted.manager.get_transaction_state(ongoing)[1].transaction_metadata  # type: ignore[union-attr]
        transit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, NO_PRODUCER_ID, 50, False)
        assert await _write(restarted.manager, ongoing, transit, 0) == ErrorCode.NOT_COORDINATOR  # stale epoch
        m.pending_state = None
        transit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, NO_PRODUCER_ID, 50, False)
        assert await _write(restarted.manager, ongoing, transit, 1) == ErrorCode.NO_ERROR
        assert m.state == S.PREPARE_COMMIT and m.producer_epoch == 1
        await restarted.close()

    asyncio.run(scenario())


def test_a_corrupt_record_is_refused_on_load(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker = Broker(tmp_path, {6: 0})
        broker.manager.startup({6: 0}, enable_transactional_id_expiration=False)
        tid = _same_partition(broker.manager, 6, "txn", 1)[0]
        await _init(broker.manager, tid, 1000, 0)
        written: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        broker.manager.coordinator_log.append(6, [(key_to_bytes(tid), b"\x00\x01\x00\x00")], 0,
                                              lambda error, _offset: written.set_result(error))
        assert await written == ErrorCode.NO_ERROR
        await broker.close()

        restarted = Broker(tmp_path, {6: 1})
        with pytest.raises(CorruptRecordError, match="offset 1 of __transaction_state-6"):
            restarted.manager.load_partition(6, 1)
        assert restarted.manager.get_transaction_state(tid) == (ErrorCode.NOT_COORDINATOR, None)
        await restarted.close()

    asyncio.run(scenario())


def test_the_wiring_follows_leadership(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker = Broker(tmp_path, {6: 4})
        tid = _same_partition(broker.manager, 6, "txn", 1)[0]
        start_transaction_state_manager(broker.manager, broker.replicas)
        assert broker.manager.transaction_metadata_cache[6].coordinator_epoch == 4
        await _init(broker.manager, tid, 1000, 4)
        # A partition created later (as when the topic is created) is loaded on its election.
        later = _same_partition(broker.manager, 9, "txn", 1)[0]
        assert broker.manager.get_transaction_state(later) == (ErrorCode.NOT_COORDINATOR, None)
        await asyncio.to_thread(broker.replicas.make_leader, TOPIC, 9, TOPIC_ID, [0], 2)
        await wait_until_async(lambda: 9 in broker.manager.transaction_metadata_cache, 10.0, "partition 9 to load")
        assert broker.manager.transaction_metadata_cache[9].coordinator_epoch == 2
        # Deleting the topic unloads every partition.
        await asyncio.to_thread(broker.replicas.delete_partitions, TOPIC)
        await wait_until_async(lambda: not broker.manager.transaction_metadata_cache, 10.0, "the partitions to unload")
        assert broker.manager.get_transaction_state(tid) == (ErrorCode.NOT_COORDINATOR, None)
        await broker.close()

    asyncio.run(scenario())
