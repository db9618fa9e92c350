"""Controller failover and fencing (issue 17): the controller SIGKILLed, another takes over within
zookeeper.session.timeout.ms + 2 s; a controller paused past its session expiry and resumed changes
nothing: ZooKeeper writes and its requests to brokers are refused by the controller epoch."""

from __future__ import annotations

import json
import time

from client.connection import BrokerConnection
from client.errors import NoCompatibleVersionError
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrTopicState
from protocol.messages.stop_replica import StopReplicaPartitionState, StopReplicaRequest, StopReplicaTopicState
from pytest_pafka.cluster import Cluster
from tests.cluster.helpers import (
    assert_exactly_once,
    broker_metadata,
    consume_confluent,
    create_topic,
    isr_in_zookeeper,
    leaders_in_zookeeper,
    produce_confluent,
    unique,
)

#: Issue 17: a new controller within the session timeout + 2 s (the tests' session timeout is 6,000 ms).
FAILOVER_BUDGET_S = 6.0 + 2.0


def restore(cluster: Cluster) -> None:
    """Every broker running and registered again, for the module's next test."""
    for broker_id in cluster.broker_ids:
        if not cluster.broker(broker_id).running:
            cluster.start(broker_id, wait_registered=False)
    cluster.wait_until_registered(cluster.broker_ids, timeout=60.0)
    # Registered in ZooKeeper is not yet known to the controller: wait until every broker's Metadata
    # (fed by the controller's UpdateMetadata) names all of them, or the next CreateTopics may see two.
    cluster.wait_until_serving(cluster.broker_ids, timeout=60.0)


def test_sigkill_controller_new_controller_within_session_timeout(cluster: Cluster) -> None:
    old = cluster.controller_id()
    assert old is not None
    old_epoch = cluster.controller_epoch()
    assert old_epoch is not None
    try:
        killed_at = time.monotonic()
        cluster.kill(old)
        new = cluster.wait_for(lambda: (c := cluster.controller_id()) is not None and c != old and c,
                                FAILOVER_BUDGET_S + 5.0, "a new controller", interval=0.02)
        elapsed = time.monotonic() - killed_at
        assert elapsed <= FAILOVER_BUDGET_S, f"new controller {new} after {elapsed:.2f}s"
        new_epoch = cluster.controller_epoch()
        assert new_epoch is not None and new_epoch > old_epoch

        # Topic creation works again, through the survivors only.
        survivors = [b for b in cluster.broker_ids if b != old]
        bootstrap = cluster.bootstrap_of(survivors)
        topic = unique("after-failover")
        create_topic(cluster, topic, 4, 2, bootstrap=bootstrap)
        assignment = cluster.topic_assignment(topic)
        assert all(old not in replicas for replicas in assignment.values()), "a dead broker gets no replicas"
        for broker_id in survivors:
            metadata = broker_metadata(cluster.broker(broker_id), [topic])
            assert metadata.controller_id == new
            assert set(metadata.brokers) == set(survivors)
        outcome = produce_confluent(bootstrap, topic, range(1000))
        assert not outcome.failed, sorted(outcome.failed.items())[:5]
        assert_exactly_once(consume_confluent(bootstrap, topic, 4, 1000), range(1000))
    finally:
        restore(cluster)


def inter_broker_version(conn: BrokerConnection, api_key: int, fallback: int) -> int:
    """The version the broker advertises for a controller-to-broker API, else one Kafka 3.9's controller sends."""
    try:
        return conn.version_for(api_key)
    except NoCompatibleVersionError:
        return fallback


def stale_leader_and_isr(controller_id: int, controller_epoch: int, topic: str, partition: int, leader: int,
                         leader_epoch: int, replicas: list[int]) -> LeaderAndIsrRequest:
    state = LeaderAndIsrPartitionState(
        topic_name=topic, partition_index=partition, controller_epoch=controller_epoch, leader=leader,
        leader_epoch=leader_epoch, isr=list(replicas), partition_epoch=leader_epoch, replicas=list(replicas),
        adding_replicas=[], removing_replicas=[], is_new=False, leader_recovery_state=0)
    return LeaderAndIsrRequest(controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=-1,
                               topic_states=[LeaderAndIsrTopicState(topic_name=topic, partition_states=[state])])


def stale_stop_replica(controller_id: int, controller_epoch: int, topic: str, partition: int) -> StopReplicaRequest:
    state = StopReplicaPartitionState(partition_index=partition, leader_epoch=-2, delete_partition=True)
    return StopReplicaRequest(controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=-1,
                              topic_states=[StopReplicaTopicState(topic_name=topic, partition_states=[state])])


def test_paused_controller_resumed_after_session_expiry_is_fenced(cluster: Cluster) -> None:
    topic = unique("fenced")
    partitions = 6
    create_topic(cluster, topic, partitions, 3)
    first = produce_confluent(cluster.bootstrap, topic, range(2000))
    assert not first.failed

    old = cluster.controller_id()
    old_epoch = cluster.controller_epoch()
    assert old is not None and old_epoch is not None
    try:
        cluster.pause(old)
        new = cluster.wait_for(lambda: (c := cluster.controller_id()) is not None and c != old and c,
                                FAILOVER_BUDGET_S + 5.0, "a controller other than the paused one")
        new_epoch = cluster.controller_epoch()
        assert new_epoch is not None and new_epoch > old_epoch
        # The new controller treats the paused broker as dead: its leaderships move.
        cluster.wait_for(lambda: old not in leaders_in_zookeeper(cluster, topic, partitions).values()
                          and old not in cluster.registered_ids(), 30.0, "the paused broker's leaderships moved")
        snapshot = {p: cluster.kazoo.get(f"/brokers/topics/{topic}/partitions/{p}/state")[1].version
                    for p in range(partitions)}

        cluster.resume(old)
        # For a while after it wakes, the deposed controller changes nothing in ZooKeeper: the controller
        # stays, its epoch never goes back, and no partition state is written with the old epoch.
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            assert cluster.controller_id() == new
            epoch_now = cluster.controller_epoch()
            assert epoch_now is not None and epoch_now >= new_epoch
            for p in range(partitions):
                data, stat = cluster.kazoo.get(f"/brokers/topics/{topic}/partitions/{p}/state")
                if stat.version != snapshot[p]:
                    assert json.loads(data)["controller_epoch"] >= new_epoch, (p, data)
            time.sleep(0.1)
        assert cluster.controller_id() == new, "the resumed broker did not take the controller back"
        # It rejoins as an ordinary broker with a new session.
        cluster.wait_until_registered([old], timeout=30.0)
        # ... and is taken back into every ISR (AlterPartition writes the state), so that the states
        # read next change only if a stale request changes them.
        cluster.wait_for(lambda: all(old in isr_in_zookeeper(cluster, topic, p) for p in range(partitions)),
                          30.0, "the resumed broker back in every ISR")

        # Its requests, sent with its old epoch, are refused by every broker, and change nothing.
        assignment = cluster.topic_assignment(topic)
        states = {p: cluster.partition_state(topic, p) for p in range(partitions)}
        for broker_id in cluster.broker_ids:
            with BrokerConnection(cluster.broker(broker_id).host, cluster.broker(broker_id).port) as conn:
                partition = next(p for p in range(partitions) if broker_id in assignment[p])
                state = states[partition]
                assert state is not None
                other = next(r for r in assignment[partition] if r != state["leader"])
                response = conn.request(stale_leader_and_isr(old, old_epoch, topic, partition, other,
                                                             state["leader_epoch"] + 10, assignment[partition]),
                                        version=inter_broker_version(conn, LeaderAndIsrRequest.API_KEY, 6))
                assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH, response
                response = conn.request(stale_stop_replica(old, old_epoch, topic, partition),
                                        version=inter_broker_version(conn, StopReplicaRequest.API_KEY, 3))
                assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH, response
        assert {p: cluster.partition_state(topic, p) for p in range(partitions)} == states
        # Nothing was deleted or moved: every record is still there, and the topic takes more.
        more = produce_confluent(cluster.bootstrap, topic, range(2000, 3000))
        assert not more.failed
        assert_exactly_once(consume_confluent(cluster.bootstrap, topic, partitions, 3000), range(3000))
        # Topic creation still works with the new controller.
        create_topic(cluster, unique("after-fencing"), 3, 3)
    finally:
        if old in cluster.paused_ids:
            cluster.resume(old)
        restore(cluster)
