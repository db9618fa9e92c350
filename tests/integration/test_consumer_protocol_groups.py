"""confluent-kafka with ``group.protocol=consumer`` (KIP-848) against a real broker process.

The broker serves the consumer protocol by default; ``SWITCH`` names it anyway
(``group.coordinator.rebalance.protocols=classic,consumer``) with short heartbeat
intervals and session timeouts. Members run in
threads of this process, each polling its own consumer; their own rebalance
callbacks record what they own, and a shared ledger checks that no partition
is ever owned by two members at once. Members commit synchronously after
every record, so each record is consumed exactly once across rebalances.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic

confluent_kafka = pytest.importorskip("confluent_kafka")

# Every test starts its own broker process (BrokerProcess, not a plugin fixture).
pytestmark = pytest.mark.process

PARTITIONS = 12
HEARTBEAT_INTERVAL_MS = 1000
SWITCH = ("group.coordinator.rebalance.protocols=classic,consumer",
          f"group.consumer.heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}",
          "group.consumer.min.heartbeat.interval.ms=500",
          "group.consumer.session.timeout.ms=6000", "group.consumer.min.session.timeout.ms=3000")


class Bootstrapped(Protocol):
    """A broker or a cluster: what the members and the producer connect to."""

    @property
    def bootstrap(self) -> str: ...


@dataclass
class Ledger:
    """Who owns which partition, as the members' callbacks say; every overlap is recorded."""

    owners: dict[int, str] = field(default_factory=dict)
    overlaps: list[str] = field(default_factory=list)
    consumed: dict[tuple[int, int], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def assigned(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                if self.owners.get(p, member) != member:
                    self.overlaps.append(f"{member} got {p} still owned by {self.owners[p]}")
                self.owners[p] = member

    def revoked(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                if self.owners.get(p) == member:
                    del self.owners[p]

    def record(self, partition: int, offset: int) -> None:
        with self.lock:
            self.consumed[(partition, offset)] = self.consumed.get((partition, offset), 0) + 1

    def owned_by(self, member: str) -> set[int]:
        with self.lock:
            return {p for p, m in self.owners.items() if m == member}


def poll_and_commit(consumer: Any, stop: threading.Event, ledger: Ledger, errors: list[str],
                    consumed: Callable[[Any], None] | None = None,
                    committed: Callable[[Any], None] | None = None) -> None:
    """A confluent-kafka member thread's loop until ``stop``: poll, put each record in the ledger, commit it
    synchronously (a failed commit is an error, and the record is left for the next owner); then close.
    ``consumed`` sees each record once it is in the ledger, ``committed`` each record whose commit succeeded."""
    while not stop.is_set():
        message = consumer.poll(0.1)
        if message is None:
            continue
        if message.error():
            errors.append(str(message.error()))
            continue
        ledger.record(message.partition(), message.offset())
        if consumed is not None:
            consumed(message)
        try:
            consumer.commit(message=message, asynchronous=False)
        except confluent_kafka.KafkaException as e:
            errors.append(f"commit: {e}")
            continue
        if committed is not None:
            committed(message)
    consumer.close()


class ThreadMember:
    def __init__(self, broker: Bootstrapped, name: str, group: str, topic: str, ledger: Ledger,
                 instance_id: str | None = None) -> None:
        self.name, self.ledger = name, ledger
        #: Wall-clock time of its first non-empty assignment (comparable with the broker's log).
        self.first_assignment_at: float | None = None
        self.stop = threading.Event()
        self.errors: list[str] = []
        #: When it consumed each record (monotonic), to find pauses.
        self.consumed_at: list[float] = []
        settings = {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                    "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name}
        if instance_id is not None:
            settings["group.instance.id"] = instance_id
        self.consumer = confluent_kafka.Consumer(settings)
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        if partitions and self.first_assignment_at is None:
            self.first_assignment_at = time.time()
        self.ledger.assigned(self.name, [tp.partition for tp in partitions])

    def _on_revoke(self, _consumer: Any, partitions: list[Any]) -> None:
        self.ledger.revoked(self.name, [tp.partition for tp in partitions])

    def _run(self) -> None:
        poll_and_commit(self.consumer, self.stop, self.ledger, self.errors,
                        consumed=lambda _message: self.consumed_at.append(time.monotonic()))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def produce(broker: Bootstrapped, topic: str, per_partition: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(per_partition * PARTITIONS):
        producer.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def wait_until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def last_join_time(broker: BrokerProcess, group: str) -> float:
    """When the broker logged the group's latest member joining (its first heartbeat), in wall-clock seconds."""
    pattern = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] INFO \[GroupId " + re.escape(group)
                         + r"\] (Static )?[Mm]ember \S+ .*joins the consumer group", re.MULTILINE)
    matches = pattern.findall(broker.log_text())
    assert matches, "no member joined"
    stamp, millis, _ = matches[-1]
    return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000


@contextmanager
def members(broker: Bootstrapped, names: list[str], group: str, topic: str,
            ledger: Ledger) -> Iterator[list[ThreadMember]]:
    started: list[ThreadMember] = []
    try:
        started.extend(ThreadMember(broker, name, group, topic, ledger) for name in names)
        yield started
    finally:
        for member in started:
            member.close()


@pytest.mark.slow
@pytest.mark.parametrize("count", [1, 2, 5])
def test_members_share_a_topic_and_consume_every_record_once(count: int) -> None:
    group, topic, per_partition = f"cg-{count}", f"ct-{count}", 50
    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, topic, PARTITIONS)
        produce(broker, topic, per_partition)
        ledger = Ledger()
        with members(broker, [f"m{i}" for i in range(count)], group, topic, ledger) as group_members:
            total = per_partition * PARTITIONS
            wait_until(lambda: len(ledger.consumed) == total, 60, "every record")
            wait_until(lambda: len(ledger.owners) == PARTITIONS
                       and all(len(ledger.owned_by(m.name)) in (PARTITIONS // count, -(-PARTITIONS // count))
                               for m in group_members), 30, "a balanced assignment")
        assert not ledger.overlaps
        assert [key for key, n in ledger.consumed.items() if n > 1] == []
        assert all(not m.errors for m in group_members), [m.errors for m in group_members]


class SteadyProducer:
    """Writes to every partition in turn, about ``rate`` records a second, until stopped."""

    def __init__(self, broker: BrokerProcess, topic: str, rate: int) -> None:
        self.producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        self.topic, self.rate, self.sent = topic, rate, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.producer.produce(self.topic, value=b"x", partition=self.sent % PARTITIONS)
            self.sent += 1
            self.producer.poll(0)
            time.sleep(1 / self.rate)
        self.producer.flush(30)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def longest_pause(times: list[float], start: float, end: float) -> float:
    window = [t for t in times if start <= t <= end]
    return max((b - a for a, b in zip([start, *window], [*window, end], strict=True)), default=end - start)


@pytest.mark.slow
def test_a_member_joining_a_stable_group_of_four_gets_partitions_within_two_heartbeats() -> None:
    """Measured from its first heartbeat (the broker's log line of its joining) to its own assignment callback;
    meanwhile the others keep consuming: none pauses for a heartbeat interval (no stop-the-world)."""
    group, topic = "cg-join", "ct-join"
    interval = HEARTBEAT_INTERVAL_MS / 1000
    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, topic, PARTITIONS)
        ledger = Ledger()
        producer = SteadyProducer(broker, topic, 240)
        try:
            with members(broker, [f"m{i}" for i in range(4)], group, topic, ledger) as group_members:
                wait_until(lambda: all(len(ledger.owned_by(m.name)) == 3 for m in group_members), 30,
                           "a stable group")
                time.sleep(2 * interval)  # stable for a while
                joined_at = time.monotonic()
                with members(broker, ["m4"], group, topic, ledger) as (joiner,):
                    wait_until(lambda: joiner.first_assignment_at is not None, 10, "the joiner's partitions")
                    assert joiner.first_assignment_at is not None
                    took = joiner.first_assignment_at - last_join_time(broker, group)
                    wait_until(lambda: len(ledger.owners) == PARTITIONS
                               and all(len(ledger.owned_by(m.name)) in (2, 3) for m in [*group_members, joiner]),
                               30, "a balanced group of five")
                    time.sleep(interval)
                    pauses = {m.name: longest_pause(m.consumed_at, joined_at, time.monotonic())
                              for m in group_members}
        finally:
            producer.close()
        assert not ledger.overlaps
        assert took <= 2 * interval, took
        assert max(pauses.values()) < interval, pauses


@pytest.mark.slow
def test_admin_lists_and_describes_a_consumer_group() -> None:
    """librdkafka's admin: ListGroups with a type filter, ConsumerGroupDescribe (DescribeGroups for an unknown id)."""
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    group, topic = "cg-admin", "ct-admin"
    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, topic, PARTITIONS)
        ledger = Ledger()
        with members(broker, ["m0", "m1"], group, topic, ledger):
            wait_until(lambda: len(ledger.owners) == PARTITIONS and len(ledger.owned_by("m0")) == 6, 30,
                       "a balanced group of two")
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(10)
            assert [(g.group_id, g.type) for g in listed.valid] == [(group, ConsumerGroupType.CONSUMER)]
            classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(10)
            assert [g.group_id for g in classic.valid] == []
            described = admin.describe_consumer_groups([group])[group].result(10)
            assert described.type == ConsumerGroupType.CONSUMER and described.partition_assignor == "uniform"
            assert sorted(m.client_id for m in described.members) == ["m0", "m1"]
            assert sorted(tp.partition for m in described.members
                          for tp in m.assignment.topic_partitions) == list(range(PARTITIONS))


@pytest.mark.slow
def test_members_leave_and_a_static_member_comes_back_to_its_partitions() -> None:
    group, topic, per_partition = "cg-static", "ct-static", 20
    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, topic, PARTITIONS)
        produce(broker, topic, per_partition)
        ledger = Ledger()
        with members(broker, ["m0", "m1", "m2"], group, topic, ledger) as dynamic:
            static = ThreadMember(broker, "s", group, topic, ledger, instance_id="instance-s")
            try:
                wait_until(lambda: all(len(ledger.owned_by(m)) == 3 for m in ("m0", "m1", "m2", "s")), 30,
                           "a balanced group of four")
                kept = ledger.owned_by("s")
            finally:
                static.close()  # a static member leaves with epoch -2: it keeps its place
            time.sleep(2 * HEARTBEAT_INTERVAL_MS / 1000)
            assert all(len(ledger.owned_by(m.name)) == 3 for m in dynamic)  # nobody took its partitions
            back = ThreadMember(broker, "s-again", group, topic, ledger, instance_id="instance-s")
            try:
                wait_until(lambda: ledger.owned_by("s-again") == kept, 10, "its partitions back")
                dynamic[0].close()  # a dynamic member leaves (epoch -1): its partitions move
                wait_until(lambda: len(ledger.owners) == PARTITIONS and not ledger.owned_by("m0"), 30,
                           "the leaver's partitions taken over")
                produce(broker, topic, per_partition)
                wait_until(lambda: len(ledger.consumed) == 2 * per_partition * PARTITIONS, 60, "every record")
            finally:
                back.close()
        assert not ledger.overlaps
        assert [key for key, n in ledger.consumed.items() if n > 1] == []


def group_epochs(log_text: str, group: str) -> list[int]:
    """Every group epoch the broker's log says the group moved to, in order."""
    return [int(e) for e in re.findall(r"\[GroupId " + re.escape(group) + r"\] Bumped group epoch to (\d+)\.", log_text)]


@pytest.mark.slow
def test_a_group_survives_the_broker_restart_with_its_member_epochs() -> None:
    """The group's records in __consumer_offsets are loaded again at start-up: its members go on with the
    epochs and partitions they had (none joins again, the group epoch does not move), no partition is ever
    owned by two members, and nothing committed before the restart is consumed again."""
    group, topic, per_partition = "cg-restart", "ct-restart", 10
    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, topic, PARTITIONS)
        produce(broker, topic, per_partition)
        ledger = Ledger()
        with members(broker, ["m0", "m1"], group, topic, ledger) as group_members:
            wait_until(lambda: len(ledger.consumed) == per_partition * PARTITIONS and len(ledger.owners) == PARTITIONS
                       and all(len(ledger.owned_by(m.name)) == 6 for m in group_members), 30,
                       "every record and a balanced assignment")
            owned = {m.name: ledger.owned_by(m.name) for m in group_members}
            epoch = group_epochs(broker.log_text(), group)[-1]
            before = len(broker.log_text())
            broker.restart()
            loaded = f"[GroupId {group}] Loaded consumer group at epoch {epoch} with 2 member(s)."
            wait_until(lambda: loaded in broker.log_text()[before:], 30, "the group loaded from its records")
            produce(broker, topic, per_partition)
            wait_until(lambda: len(ledger.consumed) == 2 * per_partition * PARTITIONS, 60, "every record")
            time.sleep(2 * HEARTBEAT_INTERVAL_MS / 1000)  # a few heartbeats more on the restarted broker
            after = broker.log_text()[before:]
            assert {m.name: ledger.owned_by(m.name) for m in group_members} == owned
        assert group_epochs(after, group) == [] and "joins the consumer group" not in after, after[-3000:]
        assert not ledger.overlaps
        assert [key for key, n in ledger.consumed.items() if n > 1] == []
        assert all(not any("FATAL" in e.upper() for e in m.errors) for m in group_members), [m.errors for m in group_members]


def _first_error(consumer: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error():
            return message.error()
    return None


@pytest.mark.slow
def test_with_migration_disabled_only_classic_members_join_the_other_protocols_group() -> None:
    """As Kafka with group.consumer.migration.policy=disabled: a classic member (``consumer`` protocol type)
    joins a consumer group as a classic member of it, but a consumer-protocol member is refused by a classic
    group with members (GROUP_ID_NOT_FOUND): converting it would be an upgrade."""
    with BrokerProcess(*SWITCH, "group.consumer.migration.policy=disabled") as broker:
        create_topic(broker.bootstrap, "ct-mix", PARTITIONS)
        ledger = Ledger()
        with members(broker, ["m0"], "cg-mix", "ct-mix", ledger):
            wait_until(lambda: len(ledger.owners) == PARTITIONS, 30, "the consumer group")
            classic = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cg-mix",
                                                "group.protocol": "classic"})
            classic.subscribe(["ct-mix"])
            try:
                wait_until(lambda: classic.poll(0.1) is None and len(classic.assignment()) == PARTITIONS // 2, 60,
                           "the classic member's half")
            finally:
                classic.close()

        first = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "classic-mix",
                                          "group.protocol": "classic"})
        first.subscribe(["ct-mix"])
        modern = None
        try:
            wait_until(lambda: first.poll(0.1) is None and bool(first.assignment()), 30, "the classic group")
            modern = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "classic-mix",
                                               "group.protocol": "consumer"})
            modern.subscribe(["ct-mix"])
            error = _first_error(modern, 15)
            assert error is not None and "group id does not exist" in error.str().lower(), error
        finally:
            first.close()
            if modern is not None:
                modern.close()


_KILLABLE_MEMBER = """
import sys
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer"})
consumer.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
while True:
    consumer.poll(0.1)
"""


@pytest.mark.slow
def test_a_killed_members_partitions_move_after_its_session_times_out() -> None:
    group, topic = "cg-kill", "ct-kill"
    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, topic, PARTITIONS)
        ledger = Ledger()
        with members(broker, ["m0", "m1"], group, topic, ledger):
            wait_until(lambda: len(ledger.owners) == PARTITIONS, 30, "the group of two")
            victim = subprocess.Popen([sys.executable, "-c", _KILLABLE_MEMBER, broker.bootstrap, group, topic],
                                      stdout=subprocess.PIPE, text=True)
            try:
                wait_until(lambda: len(ledger.owners) == 8, 30, "the third member's partitions")
            finally:
                victim.kill()
                victim.wait(10)
                assert victim.stdout is not None
                victim.stdout.close()
            killed_at = time.monotonic()
            wait_until(lambda: len(ledger.owners) == PARTITIONS, 6 + 10, "the killed member's partitions")
            took = time.monotonic() - killed_at
        assert not ledger.overlaps
        assert 3 <= took <= 6 + 3 * HEARTBEAT_INTERVAL_MS / 1000, took  # its session (6 s), then the survivors' heartbeats
