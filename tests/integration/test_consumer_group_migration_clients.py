"""Online migration between the classic and the consumer protocol with real clients and a real broker.

confluent-kafka members run in threads of this process, each polling its own consumer with
``group.protocol=classic`` (cooperative-sticky or range) or ``group.protocol=consumer``, committing
synchronously after every record. A steady producer writes throughout. Every record is consumed, and no
record whose commit succeeded is consumed again (exactly once per committed offset); the members'
own rebalance callbacks show no partition owned by two members at once. kafka-python and aiokafka
(classic only) take part in a group through a migration, or get Kafka's error when they cannot.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic
from tests.integration.test_consumer_protocol_groups import (
    PARTITIONS,
    SWITCH,
    Ledger,
    SteadyProducer,
    group_epochs,
    poll_and_commit,
    wait_until,
)

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.process

#: The classic members' session is short so that a downgrade's rebalance does not wait long for a member.
CLASSIC = {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky",
           "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
MODERN = {"group.protocol": "consumer"}


@dataclass
class Commits:
    """The records whose commit succeeded, each with how many times it was consumed and committed."""

    committed: dict[tuple[int, int], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, partition: int, offset: int) -> None:
        with self.lock:
            self.committed[(partition, offset)] = self.committed.get((partition, offset), 0) + 1

    def twice(self) -> list[tuple[int, int]]:
        with self.lock:
            return [key for key, n in self.committed.items() if n > 1]


class Member:
    """A confluent-kafka consumer in a thread: records what it owns, consumes and commits."""

    def __init__(self, broker: BrokerProcess, name: str, group: str, topic: str, ledger: Ledger, commits: Commits,
                 settings: dict[str, Any]) -> None:
        self.name, self.ledger, self.commits = name, ledger, commits
        self.stop = threading.Event()
        self.errors: list[str] = []
        config = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "client.id": name, **settings}
        self.consumer = confluent_kafka.Consumer(config)
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self.ledger.assigned(self.name, [tp.partition for tp in partitions])

    def _on_revoke(self, _consumer: Any, partitions: list[Any]) -> None:
        self.ledger.revoked(self.name, [tp.partition for tp in partitions])

    def _run(self) -> None:
        poll_and_commit(self.consumer, self.stop, self.ledger, self.errors,
                        committed=lambda message: self.commits.add(message.partition(), message.offset()))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)

    @property
    def owned(self) -> set[int]:
        return self.ledger.owned_by(self.name)


@dataclass
class Story:
    broker: BrokerProcess
    group: str
    topic: str
    ledger: Ledger = field(default_factory=Ledger)
    commits: Commits = field(default_factory=Commits)
    members: dict[str, Member] = field(default_factory=dict)
    steps: int = 0

    def start(self, name: str, settings: dict[str, Any]) -> None:
        self.members[name] = Member(self.broker, f"{name}-{self.steps}", self.group, self.topic, self.ledger,
                                    self.commits, settings)
        self.steps += 1

    def restart(self, name: str, settings: dict[str, Any]) -> None:
        self.members.pop(name).close()
        self.start(name, settings)

    def wait_balanced(self, what: str) -> None:
        def balanced() -> bool:
            owned = [len(m.owned) for m in self.members.values()]
            return sum(owned) == PARTITIONS and max(owned) - min(owned) <= 1
        wait_until(balanced, 90, f"a balanced assignment: {what}")

    def wait_consumed(self, producer: SteadyProducer, what: str) -> None:
        """Everything produced so far is consumed (the group is consuming, not stuck)."""
        sent = producer.sent
        wait_until(lambda: len(self.ledger.consumed) >= sent, 60, f"the records produced before {what}")

    def close(self) -> None:
        for member in self.members.values():
            member.close()


def group_type(broker: BrokerProcess, group: str) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups().result(30)
    return {str(g.group_id): str(getattr(g, "type", "")) for g in listed.valid}.get(group, "")


@contextmanager
def story(broker: BrokerProcess, group: str, topic: str) -> Iterator[Story]:
    told = Story(broker, group, topic)
    try:
        yield told
    finally:
        told.close()


def check_exactly_once(broker: BrokerProcess, told: Story, producer: SteadyProducer, group: str) -> None:
    """Every record consumed; none consumed again once committed; the group's offsets at the end of the log."""
    total = producer.sent
    wait_until(lambda: len(told.ledger.consumed) == total, 60, "every record")
    assert told.commits.twice() == []
    assert not told.ledger.overlaps, told.ledger.overlaps
    reader = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                       "group.protocol": "classic"})
    try:
        tps = [confluent_kafka.TopicPartition(told.topic, p) for p in range(PARTITIONS)]
        wait_until(lambda: sum(tp.offset for tp in reader.committed(tps, timeout=10)) == total, 30,
                   "the committed offsets at the end of the log")
    finally:
        reader.close()


@pytest.mark.slow
def test_a_classic_group_migrates_to_the_consumer_protocol_and_back() -> None:
    group, topic = "migrate", "migrate-t"
    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, topic, PARTITIONS)
        producer = SteadyProducer(broker, topic, 200)
        try:
            with story(broker, group, topic) as told:
                told.start("a", CLASSIC)
                told.start("b", CLASSIC)
                told.wait_balanced("two classic members")
                told.wait_consumed(producer, "the upgrade")
                assert "CLASSIC" in group_type(broker, group)

                told.start("c", MODERN)  # the upgrade
                told.wait_balanced("two classic members and a consumer-protocol one")
                assert "CONSUMER" in group_type(broker, group)
                told.wait_consumed(producer, "restarting the classic members")

                told.restart("a", MODERN)
                told.restart("b", MODERN)
                told.wait_balanced("three consumer-protocol members")
                told.wait_consumed(producer, "going back to classic")

                told.restart("a", CLASSIC)
                told.restart("b", CLASSIC)
                told.wait_balanced("two classic members and the last consumer-protocol one")
                told.restart("c", CLASSIC)  # the downgrade
                told.wait_balanced("three classic members")
                assert "CLASSIC" in group_type(broker, group)
                told.wait_consumed(producer, "the end")
                producer.close()
                check_exactly_once(broker, told, producer, group)
        finally:
            producer.close()


@pytest.mark.slow
def test_an_eager_range_classic_group_is_upgraded_and_downgraded() -> None:
    group, topic = "migrate-range", "migrate-range-t"
    range_classic = {**CLASSIC, "partition.assignment.strategy": "range"}
    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, topic, PARTITIONS)
        producer = SteadyProducer(broker, topic, 200)
        try:
            with story(broker, group, topic) as told:
                told.start("a", range_classic)
                told.start("b", range_classic)
                told.wait_balanced("two classic members")
                told.start("c", MODERN)
                told.wait_balanced("after the upgrade")
                told.members.pop("c").close()  # the downgrade
                told.wait_balanced("after the downgrade")
                assert "CLASSIC" in group_type(broker, group)
                told.wait_consumed(producer, "the end")
                producer.close()
                check_exactly_once(broker, told, producer, group)
        finally:
            producer.close()


@pytest.mark.slow
def test_a_mixed_group_survives_the_broker_restart(pafka_broker_factory: Any) -> None:
    """Two classic members upgraded by a consumer-protocol one, then the broker restarts: the group is loaded
    from its records (the classic members with their protocols and sessions) at the same epoch with the same
    members, nobody's partitions move, and consumption goes on with nothing consumed again past a commit."""
    group, topic = "mixed-restart", "mixed-restart-t"
    broker = pafka_broker_factory(*SWITCH)
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = SteadyProducer(broker, topic, 200)
    try:
        with story(broker, group, topic) as told:
            told.start("a", CLASSIC)
            told.start("b", CLASSIC)
            told.wait_balanced("two classic members")
            told.start("c", MODERN)  # the upgrade
            told.wait_balanced("two classic members and a consumer-protocol one")
            told.wait_consumed(producer, "the restart")
            owned = {name: member.owned for name, member in told.members.items()}
            epoch = group_epochs(broker.log_text(), group)[-1]
            before = len(broker.log_text())
            broker.restart()
            loaded = f"[GroupId {group}] Loaded consumer group at epoch {epoch} with 3 member(s)."
            wait_until(lambda: loaded in broker.log_text()[before:], 30, "the group loaded from its records")
            told.wait_consumed(producer, "the end")
            time.sleep(2)  # a few heartbeats more of every member on the restarted broker
            after = broker.log_text()[before:]
            assert {name: member.owned for name, member in told.members.items()} == owned
            assert group_epochs(after, group) == [], after[-3000:]
            assert "CONSUMER" in group_type(broker, group)
            producer.close()
            check_exactly_once(broker, told, producer, group)
        check_conversion_records(broker, group)
    finally:
        producer.close()


def check_conversion_records(broker: BrokerProcess, group: str) -> None:
    """``dump-log --offsets-decoder`` shows the upgrade: the classic group's tombstone and the classic
    members' metadata with their session timeouts and protocols."""
    from click.testing import CliRunner

    from tools.cli import main

    segments = sorted(str(p) for p in broker.data_dir.glob("__consumer_offsets-*/*.log"))
    result = CliRunner().invoke(main, ["dump-log", "--offsets-decoder", "--files", ",".join(segments)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if f'"{group}"' in line]
    assert any(f'{{"type":"2","data":{{"group":"{group}"}}}} payload: <DELETE>' in line for line in lines)
    classic = [line for line in lines if '"type":"5"' in line and '"classicMemberMetadata"' in line]
    assert classic and all('"sessionTimeoutMs":6000,"supportedProtocols":[{"name":"cooperative-sticky"' in line
                           for line in classic), lines


# -- kafka-python and aiokafka: classic only --------------------------------------------------
class KafkaPythonMember:
    """kafka-python (range and round-robin) consuming and committing after every record, in a thread."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str, ledger: Ledger, commits: Commits) -> None:
        from kafka import KafkaConsumer

        self.ledger, self.commits = ledger, commits
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                      enable_auto_commit=False, auto_offset_reset="earliest",
                                      session_timeout_ms=6000, heartbeat_interval_ms=500, client_id="kafka-python")
        self.thread = threading.Thread(target=self._run, name="kafka-python", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from kafka import OffsetAndMetadata
        from kafka.errors import KafkaError

        while not self.stop.is_set():
            for tp, batch in self.consumer.poll(timeout_ms=100).items():
                for message in batch:
                    self.ledger.record(tp.partition, message.offset)
                    try:
                        self.consumer.commit({tp: OffsetAndMetadata(message.offset + 1, "", -1)})
                    except KafkaError as e:
                        self.errors.append(f"commit: {e!r}")
                        break
                    self.commits.add(tp.partition, message.offset)
        self.consumer.close()

    @property
    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


@pytest.mark.slow
def test_kafka_python_stays_in_a_group_through_its_migrations() -> None:
    """kafka-python joins a consumer group (as a classic member of it), shares the partitions with a
    consumer-protocol member, and has them all once that member leaves and the group is classic again."""
    group, topic = "migrate-kp", "migrate-kp-t"
    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, topic, PARTITIONS)
        producer = SteadyProducer(broker, topic, 100)
        told = Story(broker, group, topic)
        kp: KafkaPythonMember | None = None
        try:
            told.start("c", MODERN)
            wait_until(lambda: len(told.members["c"].owned) == PARTITIONS, 30, "the consumer group")
            kp = KafkaPythonMember(broker, group, topic, told.ledger, told.commits)
            member = kp
            wait_until(lambda: len(member.owned) == PARTITIONS // 2 == len(told.members["c"].owned), 60,
                       "kafka-python's half")
            assert "CONSUMER" in group_type(broker, group)
            told.members.pop("c").close()  # the downgrade: kafka-python alone in a classic group
            wait_until(lambda: len(member.owned) == PARTITIONS, 60, "every partition for kafka-python")
            assert "CLASSIC" in group_type(broker, group)
            producer.close()
            total = producer.sent
            wait_until(lambda: len(told.ledger.consumed) == total, 60, "every record")
            assert told.commits.twice() == []
        finally:
            producer.close()
            told.close()
            if kp is not None:
                kp.close()


@pytest.mark.slow
def test_aiokafka_gets_kafkas_error_when_no_protocol_is_common_to_the_classic_members() -> None:
    """aiokafka (round-robin only) cannot join a consumer group whose classic members all use
    cooperative-sticky: INCONSISTENT_GROUP_PROTOCOL, as Kafka answers; it joins one without classic members."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import InconsistentGroupProtocolError

    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, "aio-t", PARTITIONS)
        with story(broker, "aio", "aio-t") as told:
            told.start("a", CLASSIC)
            told.wait_balanced("a classic member")
            told.start("c", MODERN)
            told.wait_balanced("after the upgrade")

            async def join(group: str) -> set[int]:
                consumer = AIOKafkaConsumer("aio-t", bootstrap_servers=broker.bootstrap, group_id=group)
                await consumer.start()
                try:
                    deadline = time.monotonic() + 30
                    while not consumer.assignment() and time.monotonic() < deadline:
                        await consumer.getmany(timeout_ms=200)
                    return {tp.partition for tp in consumer.assignment()}
                finally:
                    await consumer.stop()

            with pytest.raises(InconsistentGroupProtocolError):
                asyncio.run(join("aio"))

        with story(broker, "aio-modern", "aio-t") as modern:
            modern.start("c", MODERN)
            modern.wait_balanced("a consumer group")
            assert asyncio.run(join("aio-modern"))  # a classic member of the consumer group, with partitions


# -- an assign-only consumer's commits ---------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_an_assign_only_consumer_commits_to_an_empty_group(protocol: str) -> None:
    """A consumer that assigns itself partitions commits with generation -1 (with the consumer protocol,
    librdkafka sends its own member id too): an empty group takes the commit, as Kafka does."""
    with BrokerProcess(*SWITCH) as broker:
        create_topic(broker.bootstrap, "assign-only", PARTITIONS)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "assign-only",
                                             "group.protocol": protocol, "enable.auto.commit": False})
        try:
            consumer.assign([confluent_kafka.TopicPartition("assign-only", 3, 0)])
            consumer.poll(0.5)
            committed = consumer.commit(offsets=[confluent_kafka.TopicPartition("assign-only", 3, 17)],
                                        asynchronous=False)
            assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [(3, 17, None)]
        finally:
            consumer.close()
        reader = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "assign-only"})
        try:
            (tp,) = reader.committed([confluent_kafka.TopicPartition("assign-only", 3)], timeout=10)
            assert tp.offset == 17
        finally:
            reader.close()
