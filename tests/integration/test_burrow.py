"""Burrow 1.2.1 (Debian's ``burrow``), the consumer-lag monitor operators run beside Kafka, against pafka.

Burrow is built on sarama 1.22. It finds topics through Metadata, reads each partition's end with
ListOffsets, and learns every group's committed offsets by consuming ``__consumer_offsets`` from
the start and decoding Kafka's offset-commit records itself, so it reads pafka's internal topic as
it reads Kafka's. With Debian's sample setting ``kafka-version="0.10.0"`` it asks with ListOffsets v0
and Fetch v2, so the offsets topic's batches reach it down-converted to message format v1; with
``2.0.0``, ListOffsets v1 and Fetch v4 with v2 batches. It needs a ZooKeeper for its own lock (a
plain process here) and serves what it found over HTTP; the test reads the lag it reports for two
groups.

Burrow 1.2.1 cannot decode group metadata records of value version 3, which Kafka writes since 2.3
(pafka too): it logs "failed to decode" for those and leaves a partition's owner empty, as it does
against Kafka 3.9. Lag does not depend on them.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port
from pytest_pafka.waiting import wait_until
from pytest_pafka.zookeeper import ZooKeeperProcess
from testing.topics import create_topic

BURROW = "/usr/bin/Burrow"
TOPIC = "orders"
PARTITIONS = 3
PER_PARTITION = 100
#: The "billing" group's commits: partition -> offset (lag 0, 40 and 100).
BILLING = {0: 100, 1: 60, 2: 0}


@pytest.fixture(scope="module")
def broker_with_groups() -> Iterator[BrokerProcess]:
    """A broker whose topic has two groups: "billing" (offsets committed by hand, behind on two
    partitions) and "live" (a subscribed member that read everything and committed it)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    with BrokerProcess() as broker:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(PARTITIONS * PER_PARTITION):
            producer.produce(TOPIC, value=str(i).encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        billing = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "billing"})
        billing.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in BILLING.items()], asynchronous=False)
        billing.close()
        live = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "live", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
        live.subscribe([TOPIC])
        read = 0
        deadline = time.monotonic() + 60
        while read < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            message = live.poll(0.5)
            read += message is not None and message.error() is None
        assert read == PARTITIONS * PER_PARTITION
        live.commit(asynchronous=False)
        live.close()
        yield broker
        print(broker.log_text()[-4000:])  # shown only when a test failed


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[str]:
    """A ZooKeeper for Burrow's lock, serving sessions (Burrow gives up at once if its first
    connection is refused, and ZooKeeper answers ruok a moment before it takes sessions)."""
    from kazoo.client import KazooClient

    if not Path(BURROW).exists():
        pytest.fail("needs Debian's burrow package (see the README's test command)")
    with ZooKeeperProcess() as process:
        client = KazooClient(hosts=process.connect_string)
        client.start(timeout=30)
        client.ensure_path("/burrow")
        client.stop()
        client.close()
        yield process.connect_string


class Burrow:
    """One Burrow process with its config, log and HTTP port in ``workdir``."""

    def __init__(self, workdir: Path, zookeeper: str, bootstrap: str, kafka_version: str) -> None:
        self.port = free_port("127.0.0.1")
        self.log = workdir / "burrow.log"
        (workdir / "burrow.toml").write_text(f"""
[general]
pidfile="{workdir}/burrow.pid"
[logging]
level="info"
[zookeeper]
servers=["{zookeeper}"]
timeout=6
root-path="/burrow"
[client-profile.pafka]
client-id="burrow"
kafka-version="{kafka_version}"
[cluster.local]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="pafka"
topic-refresh=5
offset-refresh=2
[consumer.local]
class-name="kafka"
cluster="local"
servers=["{bootstrap}"]
client-profile="pafka"
start-latest=false
[httpserver.default]
address="127.0.0.1:{self.port}"
[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1
""")
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([BURROW, "-config-dir", str(workdir)], stdout=log,
                                            stderr=subprocess.STDOUT)

    def get(self, path: str) -> dict[str, Any] | None:
        """``GET /v3/kafka/local/PATH``: the answer, or None while Burrow does not know it yet."""
        url = f"http://127.0.0.1:{self.port}/v3/kafka/local" + (f"/{path}" if path else "")
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                body: dict[str, Any] = json.load(answer)
        except (urllib.error.URLError, ConnectionError):
            return None  # not listening yet, or 404 for what it has not read yet
        return None if body.get("error") else body

    def lag(self, group: str) -> dict[int, tuple[int, int]] | None:
        """partition -> (committed offset, current lag), once Burrow knows every partition of the group."""
        body = self.get(f"consumer/{group}/lag")
        if body is None:
            return None
        partitions = {p["partition"]: (p["end"]["offset"], p["current_lag"]) for p in body["status"]["partitions"]}
        return partitions if len(partitions) == PARTITIONS else None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.mark.parametrize("kafka_version", ["0.10.0", "2.0.0"])
def test_burrow_reports_each_groups_lag(broker_with_groups: BrokerProcess, zookeeper: str, tmp_path: Path,
                                       kafka_version: str) -> None:
    burrow = Burrow(tmp_path, zookeeper, broker_with_groups.bootstrap, kafka_version)
    try:
        def details() -> str:
            return burrow.log.read_text(errors="replace")[-4000:]

        ends = wait_until(lambda: burrow.get(f"topic/{TOPIC}"), 60, "Burrow to list the topic's end offsets",
                          interval=0.5, details=details)
        assert ends["offsets"] == [PER_PARTITION] * PARTITIONS
        billing = wait_until(lambda: burrow.lag("billing"), 60, "Burrow's lag of group billing",
                             interval=0.5, details=details)
        assert billing == {p: (o, PER_PARTITION - o) for p, o in BILLING.items()}
        live = wait_until(lambda: burrow.lag("live"), 60, "Burrow's lag of group live", interval=0.5,
                          details=details)
        assert live == dict.fromkeys(range(PARTITIONS), (PER_PARTITION, 0))
        # Every offset-commit record decoded; only the group metadata (value version 3) is beyond it.
        undecoded = [line for line in burrow.log.read_text(errors="replace").splitlines()
                     if "failed to decode" in line and '"message_type":"metadata"' not in line]
        assert not undecoded, undecoded[:3]
    finally:
        burrow.stop()
