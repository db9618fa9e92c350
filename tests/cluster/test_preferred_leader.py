"""Preferred-leader election (issue 17): after a broker restarts, its partitions are led by others;
ElectLeaders (PREFERRED) through a real admin client gives each partition back to its first replica.
With auto.leader.rebalance.enable the controller does the same by itself after its check interval."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pytest_pafka.cluster import Cluster
from tests.cluster.helpers import (
    create_topic,
    isr_in_zookeeper,
    leaders_in_zookeeper,
    leaders_seen_by,
    unique,
)

PARTITIONS = 6


@pytest.fixture(scope="module")
def no_rebalance_cluster() -> Iterator[Cluster]:
    """Automatic rebalancing off: any return of leadership is the election the test asked for."""
    with Cluster(3, "auto.leader.rebalance.enable=false") as cluster:
        yield cluster
        print(cluster.log_tails())


def preferred(cluster: Cluster, topic: str) -> dict[int, int]:
    return {p: replicas[0] for p, replicas in cluster.topic_assignment(topic).items()}


def restart_and_lose_leadership(cluster: Cluster, topic: str, broker_id: int) -> list[int]:
    """Restart ``broker_id`` (controlled shutdown) and wait until it is back in every ISR; the
    partitions it prefers to lead, which it lost at shutdown."""
    mine = [p for p, leader in preferred(cluster, topic).items() if leader == broker_id]
    assert mine, "the broker is the preferred leader of some partitions"
    assert all(leaders_in_zookeeper(cluster, topic, PARTITIONS)[p] == broker_id for p in mine)
    assert cluster.terminate(broker_id) == 0
    leaders = leaders_in_zookeeper(cluster, topic, PARTITIONS)
    assert broker_id not in leaders.values(), f"leadership left {broker_id} at shutdown: {leaders}"
    cluster.start(broker_id)
    cluster.wait_for(lambda: all(broker_id in isr_in_zookeeper(cluster, topic, p) for p in range(PARTITIONS)),
                     60.0, f"broker {broker_id} back in every ISR")
    return mine


def elect_with_confluent(cluster: Cluster, topic: str, partitions: list[int]) -> None:
    """ElectLeaders(PREFERRED) for every partition: ``partitions`` must be elected, the others need none."""
    from confluent_kafka import ElectionType, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    for tp, error in future.result(timeout=30).items():
        if tp.partition in partitions:
            assert error is None, (f"{tp}: {error}; leaders in ZooKeeper {leaders_in_zookeeper(cluster, topic, PARTITIONS)}, "
                                   f"preferred {preferred(cluster, topic)}, controller {cluster.controller_id()}")
        else:  # already led by its preferred replica
            assert error is None or error.code() == KafkaError.ELECTION_NOT_NEEDED, f"{tp}: {error}"


def elect_with_kafka_python(cluster: Cluster, topic: str, partitions: list[int]) -> None:
    """ElectLeaders(PREFERRED) for every partition through kafka-python's admin client."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.broker(2).bootstrap)
    try:
        # Raises on any partition error but ELECTION_NOT_NEEDED.
        admin.elect_leaders(0, {topic: list(range(PARTITIONS))}, timeout_ms=30_000)
    finally:
        admin.close()


@pytest.mark.parametrize("elect", [elect_with_confluent, elect_with_kafka_python],
                         ids=["confluent-kafka", "kafka-python"])
def test_elect_leaders_returns_leadership_after_restart(no_rebalance_cluster: Cluster,
                                                        elect: Callable[[Cluster, str, list[int]], None]) -> None:
    cluster = no_rebalance_cluster
    topic = unique("preferred")
    create_topic(cluster, topic, PARTITIONS, 3)
    mine = restart_and_lose_leadership(cluster, topic, 1)

    elect(cluster, topic, mine)  # the others are led by their preferred replica already
    want = preferred(cluster, topic)
    cluster.wait_for(lambda: leaders_in_zookeeper(cluster, topic, PARTITIONS) == want, 15.0,
                     "every partition led by its preferred replica")
    assert all(want[p] == 1 for p in mine)
    for broker_id in cluster.broker_ids:
        cluster.wait_for(lambda b=broker_id: leaders_seen_by(cluster.broker(b), topic) == want, 15.0,
                         f"broker {broker_id}'s Metadata shows the preferred leaders")


def test_auto_leader_rebalance_returns_leadership() -> None:
    with Cluster(3, "auto.leader.rebalance.enable=true", "leader.imbalance.check.interval.seconds=2",
                 "leader.imbalance.per.broker.percentage=0") as cluster:
        try:
            topic = unique("rebalance")
            create_topic(cluster, topic, PARTITIONS, 3)
            restart_and_lose_leadership(cluster, topic, 2)
            want = preferred(cluster, topic)
            cluster.wait_for(lambda: leaders_in_zookeeper(cluster, topic, PARTITIONS) == want, 30.0,
                             "the controller's rebalance gave every partition back to its preferred replica")
        except BaseException:
            print(cluster.log_tails())
            raise
