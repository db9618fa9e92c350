"""Three brokers, RF 3, min.insync.replicas=2; broker 1's only log dir is a 32 MB tmpfs the test
mounts. An idempotent acks=all producer writes more than fits. Broker 1's directory goes offline
when it fills; with no directory left broker 1 halts, as Kafka's does, and leadership moves to the
other brokers, the ISR shrinks. Every record is acknowledged within the run (the producer sees only
retriable errors) and read back once, in order.

The size is the scenario's parameter: CI writes 3 x 800 records of 16 kB (39 MB); the issue's full
case, 60,000 records of 1,000 bytes (60 MB), is the same test with the size in the environment:

    PAFKA_DIR_FILLS_RECORDS=60000 PAFKA_DIR_FILLS_VALUE_BYTES=1000 \
        .venv/bin/python -m pytest -q -s tests/disk_faults/test_cluster_dir_fills.py

(its outcome: docs/chaos.md, *A full disk under a producer*). With ``-s`` the test prints what it saw.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import ClusterFactory
from testing.disk_faults import can_mount, tmpfs
from tests.cluster.helpers import create_topic, unique

pytestmark = [pytest.mark.process, pytest.mark.skipif(not can_mount(), reason="mounting a tmpfs needs root")]

FAILING = 1
PARTITIONS = 3
#: What a producer may see from the brokers while one of them halts: all retriable.
TRANSIENT = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT_QUEUE}


@dataclass(frozen=True)
class Size:
    """How much the producer writes: ``records`` over the partitions, ``value_bytes`` each; more
    than broker 1's 32 MB either way."""

    records: int = PARTITIONS * 800
    value_bytes: int = 16 * 1024

    @property
    def per_partition(self) -> int:
        return self.records // PARTITIONS

    @classmethod
    def from_environment(cls) -> Size:
        return cls(int(os.environ.get("PAFKA_DIR_FILLS_RECORDS") or cls.records),
                   int(os.environ.get("PAFKA_DIR_FILLS_VALUE_BYTES") or cls.value_bytes))


@pytest.fixture
def broker1_dir(tmp_path: Path) -> Iterator[Path]:
    # Requested before the cluster: unmounted after the cluster is gone (or lazily, if not).
    with tmpfs(tmp_path / "broker-1-disk", 32) as path:
        yield path


def _produce_all(cluster: Cluster, topic: str, size: Size) -> tuple[dict[int, list[int]], list[KafkaError]]:
    acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    failed: list[KafkaError] = []
    client_errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed.append(err)
        else:
            acked[msg.partition()].append(int(msg.key()))  # type: ignore[arg-type]

    producer = Producer({**cluster.client_config(), "enable.idempotence": True, "acks": "all", "linger.ms": 20,
                         "message.timeout.ms": 240_000, "error_cb": client_errors.append})
    for n in range(size.per_partition):
        for p in range(PARTITIONS):
            _produce_one(producer, topic, p, str(n).encode(), os.urandom(size.value_bytes), report)
    assert producer.flush(240) == 0
    assert failed == [], failed[:5]
    return acked, client_errors


def _produce_one(producer: Producer, topic: str, partition: int, key: bytes, value: bytes,
                 report: Callable[[KafkaError | None, Message], None]) -> None:
    """Produce, waiting for room when the producer's queue is full (the larger sizes fill it)."""
    while True:
        try:
            producer.produce(topic, key=key, value=value, partition=partition, on_delivery=report)
            producer.poll(0)
            return
        except BufferError:
            producer.poll(0.1)


def _read(cluster: Cluster, topic: str, partition: int, count: int) -> list[int]:
    consumer = Consumer({**cluster.client_config(), "group.id": unique("check"), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        keys: list[int] = []
        while len(keys) < count:
            msg = consumer.poll(10)
            assert msg is not None, f"partition {partition}: read {len(keys)}"
            assert msg.error() is None, msg.error()
            keys.append(int(msg.key()))  # type: ignore[arg-type]
        assert consumer.poll(1) is None
        return keys
    finally:
        consumer.close()


def test_a_full_disk_moves_leadership_off_its_broker(broker1_dir: Path, pafka_cluster_factory: ClusterFactory
                                                      ) -> None:
    cluster = pafka_cluster_factory("min.insync.replicas=2", "log.segment.bytes=4194304",
                                    "auto.leader.rebalance.enable=false",
                                    broker_overrides={FAILING: [f"log.dirs={broker1_dir}"]})
    topic = unique("full-disk")
    create_topic(cluster, topic, PARTITIONS, 3)
    assert any(cluster.partition_state(topic, p)["leader"] == FAILING for p in range(PARTITIONS))  # type: ignore[index]

    size = Size.from_environment()
    started = time.monotonic()
    acked, client_errors = _produce_all(cluster, topic, size)
    acked_s = time.monotonic() - started

    assert all(e.retriable() or e.code() in TRANSIENT for e in client_errors), client_errors
    assert all(not e.fatal() for e in client_errors)
    broker1 = cluster.broker(FAILING)
    cluster.wait_for(lambda: not broker1.running, 30, "broker 1 halted")
    text = broker1.log_text()
    assert "all log dirs" in text and text.count(f"Log directory {broker1_dir} is offline") == 1, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    for p in range(PARTITIONS):
        state = cluster.partition_state(topic, p)
        assert state is not None and state["leader"] != FAILING and FAILING not in state["isr"], state
        assert sorted(state["isr"]) == [2, 3]
        assert acked[p] == list(range(size.per_partition))
        assert _read(cluster, topic, p, size.per_partition) == list(range(size.per_partition))
    print(f"{size.records} records of {size.value_bytes} bytes: all acknowledged in {acked_s:.1f} s and read back "
          f"once, in order; the producer saw {dict(Counter(e.name() for e in client_errors)) or 'no errors'}; "
          f"broker 1 halted, every ISR {[cluster.partition_state(topic, p)['isr'] for p in range(PARTITIONS)]}")  # type: ignore[index]
