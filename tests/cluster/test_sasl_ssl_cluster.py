"""A three-broker cluster with SASL_SSL everywhere (issue 19): the replication and group scenarios of
issue 17 run with every connection authenticated over TLS.

Each broker has one listener, SASL_SSL, which is also the inter-broker listener: the controller's
LeaderAndIsr/UpdateMetadata, the followers' fetches, AlterPartition, ControlledShutdown and the
coordinators' requests all authenticate as the SCRAM-SHA-512 user ``broker``; every client (confluent-kafka
and pafka's own) authenticates as ``client`` (``Cluster(security="SASL_SSL")``). On it:

1. RF 3, min.insync.replicas=2, acks=all: the replicas hold identical batches; a follower SIGKILLed
   leaves the ISR and produce goes on; a second one too: NOT_ENOUGH_REPLICAS; both restarted, they
   catch up and rejoin; the leader SIGKILLed, a new leader from the ISR serves every acknowledged
   record (replication_scenarios.py, as test_replication runs them on PLAINTEXT).
2. A consumer group of several members commits offsets; the broker of its coordinator is SIGKILLed;
   new members of the group (RF 3 ``__consumer_offsets``) go on from the committed offsets, every
   record consumed once.
3. SIGTERM (controlled shutdown) moves every leadership of the stopping broker first: no partition is
   offline at any sampled moment, and a producer running through it loses nothing
   (shutdown_scenario.py, as test_controlled_shutdown runs it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from coordinator.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from protocol.request_constants import CoordinatorType
from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import ClusterFactory
from tests.cluster.helpers import (
    COORDINATOR_TIMEOUT_S,
    agreed_coordinator,
    assert_exactly_once,
    create_topic,
    produce_confluent,
    restart_after_session,
    unique,
)
from tests.cluster.replication_scenarios import acks_all_replicas_hold_identical_logs, follower_and_leader_failures
from tests.cluster.shutdown_scenario import run_controlled_shutdown

#: Many batches per partition and many fetches per follower, and quick (PLAINTEXT's test writes 200,000).
RECORDS = 50_000
GROUP_PARTITIONS = 6
GROUP_MEMBERS = 3
GROUP_RECORDS = 3000
INTERNAL_PARTITIONS = 6
# group.initial.rebalance.delay.ms stays at Kafka's 3 s: the members that subscribe together join
# the group's first generation together and share the partitions from the start.


@pytest.fixture(scope="module")
def cluster(pafka_module_cluster_factory: ClusterFactory) -> Cluster:
    c = pafka_module_cluster_factory(f"offsets.topic.num.partitions={INTERNAL_PARTITIONS}",
                                     f"transaction.state.log.num.partitions={INTERNAL_PARTITIONS}", security="SASL_SSL")
    # __consumer_offsets now, while all three brokers are up: the first consumer's FindCoordinator
    # creates it, and pafka gives an internal topic fewer replicas when fewer brokers are registered.
    agreed_coordinator(c, "sasl-ssl-warm-up", CoordinatorType.GROUP)
    return c


@pytest.fixture(autouse=True)
def all_brokers_up(cluster: Cluster) -> Iterator[None]:
    """Each test starts with the three brokers registered; none authenticated wrongly or crashed."""
    cluster.wait_until_registered(cluster.broker_ids)
    yield
    logs = cluster.log_tails(1_000_000)
    suspicious = [line for line in logs.splitlines() if "Failed authentication" in line or "Traceback" in line]
    assert not suspicious, "\n".join(suspicious[:20])


def test_every_connection_is_sasl_ssl(cluster: Cluster) -> None:
    """The brokers registered SASL_SSL endpoints only, and a PLAINTEXT client gets no answer."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    for broker_id in cluster.broker_ids:
        registration = cluster.read_json(f"/brokers/ids/{broker_id}")
        assert registration["endpoints"] == [f"SASL_SSL://{cluster.broker(broker_id).bootstrap}"], registration
        assert registration["listener_security_protocol_map"] == {"SASL_SSL": "SASL_SSL"}
    plain = AdminClient({"bootstrap.servers": cluster.bootstrap})
    with pytest.raises(KafkaException):
        plain.list_topics(timeout=3)


def test_acks_all_replicas_hold_identical_logs(cluster: Cluster) -> None:
    acks_all_replicas_hold_identical_logs(cluster, RECORDS)


def test_follower_and_leader_failures(cluster: Cluster) -> None:
    follower_and_leader_failures(cluster)


# -- a consumer group through the loss of its coordinator -------------------------------------

class GroupMembers:
    """Several confluent-kafka members of one group, polled in turn from this thread. A member commits
    synchronously when its partitions are revoked, so a rebalance hands them over without a replay:
    each record is consumed once."""

    def __init__(self, cluster: Cluster, group: str, topic: str, count: int) -> None:
        from confluent_kafka import Consumer

        self.consumers = [Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False,
                                    "auto.offset.reset": "earliest", "session.timeout.ms": 10_000})
                          for _ in range(count)]
        self.records: list[tuple[int, int, bytes]] = []
        for consumer in self.consumers:
            consumer.subscribe([topic], on_revoke=self._commit_on_revoke)

    @staticmethod
    def _commit_on_revoke(consumer: Any, partitions: list[Any]) -> None:
        if partitions:
            _commit(consumer)

    def consume(self, wanted: int, timeout: float = COORDINATOR_TIMEOUT_S) -> None:
        """Poll every member in turn until ``wanted`` more records arrived (bounded). Never more: a
        member is asked for at most what is still missing, so the positions it commits are exact."""
        target = len(self.records) + wanted
        deadline = time.monotonic() + timeout
        while len(self.records) < target and time.monotonic() < deadline:
            for consumer in self.consumers:
                missing = target - len(self.records)
                if missing == 0:
                    break
                self.records.extend((m.partition(), m.offset(), m.value())
                                    for m in consumer.consume(min(missing, 500), timeout=0.1) if m.error() is None)
        assert len(self.records) == target, f"{len(self.records)} of {target} records within {timeout}s"

    def members_with_partitions(self) -> int:
        return sum(1 for consumer in self.consumers if consumer.assignment())

    def commit_and_close(self) -> None:
        for consumer in self.consumers:
            if consumer.assignment():
                _commit(consumer)
        for consumer in self.consumers:
            consumer.close()


def _commit(consumer: Any) -> None:
    """Commit the member's positions; a member that consumed nothing yet has none to commit."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._NO_OFFSET:
            raise


def _committed(cluster: Cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in found}


def test_a_group_keeps_its_offsets_through_the_loss_of_its_coordinator(cluster: Cluster) -> None:
    topic, group = unique("sasl-ssl-group"), unique("sasl-ssl-members")
    create_topic(cluster, topic, GROUP_PARTITIONS, 3)
    outcome = produce_confluent(cluster.bootstrap, topic, range(GROUP_RECORDS), extra=cluster.confluent_security())
    assert not outcome.failed and len(outcome.acked) == GROUP_RECORDS
    assert all(sorted(r) == [1, 2, 3] for r in cluster.topic_assignment(GROUP_METADATA_TOPIC_NAME).values())

    first = GroupMembers(cluster, group, topic, GROUP_MEMBERS)
    try:
        first.consume(GROUP_RECORDS // 2)
        assert first.members_with_partitions() > 1, "the partitions were shared"
    finally:
        first.commit_and_close()

    coordinator = agreed_coordinator(cluster, group, CoordinatorType.GROUP)
    cluster.kill(coordinator)
    try:
        agreed_coordinator(cluster, group, CoordinatorType.GROUP, not_on=coordinator)
        second = GroupMembers(cluster, group, topic, GROUP_MEMBERS)
        try:
            second.consume(GROUP_RECORDS - len(first.records))
            assert second.members_with_partitions() > 1, "the partitions were shared"
        finally:
            second.commit_and_close()
        consumed = first.records + second.records
        assert_exactly_once(consumed, range(GROUP_RECORDS))
        ends = {p: 1 + max((o for part, o, _ in consumed if part == p), default=-1) for p in range(GROUP_PARTITIONS)}
        assert _committed(cluster, group, topic, GROUP_PARTITIONS) == ends
    finally:
        restart_after_session(cluster, coordinator)


# -- controlled shutdown over the SASL_SSL inter-broker path ----------------------------------------

@pytest.mark.parametrize("which", ["non-controller", "controller"])
def test_sigterm_moves_leaderships_over_sasl_ssl(cluster: Cluster, which: str) -> None:
    run_controlled_shutdown(cluster, which, extra=cluster.confluent_security())
