"""TransactionCoordinator over a real ReplicaManager: __transaction_state and data partitions on disk, the
markers through LocalMarkerSender (the WriteTxnMarkers path), and a restart mid-transaction."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from pathlib import Path

from coordinator.common.coordinator_log import ReplicaCoordinatorLog
from coordinator.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from coordinator.common.scheduler import AsyncioScheduler
from coordinator.transaction.transaction_coordinator import TransactionCoordinator
from coordinator.transaction.transaction_marker_channel_manager import (
    LocalMarkerSender,
    TransactionMarkerChannelManager,
    replica_leader_lookup,
)
from coordinator.transaction.transaction_metadata import TransactionState
from coordinator.transaction.transaction_state_manager import TransactionResult, TransactionStateManager
from protocol.errors import ErrorCode
from pytest_pafka.waiting import wait_until_async
from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager
from storage.log import now_ms
from storage.log_manager import LogManager
from tests.storage.helpers import make_batch

TOPIC_IDS = {TRANSACTION_STATE_TOPIC_NAME: uuid.uuid4(), "t": uuid.uuid4()}
TID = "copier"


class Broker:
    def __init__(self, data_dir: Path) -> None:
        self.logs = LogManager([data_dir])
        self.logs.startup()
        self.executor = concurrent.futures.ThreadPoolExecutor(1)
        self.replicas = ReplicaManager(0, self.logs, AppendThread(self.executor))
        for partition in range(50):
            self.replicas.make_leader(TRANSACTION_STATE_TOPIC_NAME, partition, TOPIC_IDS[TRANSACTION_STATE_TOPIC_NAME],
                                      [0], leader_epoch=0)
        for partition in (0, 1):
            self.replicas.make_leader("t", partition, TOPIC_IDS["t"], [0])
        scheduler = AsyncioScheduler()
        self.manager = TransactionStateManager(
            0, ReplicaCoordinatorLog(TRANSACTION_STATE_TOPIC_NAME, 50, self.replicas, 5000), scheduler)
        channel = TransactionMarkerChannelManager(
            0, self.manager, LocalMarkerSender(0, self.replicas),
            replica_leader_lookup(0, self.replicas, lambda topic: topic in TOPIC_IDS), scheduler, 5000, 50)
        self.pids = iter(range(5000, 6000))

        async def generate() -> int:
            return next(self.pids)

        self.coordinator = TransactionCoordinator(0, self.manager, channel, generate, scheduler, lambda g: 0)

    def load(self) -> None:
        partition = self.manager.partition_for(TID)
        self.manager.load_transactions_for_txn_topic_partition(partition, 0)

    def produce(self, partition: int, pid: int, epoch: int, seq: int, count: int) -> None:
        batch = make_batch(count, timestamp=now_ms(), producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           transactional=True)
        result = self.replicas.append_records([("t", partition, batch)], 1, 1000)
        assert isinstance(result, list) and result[0].error_code == ErrorCode.NO_ERROR, result

    def lso_and_hw(self, partition: int) -> tuple[int, int]:
        hosted = self.replicas.get_partition("t", partition)
        assert hosted is not None
        return hosted.last_stable_offset, hosted.high_watermark

    def state(self) -> TransactionState | None:
        found = self.manager.get_transaction_state(TID)[1]
        return None if found is None else found.transaction_metadata.state

    async def close(self) -> None:
        await self.coordinator.shutdown()
        self.logs.shutdown()
        self.executor.shutdown()


def test_commit_and_abort_move_the_lso_and_survive_a_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker = Broker(tmp_path)
        broker.load()
        await wait_until_async(lambda: not broker.manager.loading_partitions, 10.0, "the load")
        init = await broker.coordinator.handle_init_producer_id(TID, 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        assert await broker.coordinator.handle_add_partitions_to_transaction(
            TID, pid, epoch, {("t", 0), ("t", 1)}) == ErrorCode.NO_ERROR
        broker.produce(0, pid, epoch, 0, 3)
        broker.produce(1, pid, epoch, 0, 2)
        assert broker.lso_and_hw(0) == (0, 3)
        assert await broker.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.COMMIT) == 0
        await wait_until_async(lambda: broker.state() == TransactionState.COMPLETE_COMMIT, 10.0, "CompleteCommit")
        assert broker.lso_and_hw(0) == (4, 4) and broker.lso_and_hw(1) == (3, 3)
        # A second transaction, left prepared across a restart: the restarted coordinator aborts it.
        await broker.coordinator.handle_add_partitions_to_transaction(TID, pid, epoch, {("t", 0)})
        broker.produce(0, pid, epoch, 3, 1)
        assert await broker.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.ABORT) == 0
        await wait_until_async(lambda: broker.state() == TransactionState.COMPLETE_ABORT, 10.0, "CompleteAbort")
        assert broker.lso_and_hw(0) == (6, 6)
        await broker.coordinator.handle_add_partitions_to_transaction(TID, pid, epoch, {("t", 1)})
        broker.produce(1, pid, epoch, 2, 1)
        assert broker.lso_and_hw(1) == (3, 4)
        await broker.close()

        again = Broker(tmp_path)
        again.load()
        await wait_until_async(lambda: again.state() == TransactionState.ONGOING, 10.0, "the reload")
        # The producer is gone: a new instance fences it and aborts its open transaction.
        assert (await again.coordinator.handle_init_producer_id(TID, 60_000)).error == \
            ErrorCode.CONCURRENT_TRANSACTIONS
        await wait_until_async(lambda: again.state() == TransactionState.COMPLETE_ABORT, 10.0, "the fencing abort")
        assert again.lso_and_hw(1) == (5, 5)
        retried = await again.coordinator.handle_init_producer_id(TID, 60_000)
        assert (retried.error, retried.producer_id, retried.producer_epoch) == (0, pid, epoch + 2)
        await again.close()

    asyncio.run(scenario())
