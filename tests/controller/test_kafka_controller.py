"""KafkaController against a real ZooKeeper: election, failover, new topics, broker failure.

Brokers are represented by their ZooKeeper sessions and fake inter-broker endpoints
(tests/controller/controller_rig.py); what the controller sent them is checked, and
what it wrote is read back from ZooKeeper.
"""

from __future__ import annotations

from controller.admin_zk_client import AdminZkClient
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from tests.controller.controller_rig import ControllerRig
from tests.in_process import run, wait_for


def _lai_states(request: LeaderAndIsrRequest) -> dict[tuple[str, int], tuple[int, list[int], int, bool]]:
    return {
        (t.topic_name, p.partition_index): (p.leader, p.isr, p.leader_epoch, p.is_new)
        for t in request.topic_states for p in t.partition_states
    }


def test_one_controller_is_elected_and_a_new_one_takes_over_when_its_session_closes(zk_connect: str) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2, 3])
        try:
            first = cluster.active()
            assert first is not None
            assert first.controller.epoch == 1
            zk = first.zk
            assert await zk.get_controller_id() == first.broker_id
            epoch = await zk.get_controller_epoch()
            assert epoch is not None and epoch[0] == 1
            await cluster.wait_idle()
            # Every broker heard from the controller: the whole broker list, with epoch 1.
            for node in cluster.nodes.values():
                await wait_for(lambda node=node: any(
                    {b.id for b in m.live_brokers} == {1, 2, 3}
                    for m in node.fake.of_type(UpdateMetadataRequest)), what="UpdateMetadata with all brokers")
                for um in node.fake.of_type(UpdateMetadataRequest):
                    assert isinstance(um, UpdateMetadataRequest)
                    assert (um.controller_id, um.controller_epoch) == (first.broker_id, 1)
                    assert um.broker_epoch == node.broker_epoch

            await first.stop()
            survivors = [n for n in cluster.nodes.values() if n.running]
            await wait_for(lambda: cluster.active() is not None, timeout=10, what="a new controller")
            second = cluster.active()
            assert second is not None and second.broker_id != first.broker_id
            assert second.controller.epoch == 2
            assert not first.controller.is_active
            await cluster.wait_idle()
            for node in survivors:
                await wait_for(lambda node=node: any(
                    isinstance(m, UpdateMetadataRequest) and m.controller_epoch == 2
                    and {b.id for b in m.live_brokers} == {n.broker_id for n in survivors}
                    for m in node.fake.of_type(UpdateMetadataRequest)), what="UpdateMetadata from the new controller")
            # The others keep following.
            for node in survivors:
                if node is not second:
                    assert not node.controller.is_active
                    assert node.controller.active_controller_id == second.broker_id
        finally:
            await cluster.stop()

    run(scenario())


def test_new_topic_gets_leaders_isr_and_leader_and_isr_requests(zk_connect: str) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2, 3])
        try:
            admin = AdminZkClient(cluster.nodes[2].zk)
            created = await admin.create_topic("orders", 6, 2, {"retention.ms": "1000"})
            assert len(created.partitions) == 6
            zk = cluster.nodes[1].zk
            tps = [("orders", p) for p in range(6)]
            await wait_for(lambda: _count_states(zk, tps, 6), what="partition states")
            states = await zk.get_partition_states(tps)
            for tp, state in states.items():
                replicas = created.partitions[tp[1]]
                lai = state.leader_and_isr
                assert (lai.leader, lai.isr, lai.leader_epoch, lai.partition_epoch) == (replicas[0], replicas, 0, 0)
                assert state.controller_epoch == 1
            assert (await zk.get_topic_configs(["orders"]))["orders"] == {"retention.ms": "1000"}
            await cluster.wait_idle()
            # Each replica's broker was told about its partitions as new, with the topic id.
            for broker_id, node in cluster.nodes.items():
                mine = {tp for tp in tps if broker_id in created.partitions[tp[1]]}
                await wait_for(lambda node=node, mine=mine: mine <= _told(node.fake), what="LeaderAndIsr")
                for request in node.fake.of_type(LeaderAndIsrRequest):
                    assert isinstance(request, LeaderAndIsrRequest)
                    for topic in request.topic_states:
                        assert topic.topic_id == created.topic_id
                        for p in topic.partition_states:
                            assert p.replicas == created.partitions[p.partition_index]
                # Every broker's metadata names every partition's leader.
                await wait_for(lambda node=node: set(tps) <= _metadata_partitions(node.fake), what="UpdateMetadata")
        finally:
            await cluster.stop()

    run(scenario())


async def _count_states(zk: object, tps: list[tuple[str, int]], expected: int) -> bool:
    from controller.zk.kafka_zk_client import KafkaZkClient

    assert isinstance(zk, KafkaZkClient)
    return len(await zk.get_partition_states(tps)) == expected


def _told(fake: object) -> set[tuple[str, int]]:
    from tests.controller.fake_broker import FakeBroker

    assert isinstance(fake, FakeBroker)
    told: set[tuple[str, int]] = set()
    for request in fake.of_type(LeaderAndIsrRequest):
        assert isinstance(request, LeaderAndIsrRequest)
        told |= set(_lai_states(request))
    return told


def _metadata_partitions(fake: object) -> set[tuple[str, int]]:
    from tests.controller.fake_broker import FakeBroker

    assert isinstance(fake, FakeBroker)
    seen: set[tuple[str, int]] = set()
    for request in fake.of_type(UpdateMetadataRequest):
        assert isinstance(request, UpdateMetadataRequest)
        seen |= {(t.topic_name, p.partition_index) for t in request.topic_states for p in t.partition_states}
    return seen


def test_new_controller_rebuilds_from_zookeeper_and_re_announces_every_partition(zk_connect: str) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2, 3])
        try:
            first = cluster.active()
            assert first is not None
            admin = AdminZkClient(first.zk)
            created = await admin.create_topic("fo", 6, 2, {})
            tps = [("fo", p) for p in range(6)]
            await wait_for(lambda: _count_states(first.zk, tps, 6), what="partition states")
            await cluster.wait_idle()
            await first.stop()
            await wait_for(lambda: cluster.active() is not None, timeout=10, what="a new controller")
            second = cluster.active()
            assert second is not None
            await cluster.wait_idle()
            states = await second.zk.get_partition_states(tps)
            for tp, state in states.items():
                lai = state.leader_and_isr
                assert lai.leader != first.broker_id and lai.leader in created.partitions[tp[1]]
                assert first.broker_id not in lai.isr
            ctx = second.controller.context
            assert ctx.topic_ids["fo"] == created.topic_id
            assert {tp: ctx.partition_leadership_info[tp].leader_and_isr for tp in tps} == {
                tp: s.leader_and_isr for tp, s in states.items()}
            # Every surviving replica heard its partitions' state from the new controller (epoch 2).
            for node in cluster.nodes.values():
                if not node.running:
                    continue
                mine = {tp for tp in tps if node.broker_id in created.partitions[tp[1]]}
                await wait_for(lambda node=node, mine=mine: mine <= {
                    (t.topic_name, p.partition_index)
                    for r in node.fake.of_type(LeaderAndIsrRequest) if isinstance(r, LeaderAndIsrRequest)
                    and r.controller_epoch == 2 for t in r.topic_states for p in t.partition_states},
                    what="LeaderAndIsr from the new controller")
        finally:
            await cluster.stop()

    run(scenario())
