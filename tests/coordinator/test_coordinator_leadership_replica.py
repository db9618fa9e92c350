"""The coordinators follow the replica manager's leadership, as the broker wires them.

A real ReplicaManager (logs on disk) driven by the controller's requests:
LeaderAndIsr makes this broker (id 1) leader of every partition of
``__consumer_offsets`` and ``__transaction_state``, then a follower of broker
2, then leader again at a newer epoch, and StopReplica takes them away. The
coordinators are built and started by ``broker.coordinator_wiring``: they
load on election (at the partition's leader epoch for transactions), unload
on becoming follower and on StopReplica, and their state comes back from the
log when leadership returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from pathlib import Path

from broker.config.broker_config import BrokerConfig
from broker.coordinator_wiring import (
    build_group_coordinator,
    build_transaction_coordinator,
    build_transaction_state_manager,
    follow_leadership,
    start_transaction_coordinator,
)
from coordinator.common.internal_topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from coordinator.group.group_metadata import OffsetAndMetadata
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from pytest_pafka.waiting import wait_until_async
from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager
from replication.state_change_requests import (
    BrokerEndpoint,
    LeaderAndIsrStates,
    PartitionState,
    StopReplicaPartition,
    StopReplicaStates,
)
from storage.log_manager import LogManager

ME, OTHER = 1, 2
PARTITIONS = 3
TOPIC_IDS = {GROUP_METADATA_TOPIC_NAME: uuid.uuid4(), TRANSACTION_STATE_TOPIC_NAME: uuid.uuid4()}
WAIT_S = 10.0
TP = ("t", 0)


def _leader_and_isr(leader: int, epoch: int) -> LeaderAndIsrStates:
    return LeaderAndIsrStates(OTHER, 1, [
        PartitionState(topic, topic_id, LeaderAndIsrPartitionState(
            topic_name=topic, partition_index=p, controller_epoch=1, leader=leader, leader_epoch=epoch,
            isr=[leader], partition_epoch=epoch, replicas=[ME, OTHER], is_new=epoch == 1))
        for topic, topic_id in TOPIC_IDS.items() for p in range(PARTITIONS)],
        {leader: BrokerEndpoint(leader, "127.0.0.1", 9)})


def _stop_replicas(epoch: int) -> StopReplicaStates:
    return StopReplicaStates(OTHER, 1, [StopReplicaPartition(topic, p, epoch, delete=True)
                                        for topic in TOPIC_IDS for p in range(PARTITIONS)])


def test_coordinators_load_and_unload_with_leader_and_isr_and_stop_replica(tmp_path: Path) -> None:
    async def scenario() -> None:
        logs = LogManager([tmp_path])
        logs.startup()
        executor = concurrent.futures.ThreadPoolExecutor(1)
        replicas = ReplicaManager(ME, logs, AppendThread(executor))
        config = BrokerConfig(**{"offsets.topic.num.partitions": PARTITIONS,
                                 "transaction.state.log.num.partitions": PARTITIONS})
        group = build_group_coordinator(config, ME, replicas)
        txn_manager = build_transaction_state_manager(config, ME, replicas)
        pids = iter(range(7000, 8000))

        async def generate() -> int:
            return next(pids)

        txn = build_transaction_coordinator(config, ME, replicas, txn_manager, generate, lambda topic: True,
                                            group.manager.partition_for)
        group.startup()
        follow_leadership(group, replicas)
        start_transaction_coordinator(txn, replicas)
        txn_partition = txn_manager.partition_for("tid")
        try:
            def fetch() -> tuple[ErrorCode, int | None]:
                error, offsets, _ = group.handle_fetch_offsets("g", False, [TP])
                found = offsets.get(TP)
                return error, None if found is None else found.offset

            async def commit(offset: int) -> ErrorCode:
                done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
                group.handle_commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(offset, -1, "", 1)},
                                            lambda errors: done.set_result(errors[TP]))
                return await done

            assert fetch()[0] == ErrorCode.NOT_COORDINATOR
            assert (await txn.handle_init_producer_id("tid", 60_000)).error == ErrorCode.NOT_COORDINATOR

            # Leader at epoch 1: both coordinators own their partitions (empty: at once).
            response = await replicas.become_leader_or_follower(_leader_and_isr(ME, 1))
            assert response.error_code == ErrorCode.NO_ERROR
            await wait_until_async(lambda: fetch()[0] == ErrorCode.NO_ERROR, WAIT_S, "the group election")
            assert await commit(42) == ErrorCode.NO_ERROR
            await wait_until_async(lambda: txn_partition in txn_manager.transaction_metadata_cache, WAIT_S, "the txn election")
            init = await txn.handle_init_producer_id("tid", 60_000)
            assert (init.error, init.producer_id, init.producer_epoch) == (ErrorCode.NO_ERROR, 7000, 0)

            # Follower of broker 2 at epoch 2: unloaded.
            await replicas.become_leader_or_follower(_leader_and_isr(OTHER, 2))
            await wait_until_async(lambda: fetch()[0] == ErrorCode.NOT_COORDINATOR, WAIT_S, "the group resignation")
            assert group.manager.get_group("g") is None
            await wait_until_async(lambda: txn_partition not in txn_manager.transaction_metadata_cache, WAIT_S, "the txn resignation")
            assert (await txn.handle_init_producer_id("tid", 60_000)).error == ErrorCode.NOT_COORDINATOR

            # Leader again at epoch 3: loaded from the log, the transaction coordinator at epoch 3.
            await replicas.become_leader_or_follower(_leader_and_isr(ME, 3))
            await wait_until_async(lambda: fetch() == (ErrorCode.NO_ERROR, 42), WAIT_S, "the group load")
            await wait_until_async(lambda: txn_partition in txn_manager.transaction_metadata_cache, WAIT_S, "the txn load")
            assert txn_manager.transaction_metadata_cache[txn_partition].coordinator_epoch == 3
            again = await txn.handle_init_producer_id("tid", 60_000)
            assert (again.error, again.producer_id, again.producer_epoch) == (ErrorCode.NO_ERROR, 7000, 1)

            # StopReplica (delete): gone.
            await replicas.stop_replicas(_stop_replicas(4))
            await wait_until_async(lambda: fetch()[0] == ErrorCode.NOT_COORDINATOR, WAIT_S, "the group unload on StopReplica")
            await wait_until_async(lambda: txn_partition not in txn_manager.transaction_metadata_cache, WAIT_S,
                                   "the txn unload on StopReplica")
        finally:
            await group.shutdown()
            await txn.shutdown()
            replicas.shutdown()
            executor.shutdown(wait=True)
            logs.shutdown()

    asyncio.run(scenario())
