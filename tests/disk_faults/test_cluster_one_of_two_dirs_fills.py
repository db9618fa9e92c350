"""Three brokers, RF 3, min.insync.replicas=2; broker 1 has two log dirs, the second a small tmpfs
that fills. Broker 1 stays up: it tells the controller (/log_dir_event_notification), which takes
the replicas in the failed dir offline: the partitions they led elect elsewhere, the ISR loses them,
while broker 1's replicas in its other dir stay in the ISR. Every record is acknowledged and read
back once, in order."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import ClusterFactory
from testing.disk_faults import can_mount, tmpfs
from tests.cluster.helpers import create_topic, unique

pytestmark = [pytest.mark.process, pytest.mark.skipif(not can_mount(), reason="mounting a tmpfs needs root")]

FAILING = 1
PARTITIONS = 4
PER_PARTITION = 400
VALUE = 16 * 1024  # 6.4 MB a partition: the two in the 8 MB dir do not fit


@pytest.fixture
def small_dir(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "broker-1-small", 8) as path:
        yield path


def _produce_all(cluster: Cluster, topic: str) -> dict[int, list[int]]:
    acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    failed: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed.append(err)
        else:
            acked[msg.partition()].append(int(msg.key()))  # type: ignore[arg-type]

    producer = Producer({**cluster.client_config(), "enable.idempotence": True, "acks": "all", "linger.ms": 20,
                         "message.timeout.ms": 120_000})
    for n in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.produce(topic, key=str(n).encode(), value=os.urandom(VALUE), partition=p, on_delivery=report)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert failed == [], failed[:5]
    return acked


def _read(cluster: Cluster, topic: str, partition: int) -> list[int]:
    consumer = Consumer({**cluster.client_config(), "group.id": unique("check"), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        keys: list[int] = []
        while len(keys) < PER_PARTITION:
            msg = consumer.poll(10)
            assert msg is not None, f"partition {partition}: read {len(keys)}"
            assert msg.error() is None, msg.error()
            keys.append(int(msg.key()))  # type: ignore[arg-type]
        return keys
    finally:
        consumer.close()


def test_the_controller_takes_the_failed_dirs_replicas_offline(small_dir: Path, tmp_path: Path,
                                                               pafka_cluster_factory: ClusterFactory) -> None:
    big_dir = tmp_path / "broker-1-big"
    cluster = pafka_cluster_factory("min.insync.replicas=2", "log.segment.bytes=4194304",
                                    "auto.leader.rebalance.enable=false",
                                    broker_overrides={FAILING: [f"log.dirs={big_dir},{small_dir}"]})
    topic = unique("one-dir")
    create_topic(cluster, topic, PARTITIONS, 3)
    in_small = {int(d.name.rsplit("-", 1)[1]) for d in small_dir.iterdir() if d.name.startswith(topic)}
    assert len(in_small) == 2

    acked = _produce_all(cluster, topic)

    broker1 = cluster.broker(FAILING)
    assert broker1.running  # one dir is left: the broker goes on

    def isr(p: int) -> list[int]:
        state = cluster.partition_state(topic, p)
        assert state is not None
        return sorted(state["isr"])

    cluster.wait_for(lambda: all(FAILING not in isr(p) for p in in_small), 30, "the failed dir's replicas out")
    for p in range(PARTITIONS):
        state = cluster.partition_state(topic, p)
        assert state is not None
        if p in in_small:
            assert state["leader"] != FAILING and isr(p) == [2, 3], state
        else:
            assert FAILING in isr(p), state
        assert acked[p] == list(range(PER_PARTITION))
        assert _read(cluster, topic, p) == list(range(PER_PARTITION))
    logs = "".join(cluster.broker(b).log_text() for b in cluster.broker_ids)
    assert "log dir failure on brokers [1]" in logs and "replicas in failed log dirs of broker 1" in logs
    text = broker1.log_text()
    assert text.count(f"Log directory {small_dir} is offline") == 1 and "Traceback" not in text, text[-3000:]
