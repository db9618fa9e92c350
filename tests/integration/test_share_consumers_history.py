"""Share groups' guarantees with real share consumers (confluent-kafka's, librdkafka's preview) in processes of
their own against a real broker process, checked from the consumers' logs by testing/share_history.py:
three consumers on a 1- and a 6-partition topic accept every record exactly once; a consumer SIGKILLed while
it holds a batch has its records delivered to another after the lock duration, with delivery count 2; RELEASE
redelivers with the count + 1, REJECT and the delivery count limit archive; consumers joining and leaving
mid-way leave no record behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.share_history import ShareHistory, check_logs, read_events
from testing.topics import create_topic

confluent_kafka = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("this confluent-kafka has no share consumer", allow_module_level=True)

LOCK_MS = 2_000
DELIVERY_LIMIT = 2
#: how much earlier than its poll a consumer may have had a record acquired (librdkafka fetches ahead)
SLACK_MS = 500
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.process, pytest.mark.pafka_broker_config(
    "group.coordinator.rebalance.protocols=classic,consumer,share", "group.share.min.record.lock.duration.ms=1000")]


def configure_group(bootstrap: str, group: str) -> None:
    """The group's share configs through IncrementalAlterConfigs on a GROUP resource: from the earliest
    record, a short lock and the lowest delivery count limit."""
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    entries = [admin.ConfigEntry(name, value, incremental_operation=(
        admin.AlterConfigOpType.SET)) for name, value in (
        ("share.auto.offset.reset", "earliest"), ("share.record.lock.duration.ms", str(LOCK_MS)),
        ("share.delivery.count.limit", str(DELIVERY_LIMIT)))]
    resource = admin.ConfigResource(admin.ResourceType.GROUP, group,
                                                    incremental_configs=entries)
    for future in client.incremental_alter_configs([resource]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, partitions: int, count: int) -> set[tuple[int, int]]:
    """``count`` records spread round the partitions; their (partition, offset)."""
    keys: set[tuple[int, int]] = set()

    def delivered(error: object, message: object) -> None:
        assert error is None, error
        keys.add((message.partition(), message.offset()))  # type: ignore[attr-defined]

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=b"v%d" % i, partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    assert len(keys) == count
    return keys


@dataclass
class Group:
    """Share consumers in child processes, each logging to ``<dir>/<name>.jsonl``."""

    bootstrap: str
    topic: str
    directory: Path
    group: str = "queue"
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def log(self, name: str) -> Path:
        return self.directory / f"{name}.jsonl"

    def stop_file(self, name: str) -> Path:
        return self.directory / f"{name}.stop"

    def start(self, name: str, policy: str = "accept") -> int:
        self.children[name] = subprocess.Popen(
            [sys.executable, "-m", "testing.share_consumer_child", "--bootstrap", self.bootstrap, "--group",
             self.group, "--topic", self.topic, "--name", name, "--log", str(self.log(name)), "--policy", policy,
             "--stop-file", str(self.stop_file(name)), "--deadline-s", "400"], cwd=ROOT)
        return self.children[name].pid

    def stop(self, name: str) -> None:
        """Stop ``name`` as a user would: it closes and leaves the group."""
        self.stop_file(name).touch()
        try:
            self.children[name].wait(60)
        except subprocess.TimeoutExpired:
            self.kill(name)

    def kill(self, name: str) -> None:
        os.kill(self.children[name].pid, signal.SIGKILL)
        self.children[name].wait(30)

    def done(self) -> int:
        """How many acknowledgements the consumers logged so far."""
        return sum(self.log(name).read_bytes().count(b'"acknowledged"')
                   for name in self.children if self.log(name).exists())

    def wait_done(self, count: int, timeout_s: float) -> None:
        wait_until(self.done, timeout_s, f"{count} acknowledgements", until=lambda n: n >= count, interval=0.5)

    def history(self) -> ShareHistory[tuple[int, int]]:
        return check_logs([self.log(n) for n in self.children if self.log(n).exists()], LOCK_MS, DELIVERY_LIMIT,
                          SLACK_MS)

    def close(self) -> None:
        for name, child in self.children.items():
            if child.poll() is None:
                self.stop(name)


@contextmanager
def share_group(broker: BrokerProcess, tmp_path: Path, topic: str, partitions: int) -> Iterator[Group]:
    create_topic(broker.bootstrap, topic, partitions)
    configure_group(broker.bootstrap, "queue")
    group = Group(broker.bootstrap, topic, tmp_path)
    try:
        yield group
    finally:
        group.close()


def accepted_once(history: ShareHistory[tuple[int, int]], keys: set[tuple[int, int]]) -> None:
    history.check_complete(keys)
    assert history.accepted == keys and not history.rejected


@pytest.mark.parametrize("partitions", [1, 6])
def test_three_share_consumers_accept_every_record_once(pafka_broker: BrokerProcess, tmp_path: Path,
                                                       partitions: int) -> None:
    count = 100_000
    with share_group(pafka_broker, tmp_path, "records", partitions) as group:
        keys = produce(pafka_broker.bootstrap, "records", partitions, count)
        started = time.monotonic()
        for i in range(3):
            group.start(f"c{i}")
        group.wait_done(count, 420)
        elapsed = time.monotonic() - started
        group.close()
        history = group.history()
    accepted_once(history, keys)
    # Every consumer took its share of the work.
    takers = {member for member in ("c0", "c1", "c2") if group.log(member).read_bytes().count(b'"acquired"')}
    assert len(takers) == 3, takers
    print(f"{count} records on {partitions} partition(s) accepted by 3 share consumers in {elapsed:.1f} s")


def test_a_killed_consumers_records_go_to_another_after_the_lock(pafka_broker: BrokerProcess,
                                                                 tmp_path: Path) -> None:
    count = 2_000
    with share_group(pafka_broker, tmp_path, "records", 1) as group:
        keys = produce(pafka_broker.bootstrap, "records", 1, count)
        group.start("holder", "hold")
        wait_until(lambda: Path(str(group.log("holder")) + ".holding").exists(), 60, "the holder's batch")
        for name in ("c1", "c2"):
            group.start(name)
        group.kill("holder")
        group.wait_done(count, 180)
        group.close()
        history = group.history()
    accepted_once(history, keys)
    held = {(int(str(e[2])), int(str(e[3]))) for e in read_events([group.log("holder")]) if e[0] == "acquired"}
    assert held
    # The checker saw each taken only once the holder's lock was out; it came back with delivery count 2.
    assert all(history.delivery[key] == 2 for key in held)


def test_release_redelivers_reject_and_the_delivery_limit_archive(pafka_broker: BrokerProcess,
                                                                  tmp_path: Path) -> None:
    count = 3_000
    with share_group(pafka_broker, tmp_path, "records", 6) as group:
        keys = produce(pafka_broker.bootstrap, "records", 6, count)
        for i in range(3):
            group.start(f"c{i}", "mixed")
        released_twice = {k for k in keys if k[1] % 10 == 2}
        # every record's final acknowledgement, and the first deliveries of the released ones
        group.wait_done(count + len({k for k in keys if k[1] % 10 == 0}) + len(released_twice), 240)
        group.close()
        history = group.history()
    history.check_complete(keys)
    for key in keys:
        kind = key[1] % 10
        assert history.deliveries[key] == (2 if kind in (0, 2) else 1), (key, history.deliveries[key])
        assert history.delivery[key] == history.deliveries[key]
    assert history.rejected == {k for k in keys if k[1] % 10 == 1}
    assert history.accepted == {k for k in keys if k[1] % 10 not in (1, 2)}
    assert all(history.archived(k) for k in released_twice)


def test_consumers_joining_and_leaving_leave_no_record_behind(pafka_broker: BrokerProcess, tmp_path: Path) -> None:
    count = 30_000
    with share_group(pafka_broker, tmp_path, "records", 6) as group:
        keys = produce(pafka_broker.bootstrap, "records", 6, count)
        group.start("c0")
        group.wait_done(count // 5, 180)
        group.start("c1")
        group.start("c2")
        group.wait_done(count // 2, 180)
        group.stop("c0")
        group.wait_done(3 * count // 4, 180)
        group.start("c3")
        group.stop("c1")
        group.wait_done(count, 240)
        group.close()
        history = group.history()
    accepted_once(history, keys)
