"""Three brokers, RF 3, min.insync.replicas=2; broker 1's only log dir is a FUSE passthrough the
test switches to answer EIO while an idempotent acks=all producer writes. Broker 1's directory
goes offline on the first EIO and, with none left, broker 1 halts: within 5 s the partitions it
led have leaders elsewhere. Nothing acknowledged is lost; with the fault lifted and broker 1
started again, it rejoins every ISR."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from pytest_pafka.cluster import Cluster
from pytest_pafka.plugin import ClusterFactory
from testing.disk_faults import can_mount
from testing.eio_fs import eio_mount, fuse_available
from tests.cluster.helpers import create_topic, unique

pytestmark = [pytest.mark.process,
              pytest.mark.skipif(not can_mount() or not fuse_available(), reason="needs root, mfusepy and FUSE")]

FAILING = 1
PARTITIONS = 3
MOVE_WITHIN_S = 5.0


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(broker 1's log dir, the switch that makes it answer EIO)."""
    switch = tmp_path / "eio-on"
    with eio_mount(tmp_path / "backing", tmp_path / "disk", switch) as mountpoint:
        yield mountpoint, switch


class SteadyProducer:
    """Numbered records to every partition from a thread, until stopped; what was acknowledged."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.topic = topic
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[KafkaError] = []
        self.sent = 0
        self._stop = threading.Event()
        self._producer = Producer({**cluster.client_config(), "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 5, "message.timeout.ms": 120_000})
        self._thread = threading.Thread(target=self._run, name="steady-producer")

    def _report(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed.append(err)
        else:
            self.acked[msg.partition()].append(int(msg.key()))  # type: ignore[arg-type]

    def _run(self) -> None:
        while not self._stop.is_set():
            for p in range(PARTITIONS):
                self._producer.produce(self.topic, key=str(self.sent).encode(), value=os.urandom(1024),
                                       partition=p, on_delivery=self._report)
            self.sent += 1
            self._producer.poll(0.002)
        self._producer.flush(120)

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(150)


def _read(cluster: Cluster, topic: str, partition: int, count: int) -> list[int]:
    consumer = Consumer({**cluster.client_config(), "group.id": unique("check"), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        keys: list[int] = []
        while len(keys) < count:
            msg = consumer.poll(10)
            assert msg is not None, f"partition {partition}: read {len(keys)} of {count}"
            assert msg.error() is None, msg.error()
            keys.append(int(msg.key()))  # type: ignore[arg-type]
        return keys
    finally:
        consumer.close()


def test_eio_moves_leadership_within_5_s_and_the_broker_rejoins(disk: tuple[Path, Path],
                                                                 pafka_cluster_factory: ClusterFactory) -> None:
    log_dir, switch = disk
    cluster = pafka_cluster_factory("min.insync.replicas=2", "auto.leader.rebalance.enable=false",
                                    broker_overrides={FAILING: [f"log.dirs={log_dir}"]})
    topic = unique("eio")
    create_topic(cluster, topic, PARTITIONS, 3)

    def state(p: int) -> dict[str, object]:
        found = cluster.partition_state(topic, p)
        assert found is not None
        return found

    led = [p for p in range(PARTITIONS) if state(p)["leader"] == FAILING]
    assert led
    with SteadyProducer(cluster, topic) as producer:
        time.sleep(2)
        switch.touch()
        failed_at = time.monotonic()
        cluster.wait_for(lambda: all(state(p)["leader"] != FAILING for p in led), MOVE_WITHIN_S,
                         "leadership off broker 1")
        moved_s = time.monotonic() - failed_at
        time.sleep(2)
    print(f"leadership moved {moved_s:.2f} s after the disk started answering EIO")
    assert producer.failed == [], producer.failed[:5]
    for p in range(PARTITIONS):
        assert producer.acked[p] == list(range(producer.sent))
        assert FAILING not in state(p)["isr"]  # type: ignore[operator]
        assert _read(cluster, topic, p, producer.sent) == list(range(producer.sent))
    broker1 = cluster.broker(FAILING)
    cluster.wait_for(lambda: not broker1.running, 30, "broker 1 halted")
    text = broker1.log_text()
    assert text.count(f"Log directory {log_dir} is offline") == 1 and "Traceback" not in text, text[-3000:]

    switch.unlink()
    cluster.start(FAILING)
    cluster.wait_for(lambda: all(FAILING in state(p)["isr"] for p in range(PARTITIONS)), 60,  # type: ignore[operator]
                     "broker 1 back in every ISR")
