"""The controller's reactions and requests on a real ZooKeeper: broker failure, controlled
shutdown, AlterPartition, ElectLeaders, topic deletion, and a deposed controller."""

from __future__ import annotations

import asyncio
import dataclasses

from controller.admin_zk_client import AdminZkClient
from controller.controller_config import ControllerConfig
from controller.controller_requests import ELECTION_PREFERRED, ELECTION_UNCLEAN
from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionRequestPartitionData,
    AlterPartitionRequestTopicData,
    BrokerState,
)
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from pytest_pafka.zookeeper import ZooKeeperProcess, expire_session
from tests.controller.controller_rig import LISTENER, ControllerRig
from tests.in_process import run, wait_for

TP = tuple[str, int]


async def _topic(cluster: ControllerRig, name: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None) -> None:
    any_node = next(n for n in cluster.nodes.values() if n.running)
    await AdminZkClient(any_node.zk).create_topic(name, -1, -1, configs or {}, assignment)
    tps = [(name, p) for p in assignment]
    await wait_for(lambda: _has_states(any_node.zk, tps), what=f"{name}'s partition states")
    await cluster.wait_idle()


async def _has_states(zk: KafkaZkClient, tps: list[TP]) -> bool:
    return len(await zk.get_partition_states(tps)) == len(tps)


async def _state(zk: KafkaZkClient, tp: TP) -> zd.LeaderAndIsr:
    return (await zk.get_partition_states([tp]))[tp].leader_and_isr


def _zk(cluster: ControllerRig) -> KafkaZkClient:
    return next(n for n in cluster.nodes.values() if n.running).zk


def test_failed_broker_loses_its_leaderships_and_isr_memberships(zk_connect: str) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2, 3])
        try:
            victim = next(b for b in (1, 2, 3) if not cluster.nodes[b].controller.is_active)
            others = [b for b in (1, 2, 3) if b != victim]
            await _topic(cluster, "t", {0: [victim, others[0], others[1]], 1: [others[0], victim, others[1]]})
            await _topic(cluster, "t2", {0: [victim, others[0]]})
            before = await _state(_zk(cluster), ("t", 0))
            await cluster.nodes[victim].stop()
            zk = _zk(cluster)
            await wait_for(lambda: _leader_is(zk, ("t", 0), others[0]), what="new leader of t-0")
            await cluster.wait_idle()
            p0, p1, p2 = (await _state(zk, ("t", 0))), (await _state(zk, ("t", 1))), (await _state(zk, ("t2", 0)))
            assert (p0.leader, p0.isr) == (others[0], [others[0], others[1]])
            assert p0.leader_epoch == before.leader_epoch + 1
            assert (p1.leader, p1.isr) == (others[0], [others[0], others[1]])  # a follower left the ISR
            assert (p2.leader, p2.isr) == (others[0], [others[0]])
            # The surviving replicas were told the new leader.
            node = cluster.nodes[others[1]]
            await wait_for(lambda: any(_partition_leader(r, ("t", 0)) == others[0] for r in node.fake.of_type(LeaderAndIsrRequest)),
                           what="LeaderAndIsr with the new leader")
            # Every broker's metadata no longer lists the dead broker.
            await wait_for(lambda: any({b.id for b in m.live_brokers} == set(others)
                                       for m in node.fake.of_type(UpdateMetadataRequest)), what="UpdateMetadata")
            # The broker comes back: it is told its replicas' states, and preferred election gives t-0 back.
            await cluster.add(victim)
            back = cluster.nodes[victim]
            await wait_for(lambda: ("t", 0) in _told(back.fake), what="LeaderAndIsr to the returning broker")
            results = await cluster.controller().elect_leaders(ELECTION_PREFERRED, [("t", 0)])
            # Not in the ISR yet (no AlterPartition from a real leader here): Kafka's error.
            assert results[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        finally:
            await cluster.stop()

    run(scenario())


async def _leader_is(zk: KafkaZkClient, tp: TP, leader: int) -> bool:
    states = await zk.get_partition_states([tp])
    return tp in states and states[tp].leader_and_isr.leader == leader


def _partition_leader(request: object, tp: TP) -> int | None:
    assert isinstance(request, LeaderAndIsrRequest)
    for t in request.topic_states:
        for p in t.partition_states:
            if (t.topic_name, p.partition_index) == tp:
                return p.leader
    return None


def _told(fake: object) -> set[TP]:
    from tests.controller.fake_broker import FakeBroker

    assert isinstance(fake, FakeBroker)
    return {(t.topic_name, p.partition_index) for r in fake.of_type(LeaderAndIsrRequest)
            if isinstance(r, LeaderAndIsrRequest) for t in r.topic_states for p in t.partition_states}


def test_controlled_shutdown_moves_leaderships_and_shrinks_isrs(zk_connect: str) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2, 3])
        try:
            leaving = next(b for b in (1, 2, 3) if not cluster.nodes[b].controller.is_active)
            rest = [b for b in (1, 2, 3) if b != leaving]
            await _topic(cluster, "cs", {0: [leaving, rest[0], rest[1]], 1: [rest[0], leaving, rest[1]]})
            await _topic(cluster, "cs1", {0: [leaving]})
            controller = cluster.controller()
            stale = await controller.controlled_shutdown(leaving, cluster.nodes[leaving].broker_epoch - 1)
            assert stale == (ErrorCode.STALE_BROKER_EPOCH, [])
            assert await controller.controlled_shutdown(99, -1) == (ErrorCode.BROKER_NOT_AVAILABLE, [])
            error, remaining = await controller.controlled_shutdown(leaving, cluster.nodes[leaving].broker_epoch)
            # cs1-0 has one replica: nothing to move it to, so it is not reported (Kafka skips RF 1).
            assert (error, remaining) == (ErrorCode.NO_ERROR, [])
            zk = _zk(cluster)
            p0, p1, p2 = (await _state(zk, ("cs", 0))), (await _state(zk, ("cs", 1))), (await _state(zk, ("cs1", 0)))
            assert (p0.leader, p0.isr) == (rest[0], [rest[0], rest[1]])
            assert (p1.leader, p1.isr) == (rest[0], [rest[0], rest[1]])
            assert (p2.leader, p2.isr) == (leaving, [leaving])
            # The shutting-down broker was told to stop following cs-1 (without deleting it).
            await wait_for(lambda: cluster.nodes[leaving].fake.of_type(StopReplicaRequest) != [], what="StopReplica")
            stop = cluster.nodes[leaving].fake.of_type(StopReplicaRequest)[0]
            assert isinstance(stop, StopReplicaRequest)
            stopped = [(t.topic_name, p.partition_index, p.delete_partition) for t in stop.topic_states for p in t.partition_states]
            assert stopped == [("cs", 1, False)]
            # Non-controllers refuse.
            follower = cluster.nodes[rest[1]] if not cluster.nodes[rest[1]].controller.is_active else cluster.nodes[rest[0]]
            assert (await follower.controller.controlled_shutdown(leaving, -1))[0] == ErrorCode.NOT_CONTROLLER
        finally:
            await cluster.stop()

    run(scenario())


def _alter(broker_id: int, broker_epoch: int, topic_id: object, partition: int, leader_epoch: int, isr: list[int],
           partition_epoch: int, epochs: dict[int, int]) -> AlterPartitionRequest:
    return AlterPartitionRequest(broker_id=broker_id, broker_epoch=broker_epoch, topics=[
        AlterPartitionRequestTopicData(topic_id=topic_id, partitions=[AlterPartitionRequestPartitionData(
            partition_index=partition, leader_epoch=leader_epoch,
            new_isr_with_epochs=[BrokerState(broker_id=b, broker_epoch=epochs.get(b, -1)) for b in isr],
            partition_epoch=partition_epoch)])])


def test_alter_partition_checks_epochs_writes_zookeeper_and_answers_the_new_state(zk_connect: str) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2, 3])
        try:
            await _topic(cluster, "ap", {0: [1, 2, 3]})
            controller = cluster.controller()
            zk = _zk(cluster)
            topic_id = controller.context.topic_ids["ap"]
            epochs = {b: n.broker_epoch for b, n in cluster.nodes.items()}
            current = await _state(zk, ("ap", 0))
            assert (current.leader, current.isr, current.partition_epoch) == (1, [1, 2, 3], 0)

            response = await controller.alter_partition(_alter(1, epochs[1], topic_id, 0, current.leader_epoch, [1, 2], 0, epochs))
            (part,) = response.topics[0].partitions
            assert (response.error_code, part.error_code, part.leader_id, part.isr, part.partition_epoch) == (0, 0, 1, [1, 2], 1)
            written = await _state(zk, ("ap", 0))
            assert (written.isr, written.partition_epoch, written.leader_epoch) == ([1, 2], 1, current.leader_epoch)
            # Every broker hears the new ISR.
            await wait_for(lambda: any(
                p.isr == [1, 2] for m in cluster.nodes[3].fake.of_type(UpdateMetadataRequest)
                if isinstance(m, UpdateMetadataRequest) for t in m.topic_states for p in t.partition_states),
                what="UpdateMetadata with the shrunk ISR")

            def code(resp: object) -> int:
                from protocol.messages.alter_partition import AlterPartitionResponse
                assert isinstance(resp, AlterPartitionResponse)
                return resp.error_code or resp.topics[0].partitions[0].error_code

            # The same request again: already so (idempotent), answered with the current state.
            again = await controller.alter_partition(_alter(1, epochs[1], topic_id, 0, current.leader_epoch, [1, 2], 0, epochs))
            assert code(again) == 0 and again.topics[0].partitions[0].partition_epoch == 1
            # A stale partition epoch.
            assert code(await controller.alter_partition(
                _alter(1, epochs[1], topic_id, 0, current.leader_epoch, [1], 0, epochs))) == ErrorCode.INVALID_UPDATE_VERSION
            # A stale leader epoch.
            assert code(await controller.alter_partition(
                _alter(1, epochs[1], topic_id, 0, current.leader_epoch - 1, [1], 1, epochs))) == ErrorCode.FENCED_LEADER_EPOCH
            # A stale broker epoch.
            assert code(await controller.alter_partition(
                _alter(1, epochs[1] - 1, topic_id, 0, current.leader_epoch, [1], 1, epochs))) == ErrorCode.STALE_BROKER_EPOCH
            # An unknown topic id.
            import uuid
            assert code(await controller.alter_partition(
                _alter(1, epochs[1], uuid.uuid4(), 0, 0, [1], 0, epochs))) == ErrorCode.UNKNOWN_TOPIC_ID
            # Expanding back to 3 works (broker 3 is alive); a v0-1 request names the topic instead of its id.
            by_name = AlterPartitionRequest(broker_id=1, broker_epoch=epochs[1], topics=[AlterPartitionRequestTopicData(
                topic_name="ap", partitions=[AlterPartitionRequestPartitionData(
                    partition_index=0, leader_epoch=current.leader_epoch, new_isr=[1, 2, 3], partition_epoch=1)])])
            grown = await controller.alter_partition(by_name)
            assert code(grown) == 0 and grown.topics[0].partitions[0].isr == [1, 2, 3]
            assert grown.topics[0].topic_name == "ap"
            by_name.topics[0].topic_name = "nope"
            assert code(await controller.alter_partition(by_name)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # Only the controller answers.
            other = next(n for n in cluster.nodes.values() if not n.controller.is_active)
            assert code(await other.controller.alter_partition(
                _alter(1, epochs[1], topic_id, 0, current.leader_epoch, [1], 2, epochs))) == ErrorCode.NOT_CONTROLLER
        finally:
            await cluster.stop()

    run(scenario())


def test_elect_leaders_preferred_and_unclean(zk_connect: str) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2, 3])
        try:
            await _topic(cluster, "el", {0: [1, 2], 1: [2, 3], 2: [3, 1]}, {"unclean.leader.election.enable": "false"})
            controller = cluster.controller()
            cid = next(b for b, n in cluster.nodes.items() if n.controller is controller)
            zk = _zk(cluster)
            results = await controller.elect_leaders(ELECTION_PREFERRED, [("el", 0), ("el", 9), ("nope", 0)])
            assert results[("el", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED
            assert results[("el", 9)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert results[("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # Controlled shutdown of el-0's preferred leader moves it; preferred election brings it back.
            target = 1 if cid != 1 else 2
            tp = ("el", 0) if target == 1 else ("el", 1)
            await controller.controlled_shutdown(target, -1)
            moved = await _state(zk, tp)
            assert moved.leader != target
            # The broker "restarts" its shutdown: it is back in the ISR by AlterPartition from the leader.
            controller.context.shutting_down_broker_ids.discard(target)
            topic_id = controller.context.topic_ids["el"]
            epochs = {b: n.broker_epoch for b, n in cluster.nodes.items()}
            answer = await controller.alter_partition(_alter(moved.leader, epochs[moved.leader], topic_id, tp[1], moved.leader_epoch,
                                                             [*moved.isr, target], moved.partition_epoch, epochs))
            assert answer.topics[0].partitions[0].error_code == 0
            results = await controller.elect_leaders(ELECTION_PREFERRED, [tp])
            assert results == {tp: (ErrorCode.NO_ERROR, None)}
            assert (await _state(zk, tp)).leader == target
            # Unclean: with the leader alive, no election is needed.
            results = await controller.elect_leaders(ELECTION_UNCLEAN, [tp])
            assert results[tp][0] == ErrorCode.ELECTION_NOT_NEEDED
        finally:
            await cluster.stop()

    run(scenario())


def test_unclean_leader_election_only_when_the_topic_allows_it(zk_connect: str) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2, 3])
        try:
            cid = next(b for b, n in cluster.nodes.items() if n.controller.is_active)
            a, b = [x for x in (1, 2, 3) if x != cid]
            await _topic(cluster, "clean", {0: [a, b]}, {"unclean.leader.election.enable": "false"})
            await _topic(cluster, "dirty", {0: [a, b]}, {"unclean.leader.election.enable": "true"})
            await _topic(cluster, "plain", {0: [a, b]})  # no override: the brokers' dynamic default (true) applies
            await _zk(cluster).set_broker_configs("<default>", {"unclean.leader.election.enable": "true"})
            controller = cluster.controller()
            epochs = {x: n.broker_epoch for x, n in cluster.nodes.items()}
            zk = _zk(cluster)
            for topic in ("clean", "dirty", "plain"):  # b falls out of the ISR
                st = await _state(zk, (topic, 0))
                resp = await controller.alter_partition(_alter(a, epochs[a], controller.context.topic_ids[topic], 0,
                                                               st.leader_epoch, [a], st.partition_epoch, epochs))
                assert resp.topics[0].partitions[0].error_code == 0
            await cluster.nodes[a].stop()  # the only in-sync replica dies
            await wait_for(lambda: _leader_is(zk, ("dirty", 0), b), what="unclean leader for dirty-0")
            await cluster.wait_idle()
            await wait_for(lambda: _leader_is(zk, ("plain", 0), b), what="unclean leader for plain-0")
            dirty, clean = await _state(zk, ("dirty", 0)), await _state(zk, ("clean", 0))
            assert (dirty.leader, dirty.isr) == (b, [b])
            assert (clean.leader, clean.isr) == (zd.LEADER_NONE, [a])  # offline: the last ISR member is kept
            # ElectLeaders UNCLEAN forces it for the clean topic too.
            results = await cluster.controller().elect_leaders(ELECTION_UNCLEAN, [("clean", 0), ("dirty", 0)])
            assert results[("clean", 0)] == (ErrorCode.NO_ERROR, None)
            assert results[("dirty", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED
            assert (await _state(zk, ("clean", 0))).leader == b
        finally:
            await cluster.stop()

    run(scenario())


def test_topic_deletion_stops_and_deletes_replicas_then_removes_znodes(zk_connect: str) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2])
        try:
            await _topic(cluster, "gone", {0: [1, 2], 1: [2, 1]})
            zk = _zk(cluster)
            await AdminZkClient(zk).delete_topic("gone")
            await wait_for(lambda: _topic_absent(zk, "gone"), what="topic znodes removed")
            assert await zk.get_delete_topic_markers() == set()
            for node in cluster.nodes.values():
                stops = [r for r in node.fake.of_type(StopReplicaRequest) if isinstance(r, StopReplicaRequest)]
                deleted = {(t.topic_name, p.partition_index) for r in stops for t in r.topic_states
                           for p in t.partition_states if p.delete_partition}
                assert deleted == {("gone", 0), ("gone", 1)}
                # Brokers heard "being deleted" (leader -2) before the StopReplica.
                assert any(p.leader == -2 for m in node.fake.of_type(UpdateMetadataRequest)
                           if isinstance(m, UpdateMetadataRequest) for t in m.topic_states for p in t.partition_states)
            await cluster.wait_idle()
            assert "gone" not in cluster.controller().context.all_topics
            # The name can be used again.
            await _topic(cluster, "gone", {0: [2]})
        finally:
            await cluster.stop()

    run(scenario())


async def _topic_absent(zk: KafkaZkClient, topic: str) -> bool:
    return topic not in await zk.get_all_topics() and not (await zk.get_topic_configs([topic])).get(topic)


def test_topic_deletion_disabled_drops_the_marker(zk_connect: str) -> None:
    async def scenario() -> None:
        config = ControllerConfig(inter_broker_listener_name=LISTENER, delete_topic_enable=False)
        cluster = await ControllerRig(zk_connect, config).start([1])
        try:
            await _topic(cluster, "kept", {0: [1]})
            zk = _zk(cluster)
            await AdminZkClient(zk).delete_topic("kept")
            await wait_for(lambda: _no_markers(zk), what="marker removed")
            assert "kept" in await zk.get_all_topics()
        finally:
            await cluster.stop()

    run(scenario())


async def _no_markers(zk: KafkaZkClient) -> bool:
    return not await zk.get_delete_topic_markers()


def test_deposed_controller_stops_and_its_writes_are_refused(zk_connect: str, zookeeper: ZooKeeperProcess) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2])
        try:
            await _topic(cluster, "f", {0: [1, 2]})
            old = cluster.active()
            assert old is not None
            old_context_epoch, old_zk_version = old.controller.context.epoch, old.controller.context.epoch_zk_version
            client_id = old.zk.client_id
            assert client_id is not None
            await asyncio.to_thread(expire_session, zookeeper.connect_string, client_id)
            await wait_for(lambda: not old.controller.is_active, timeout=10, what="the old controller to resign")
            await wait_for(lambda: any(n.controller.is_active and n is not old for n in cluster.nodes.values()),
                           timeout=15, what="a new controller")
            new = cluster.active()
            assert new is not None and new.controller.epoch > old_context_epoch
            # A write fenced by the old controller epoch's znode version fails.
            st = await _state(new.zk, ("f", 0))
            try:
                await old.zk.update_leader_and_isr({("f", 0): dataclasses.replace(st, isr=[st.leader])},
                                                   old_context_epoch, old_zk_version)
            except ControllerMovedError:
                pass
            else:
                raise AssertionError("a deposed controller's write went through")
            assert (await _state(new.zk, ("f", 0))).isr == st.isr
            # With its new session, the old one follows the new controller and does not act.
            await wait_for(lambda: old.controller.active_controller_id == new.broker_id, timeout=10,
                           what="the old controller to follow the new one")
            assert not old.controller.is_active and old.controller.context.partition_leadership_info == {}
        finally:
            await cluster.stop()

    run(scenario())


def test_auto_leader_rebalance_returns_leadership_to_the_preferred_replica(zk_connect: str) -> None:
    async def scenario() -> None:
        config = ControllerConfig(inter_broker_listener_name=LISTENER, leader_imbalance_check_interval_seconds=0.3,
                                  auto_leader_rebalance_initial_delay_s=0.1)
        cluster = await ControllerRig(zk_connect, config).start([1, 2])
        try:
            controller = cluster.controller()
            preferred = next(b for b, n in cluster.nodes.items() if n.controller is not controller)
            other = 3 - preferred
            await _topic(cluster, "rb", {0: [preferred, other]})
            await controller.controlled_shutdown(preferred, -1)
            zk = _zk(cluster)
            moved = await _state(zk, ("rb", 0))
            assert (moved.leader, moved.isr) == (other, [other])
            # The broker stays (its shutdown was abandoned) and catches up: the leader re-adds it.
            controller.context.shutting_down_broker_ids.discard(preferred)
            epochs = {b: n.broker_epoch for b, n in cluster.nodes.items()}
            answer = await controller.alter_partition(_alter(other, epochs[other], controller.context.topic_ids["rb"], 0,
                                                             moved.leader_epoch, [other, preferred], moved.partition_epoch,
                                                             epochs))
            assert answer.topics[0].partitions[0].error_code == 0
            await wait_for(lambda: _leader_is(zk, ("rb", 0), preferred), timeout=10, what="preferred leader back")
            back = await _state(zk, ("rb", 0))
            assert back.isr == [other, preferred] and back.leader_epoch == moved.leader_epoch + 1
        finally:
            await cluster.stop()

    run(scenario())


def test_auto_leader_rebalance_disabled_leaves_leaders_alone(zk_connect: str) -> None:
    async def scenario() -> None:
        config = ControllerConfig(inter_broker_listener_name=LISTENER, auto_leader_rebalance_enable=False,
                                  leader_imbalance_check_interval_seconds=0.1, auto_leader_rebalance_initial_delay_s=0.1)
        cluster = await ControllerRig(zk_connect, config).start([1, 2])
        try:
            controller = cluster.controller()
            preferred = next(b for b, n in cluster.nodes.items() if n.controller is not controller)
            other = 3 - preferred
            await _topic(cluster, "rb", {0: [preferred, other]})
            await controller.controlled_shutdown(preferred, -1)
            controller.context.shutting_down_broker_ids.discard(preferred)
            zk = _zk(cluster)
            moved = await _state(zk, ("rb", 0))
            epochs = {b: n.broker_epoch for b, n in cluster.nodes.items()}
            await controller.alter_partition(_alter(other, epochs[other], controller.context.topic_ids["rb"], 0,
                                                    moved.leader_epoch, [other, preferred], moved.partition_epoch, epochs))
            await asyncio.sleep(1.0)
            assert (await _state(zk, ("rb", 0))).leader == other
            assert controller._rebalance_task is None
        finally:
            await cluster.stop()

    run(scenario())


def test_topic_deletion_waits_for_a_dead_replica_and_completes_when_it_returns(zk_connect: str) -> None:
    async def scenario() -> None:
        cluster = await ControllerRig(zk_connect).start([1, 2, 3])
        try:
            cid = next(b for b, n in cluster.nodes.items() if n.controller.is_active)
            a, b = [x for x in (1, 2, 3) if x != cid]
            await _topic(cluster, "later", {0: [a, b]})
            await cluster.nodes[b].stop()
            zk = _zk(cluster)
            await wait_for(lambda: _leader_is(zk, ("later", 0), a), what="a leads alone")
            await cluster.wait_idle()
            await AdminZkClient(zk).delete_topic("later")
            await wait_for(lambda: _deleted_at(cluster.nodes[a].fake) == {("later", 0)}, what="StopReplica(delete) to a")
            await cluster.wait_idle()
            assert "later" in await zk.get_all_topics()  # b's replica is not deleted yet
            assert "later" in cluster.controller().context.topics_ineligible_for_deletion
            returned = await cluster.add(b)
            await wait_for(lambda: _deleted_at(returned.fake) == {("later", 0)}, what="StopReplica(delete) to b")
            await wait_for(lambda: _topic_absent(zk, "later"), what="topic znodes removed")
            assert await zk.get_delete_topic_markers() == set()
            assert ("later", 0) not in _told(returned.fake)  # never told to host the dying topic
        finally:
            await cluster.stop()

    run(scenario())


def _deleted_at(fake: object) -> set[TP]:
    from tests.controller.fake_broker import FakeBroker

    assert isinstance(fake, FakeBroker)
    return {(t.topic_name, p.partition_index) for r in fake.of_type(StopReplicaRequest) if isinstance(r, StopReplicaRequest)
            for t in r.topic_states for p in t.partition_states if p.delete_partition}


def test_controller_resigns_when_another_broker_holds_controller_and_its_requests_are_refused(zk_connect: str) -> None:
    async def scenario() -> None:
        from kazoo.client import KazooClient

        from controller.zk.kafka_zk_client import split_connect

        cluster = await ControllerRig(zk_connect).start([1, 2])
        servers, chroot = split_connect(zk_connect)
        raw = KazooClient(hosts=servers)
        await asyncio.to_thread(raw.start, 10)
        try:
            await _topic(cluster, "mv", {0: [1, 2]})
            node = cluster.active()
            assert node is not None
            # Another broker (99) takes over: /controller names it and the epoch moves on.
            epoch = node.controller.epoch

            def take_over() -> None:
                tx = raw.transaction()
                tx.delete(f"{chroot}/controller")
                tx.create(f"{chroot}/controller", zd.encode_controller(99))
                tx.set_data(f"{chroot}/controller_epoch", zd.encode_controller_epoch(epoch + 1))
                results = tx.commit()
                assert not any(isinstance(r, Exception) for r in results), results

            await asyncio.to_thread(take_over)
            await wait_for(lambda: not node.controller.is_active, timeout=10, what="resignation")
            assert node.controller.active_controller_id == 99
            assert node.controller.context.partition_leadership_info == {}
            error, _ = await node.controller.controlled_shutdown(2, -1)
            assert error == ErrorCode.NOT_CONTROLLER
            assert (await node.controller.elect_leaders(ELECTION_PREFERRED, [("mv", 0)]))[("mv", 0)][0] == ErrorCode.NOT_CONTROLLER
            assert all(not n.controller.is_active for n in cluster.nodes.values())
        finally:
            await asyncio.to_thread(raw.stop)
            raw.close()
            await cluster.stop()

    run(scenario())
