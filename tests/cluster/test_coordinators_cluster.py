"""Coordinators in a three-broker cluster (issue 17): they move with their partitions.

A real ZooKeeper and three real broker processes (pytest_pafka/cluster.py). The
internal topics are created on first use with replication factor 3; every
broker names the same coordinator (the leader of the key's partition); a
consumer group and its committed offsets keep working when the coordinator's
broker is SIGKILLed or SIGTERMed (controlled shutdown); a transactional
producer keeps committing when the transaction coordinator's broker is
stopped either way, and a read_committed consumer
sees exactly the committed records of partitions led on every broker (the
markers reach leaders on other brokers).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.common.internal_topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from coordinator.common.partitioner import partition_for
from protocol.request_constants import CoordinatorType
from pytest_pafka import cluster as cluster_harness
from tests.cluster.helpers import agreed_coordinator, restart_after_session

Cluster = cluster_harness.Cluster

INTERNAL_PARTITIONS = 6
OVERRIDES = (f"offsets.topic.num.partitions={INTERNAL_PARTITIONS}",
             f"transaction.state.log.num.partitions={INTERNAL_PARTITIONS}",
             "group.initial.rebalance.delay.ms=0")
WAIT_S = 90.0

# The module's cluster (tests/cluster/conftest.py): three brokers with these settings.
pytestmark = [pytest.mark.slow, pytest.mark.pafka_broker_config(*OVERRIDES)]


@pytest.fixture(autouse=True)
def all_brokers_up(cluster: Cluster) -> None:
    """Each test starts with the three brokers registered (an earlier test restarts what it killed)."""
    cluster.wait_until_registered(cluster.broker_ids)


def _create_topic(cluster: Cluster, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 3, config=configs or {})], request_timeout=30)
    futures[name].result(60)
    cluster.wait_for_topic(name, partitions, timeout=WAIT_S)


def _leaders(cluster: Cluster, topic: str, partitions: int) -> set[int]:
    return {cluster.partition_state(topic, p)["leader"] for p in range(partitions)}  # type: ignore[index]


def test_internal_topics_have_three_replicas_and_every_broker_names_the_leader(cluster: Cluster) -> None:
    group, tid = "g-names", "tid-names"
    node = agreed_coordinator(cluster, group, CoordinatorType.GROUP)
    state = cluster.partition_state(GROUP_METADATA_TOPIC_NAME, partition_for(group, INTERNAL_PARTITIONS))
    assert state is not None and state["leader"] == node
    assignment = cluster.topic_assignment(GROUP_METADATA_TOPIC_NAME)
    assert len(assignment) == INTERNAL_PARTITIONS
    assert all(sorted(replicas) == [1, 2, 3] for replicas in assignment.values())
    configs = cluster.read_json(f"/config/topics/{GROUP_METADATA_TOPIC_NAME}")["config"]
    assert configs["cleanup.policy"] == "compact"

    txn_node = agreed_coordinator(cluster, tid, CoordinatorType.TRANSACTION)
    txn_state = cluster.partition_state(TRANSACTION_STATE_TOPIC_NAME, partition_for(tid, INTERNAL_PARTITIONS))
    assert txn_state is not None and txn_state["leader"] == txn_node
    assert all(sorted(r) == [1, 2, 3] for r in cluster.topic_assignment(TRANSACTION_STATE_TOPIC_NAME).values())
    txn_configs = cluster.read_json(f"/config/topics/{TRANSACTION_STATE_TOPIC_NAME}")["config"]
    assert (txn_configs["cleanup.policy"], txn_configs["min.insync.replicas"]) == ("compact", "2")


def _consume(consumer: Consumer, wanted: int, deadline_s: float) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of up to ``wanted`` records, within the deadline."""
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < wanted and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        got.append((message.partition(), message.offset(), message.value()))
    return got


def _group_consumer(cluster: Cluster, group: str, **extra: Any) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 10_000, **extra})


def _stop(cluster: Cluster, broker_id: int, how: str) -> None:
    """SIGKILL (a crash: leadership moves when its session expires) or SIGTERM (controlled shutdown)."""
    if how == "kill":
        cluster.kill(broker_id)
    else:
        assert cluster.terminate(broker_id) == 0


@pytest.mark.parametrize("how", ["kill", "terminate"])
def test_a_group_and_its_offsets_survive_the_coordinators_broker(cluster: Cluster, how: str) -> None:
    topic, group, total = f"grp-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}", 600
    _create_topic(cluster, topic, 6)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(total):
        producer.produce(topic, key=str(i).encode(), value=str(i).encode())
    assert producer.flush(60) == 0

    first = _group_consumer(cluster, group)
    first.subscribe([topic])
    try:
        before = _consume(first, total // 2, WAIT_S)
        assert len(before) == total // 2
        first.commit(asynchronous=False)
    finally:
        first.close()

    coordinator = agreed_coordinator(cluster, group, CoordinatorType.GROUP)
    _stop(cluster, coordinator, how)
    try:
        agreed_coordinator(cluster, group, CoordinatorType.GROUP, not_on=coordinator)
        second = _group_consumer(cluster, group)
        second.subscribe([topic])
        try:
            after = _consume(second, total - len(before), WAIT_S)
            second.commit(asynchronous=False)
            committed = second.committed([TopicPartition(topic, p) for p in range(6)], timeout=30)
        finally:
            second.close()
        values = [v for _p, _o, v in before + after]
        assert len(values) == total and set(values) == {str(i).encode() for i in range(total)}  # exactly once
        ends: dict[int, int] = {}
        for p, o, _v in before + after:
            ends[p] = max(ends.get(p, 0), o + 1)
        assert {tp.partition: tp.offset for tp in committed} == {p: ends.get(p, 0) for p in range(6)}
    finally:
        restart_after_session(cluster, coordinator)


def _run_transaction(producer: Producer, topic: str, values: list[bytes], commit: bool) -> bool:
    """One transaction; True if it committed. Retriable commit errors are retried (bounded);
    an abortable one aborts the transaction (its records are then not committed)."""
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, key=value, value=value)
    if not commit:
        producer.abort_transaction(60)
        return False
    for _ in range(20):
        try:
            producer.commit_transaction(60)
            return True
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                producer.abort_transaction(60)
                return False
            if not error.retriable():
                raise
            time.sleep(0.5)
    raise AssertionError("commit_transaction never succeeded")


def _read_committed(cluster: Cluster, topic: str, partitions: int, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"rc-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = [v for _p, _o, v in _consume(consumer, expected, WAIT_S)]
        got += [v for _p, _o, v in _consume(consumer, 1, 2.0)]  # anything beyond would show
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("how", ["kill", "terminate"])
def test_a_transactional_producer_survives_the_transaction_coordinators_broker(cluster: Cluster, how: str) -> None:
    topic, tid = f"txn-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    partitions = 6
    _create_topic(cluster, topic, partitions, {"min.insync.replicas": "2"})
    assert _leaders(cluster, topic, partitions) == {1, 2, 3}  # markers must reach every broker
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "acks": "all",
                         "transaction.timeout.ms": 60_000})
    producer.init_transactions(60)
    committed: list[bytes] = []
    batch = 0

    def run(commit: bool) -> None:
        nonlocal batch
        values = [f"{batch}-{i}".encode() for i in range(20)]
        batch += 1
        if _run_transaction(producer, topic, values, commit):
            committed.extend(values)

    for _ in range(4):
        run(True)
    run(False)
    assert len(committed) == 80

    coordinator = agreed_coordinator(cluster, tid, CoordinatorType.TRANSACTION)
    _stop(cluster, coordinator, how)
    try:
        for _ in range(4):
            run(True)
        run(False)
        run(True)
        assert len(committed) >= 80 + 20  # at most the transaction in flight at the kill may abort
        agreed_coordinator(cluster, tid, CoordinatorType.TRANSACTION, not_on=coordinator)
        got = _read_committed(cluster, topic, partitions, len(committed))
        assert sorted(got) == sorted(committed)  # every committed record once, nothing aborted
    finally:
        producer.flush(10)
        restart_after_session(cluster, coordinator)
