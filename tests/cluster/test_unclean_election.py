"""Unclean leader election on real brokers: off by default, a partition whose ISR is gone stays
offline until an ISR member returns; ElectLeaders UNCLEAN (confluent-kafka's AdminClient) lets an
out-of-sync replica lead. The records only the old leader had are lost, but the logs never
diverge: when the old leader comes back it truncates to the new leader's log (leader epochs)."""

from __future__ import annotations

import time

import pytest

from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import ClusterFactory
from tests.cluster.helpers import create_topic, isr_in_zookeeper, log_batches, log_end_offset, partition_dir, unique

A, B = 1, 2
WAIT_S = 60.0
NO_LEADER = -1


@pytest.fixture
def cluster(pafka_cluster_factory: ClusterFactory) -> Cluster:
    return pafka_cluster_factory("auto.leader.rebalance.enable=false", "controlled.shutdown.max.retries=1",
                                 "controlled.shutdown.retry.backoff.ms=200", brokers=2)


def _send(cluster: Cluster, topic: str, count: int, acks: str) -> None:
    from confluent_kafka import Producer

    errors: list[object] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_of(cluster.running_ids()), "acks": acks,
                         "message.timeout.ms": 30_000})
    for i in range(count):
        producer.produce(topic, partition=0, value=b"%d" % i,
                         on_delivery=lambda err, _m: errors.append(err) if err is not None else None)
    assert producer.flush(40) == 0 and not errors, errors


def _leader(cluster: Cluster, topic: str) -> int:
    return (cluster.partition_state(topic, 0) or {}).get("leader", NO_LEADER)


def _leo(cluster: Cluster, broker_id: int, topic: str) -> int:
    return log_end_offset(log_batches(partition_dir(cluster, broker_id, topic, 0)))


def _crcs(cluster: Cluster, broker_id: int, topic: str) -> list[int]:
    return [b.crc for b in log_batches(partition_dir(cluster, broker_id, topic, 0))]


def _only_broker_1_has_the_tail(cluster: Cluster) -> str:
    """Five records on both replicas, then broker 2 stops, broker 1 takes three more alone (acks=1)
    and dies. Broker 2 is started again: out of sync, the only live replica."""
    topic = unique("unclean")
    create_topic(cluster, topic, 1, 2, assignment=[[A, B]])
    _send(cluster, topic, 5, acks="all")
    cluster.terminate(B)
    cluster.wait_for(lambda: isr_in_zookeeper(cluster, topic, 0) == [A], WAIT_S, "broker 2 out of the ISR")
    _send(cluster, topic, 3, acks="1")
    cluster.kill(A)
    cluster.start(B)
    cluster.wait_until_serving([B])
    cluster.wait_for(lambda: cluster.controller_id() == B, WAIT_S, "broker 2 to be the controller")
    # /controller names broker 2 before its failover has run (as in Kafka): wait until the new
    # controller has written the partition's state, finding its only ISR member dead.
    cluster.wait_for(lambda: _state_written_by_the_controller(cluster, topic), WAIT_S,
                     "the new controller to take the partition offline")
    return topic


def _state_written_by_the_controller(cluster: Cluster, topic: str) -> bool:
    state = cluster.partition_state(topic, 0) or {}
    return state.get("controller_epoch") == cluster.controller_epoch()


def test_without_unclean_election_the_partition_waits_for_an_isr_member(cluster: Cluster) -> None:
    topic = _only_broker_1_has_the_tail(cluster)
    # Offline: broker 2 is alive but not in the ISR, so it must not lead.
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        assert _leader(cluster, topic) == NO_LEADER
        time.sleep(0.2)
    # The ISR member returns and leads; nothing it acknowledged is lost, broker 2 catches up.
    cluster.start(A)
    cluster.wait_for(lambda: _leader(cluster, topic) == A, WAIT_S, "broker 1 to lead")
    cluster.wait_for(lambda: _leo(cluster, B, topic) == 8 and _crcs(cluster, A, topic) == _crcs(cluster, B, topic),
                     WAIT_S, "broker 2 to catch up")


def test_elect_leaders_unclean_loses_the_tail_but_never_diverges(cluster: Cluster) -> None:
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as Tp
    from confluent_kafka.admin import AdminClient

    topic = _only_broker_1_has_the_tail(cluster)
    assert _leader(cluster, topic) == NO_LEADER
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of([B])})
    result = admin.elect_leaders(ElectionType.UNCLEAN, [Tp(topic, 0)]).result(timeout=30)
    assert {(tp.topic, tp.partition): err for tp, err in result.items()} == {(topic, 0): None}
    assert _leader(cluster, topic) == B and _leo(cluster, B, topic) == 5
    # The new leader's records take the offsets the old one's tail had.
    _send(cluster, topic, 2, acks="1")
    cluster.start(A)
    cluster.wait_for(lambda: sorted(isr_in_zookeeper(cluster, topic, 0)) == [A, B], WAIT_S, "broker 1 in the ISR")
    cluster.wait_for(lambda: _crcs(cluster, A, topic) == _crcs(cluster, B, topic), WAIT_S, "the logs to agree")
    assert _leo(cluster, A, topic) == _leo(cluster, B, topic) == 7
