"""Kafka's partition and replica state machines against a ControllerContext (ZooKeeper is real)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from controller.controller_channel_manager import ControllerChannelManager
from controller.controller_context import ControllerContext, PartitionReplica, PartitionState, ReplicaAssignment, ReplicaState
from controller.controller_request_batch import ControllerRequestBatch
from controller.partition_state_machine import ElectionStrategy, PartitionStateMachine, StateChangeFailedError
from controller.replica_state_machine import ReplicaStateMachine
from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import KafkaZkClient
from tests.in_process import run

Machines = tuple[ControllerContext, KafkaZkClient, PartitionStateMachine, ReplicaStateMachine, ControllerRequestBatch]


def _broker(broker_id: int) -> zd.BrokerInfo:
    return zd.BrokerInfo(broker_id, [zd.EndPoint("127.0.0.1", 1, "PLAINTEXT", "PLAINTEXT")], None, 100 + broker_id)


async def _with_machines(connect: str, body: Callable[[Machines], Awaitable[None]]) -> None:
    zk = KafkaZkClient(connect, 4000, 10_000)
    await zk.start()
    channel = ControllerChannelManager(0, "PLAINTEXT")
    try:
        ctx = ControllerContext()
        ctx.epoch, ctx.epoch_zk_version = await zk.register_controller_and_increment_epoch(0)
        ctx.add_live_brokers([_broker(1), _broker(2), _broker(3)])
        topic_id = uuid.uuid4()
        assignment = {0: [1, 2, 3], 1: [2, 3, 1], 2: [4, 5, 1]}
        await zk.create_topic("t", zd.TopicAssignment(topic_id, assignment), {})
        ctx.add_topic("t", topic_id)
        for p, replicas in assignment.items():
            ctx.update_partition_assignment(("t", p), ReplicaAssignment(replicas))
        batch = ControllerRequestBatch(0, ctx, channel, "PLAINTEXT")
        psm = PartitionStateMachine(ctx, zk, batch)
        rsm = ReplicaStateMachine(ctx, zk, batch)
        await body((ctx, zk, psm, rsm, batch))
    finally:
        await channel.shutdown()
        await zk.close()


def test_invalid_partition_transitions_are_refused_without_writing(zk_connect: str) -> None:
    async def body(m: Machines) -> None:
        ctx, zk, psm, _, _ = m
        results = await psm.handle_state_changes([("t", 0)], PartitionState.ONLINE)
        assert isinstance(results[("t", 0)], StateChangeFailedError)
        assert ctx.partition_state(("t", 0)) is PartitionState.NON_EXISTENT
        assert await zk.get_partition_states([("t", 0)]) == {}
        await psm.handle_state_changes([("t", 0)], PartitionState.NEW)
        results = await psm.handle_state_changes([("t", 0)], PartitionState.NON_EXISTENT)
        assert ctx.partition_state(("t", 0)) is PartitionState.NEW  # New -> NonExistent is not a transition

    run(_with_machines(zk_connect, body))


def test_new_partitions_go_online_with_first_live_replica_or_fail_with_none_alive(zk_connect: str) -> None:
    async def body(m: Machines) -> None:
        ctx, zk, psm, _, batch = m
        ctx.remove_live_brokers([2])
        tps = [("t", 0), ("t", 1), ("t", 2)]
        await psm.handle_state_changes(tps, PartitionState.NEW)
        ctx.remove_live_brokers([1])
        results = await psm.handle_state_changes(tps, PartitionState.ONLINE, ElectionStrategy.offline())
        assert results[("t", 0)] == zd.LeaderAndIsr(3, 0, [3])
        assert results[("t", 1)] == zd.LeaderAndIsr(3, 0, [3])
        failure = results[("t", 2)]
        assert isinstance(failure, StateChangeFailedError)
        assert "No assigned replica is alive" in str(failure)
        assert ctx.partition_state(("t", 2)) is PartitionState.NEW
        assert ctx.partition_state(("t", 0)) is PartitionState.ONLINE
        states = await zk.get_partition_states(tps)
        assert set(states) == {("t", 0), ("t", 1)}
        assert states[("t", 0)].controller_epoch == ctx.epoch
        assert not batch.leader_and_isr  # sent (to nobody reachable) and cleared

    run(_with_machines(zk_connect, body))


def test_offline_partition_elects_from_live_isr_and_replica_offline_shrinks_isr(zk_connect: str) -> None:
    async def body(m: Machines) -> None:
        ctx, zk, psm, rsm, _ = m
        tps = [("t", 0), ("t", 1)]
        await psm.handle_state_changes(tps, PartitionState.NEW)
        await psm.handle_state_changes(tps, PartitionState.ONLINE)
        rsm.initialize_replica_states()
        assert ctx.replica_state(PartitionReplica("t", 0, 1)) is ReplicaState.ONLINE
        assert ctx.replica_state(PartitionReplica("t", 2, 4)) is ReplicaState.DELETION_INELIGIBLE
        # Broker 1 dies: t-0 (led by 1) goes offline and elects 2; replicas on 1 go offline.
        ctx.remove_live_brokers([1])
        await psm.handle_state_changes([("t", 0)], PartitionState.OFFLINE)
        await psm.trigger_online_partition_state_change()
        await rsm.handle_state_changes([PartitionReplica("t", 0, 1), PartitionReplica("t", 1, 1)], ReplicaState.OFFLINE)
        states = await zk.get_partition_states(tps)
        t0, t1 = states[("t", 0)].leader_and_isr, states[("t", 1)].leader_and_isr
        assert (t0.leader, t0.isr, t0.leader_epoch) == (2, [2, 3], 1)
        assert (t1.leader, t1.isr, t1.leader_epoch) == (2, [2, 3], 1)
        assert ctx.partition_leadership_info[("t", 1)].leader_and_isr == t1
        assert ctx.replica_state(PartitionReplica("t", 0, 1)) is ReplicaState.OFFLINE
        # Down to its last ISR member, a partition keeps it (leader none) instead of an empty ISR.
        ctx.remove_live_brokers([2])
        await rsm.handle_state_changes([PartitionReplica("t", 0, 2)], ReplicaState.OFFLINE)
        ctx.remove_live_brokers([3])
        await rsm.handle_state_changes([PartitionReplica("t", 0, 3)], ReplicaState.OFFLINE)
        t0 = (await zk.get_partition_states([("t", 0)]))[("t", 0)].leader_and_isr
        assert (t0.leader, t0.isr) == (zd.LEADER_NONE, [3])

    run(_with_machines(zk_connect, body))


def test_new_partition_whose_state_znode_exists_adopts_it_and_elects_if_its_leader_is_gone(zk_connect: str) -> None:
    async def body(m: Machines) -> None:
        ctx, zk, psm, _, _ = m
        written = zd.LeaderIsrAndControllerEpoch(zd.LeaderAndIsr(5, 4, [5, 1]), ctx.epoch)
        live_written = zd.LeaderIsrAndControllerEpoch(zd.LeaderAndIsr(3, 2, [3, 2]), ctx.epoch)
        assert await zk.create_partition_states({("t", 2): written, ("t", 1): live_written}, ctx.epoch_zk_version) == {}
        tps = [("t", 1), ("t", 2)]
        await psm.handle_state_changes(tps, PartitionState.NEW)
        results = await psm.handle_state_changes(tps, PartitionState.ONLINE)
        assert results[("t", 1)] == zd.LeaderAndIsr(3, 2, [3, 2])  # adopted as it is: its leader lives
        t2 = results[("t", 2)]
        assert isinstance(t2, zd.LeaderAndIsr)
        assert (t2.leader, t2.isr, t2.leader_epoch, t2.partition_epoch) == (1, [1], 5, 1)  # elected from the live ISR
        assert ctx.partition_state(("t", 2)) is PartitionState.ONLINE

    run(_with_machines(zk_connect, body))
