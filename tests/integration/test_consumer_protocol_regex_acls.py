"""A regex subscription under ACLs: a confluent-kafka consumer (``group.protocol=consumer``, SASL PLAIN as alice)
subscribed to ``^orders-.*`` on a broker with the ACL authorizer is given only the matching topics alice may
DESCRIBE, as Kafka filters a resolution with the principal of the member whose heartbeat refreshes it; DESCRIBE
granted later on another matching topic gets it assigned at the group's next refresh
(``group.consumer.regex.refresh.interval.ms``)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from protocol.acl_types import AclOperation, PatternType, ResourceType
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from pytest_pafka.plugin import BrokerFactory
from pytest_pafka.waiting import wait_until
from tests.broker.acl_helpers import AclBroker, acl_broker_process

confluent_kafka = pytest.importorskip("confluent_kafka")

# The broker is a process of its own (acl_broker_process, not a plugin fixture).
pytestmark = [pytest.mark.process, pytest.mark.slow]

HEARTBEAT_INTERVAL_MS = 1000
METADATA_REFRESH_MS = 1000
#: The smallest refresh interval Kafka accepts.
REFRESH_INTERVAL_MS = 10_000
PARTITIONS = 2
GROUP = "regex-acls"
REGEX = "^orders-.*"


class Member:
    """alice's consumer, polling in its own thread; its rebalance callbacks say what it owns."""

    def __init__(self, acls: AclBroker) -> None:
        self.lock = threading.Lock()
        self.owned: set[tuple[str, int]] = set()
        self.stop = threading.Event()
        self.consumer = confluent_kafka.Consumer({
            **acls.confluent_config("alice"), "group.id": GROUP, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS})
        self.consumer.subscribe([REGEX], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)
        self.thread = threading.Thread(target=self._run, name="alice", daemon=True)
        self.thread.start()

    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            self.owned |= {(tp.topic, tp.partition) for tp in partitions}

    def _on_revoke(self, _consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            self.owned -= {(tp.topic, tp.partition) for tp in partitions}

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.1)
        self.consumer.close()

    def topics(self) -> set[str]:
        with self.lock:
            return {topic for topic, _ in self.owned}

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def _broker(factory: BrokerFactory) -> AclBroker:
    broker, sasl = acl_broker_process(
        factory, "group.coordinator.rebalance.protocols=classic,consumer",
        f"group.consumer.heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}", "group.consumer.min.heartbeat.interval.ms=500",
        "group.consumer.session.timeout.ms=6000", "group.consumer.min.session.timeout.ms=3000",
        f"group.consumer.regex.refresh.interval.ms={REFRESH_INTERVAL_MS}")
    acls = AclBroker(broker, sasl).wait_ready()
    with acls.connect("admin") as admin:
        created = admin.request(CreateTopicsRequest(topics=[
            CreatableTopic(name=t, num_partitions=PARTITIONS, replication_factor=1)
            for t in ("orders-1", "orders-2", "orders-3", "payments")], timeout_ms=10_000), version=5)
    assert isinstance(created, CreateTopicsResponse) and [t.error_code for t in created.topics] == [0] * 4
    return acls


def test_a_member_gets_the_matching_topics_it_may_describe_and_one_granted_later_at_the_next_refresh(
        pafka_broker_factory: BrokerFactory) -> None:
    acls = _broker(pafka_broker_factory)
    acls.allow("User:alice", AclOperation.READ, ResourceType.GROUP, GROUP)
    for topic in ("orders-1", "orders-2", "payments"):  # READ implies DESCRIBE
        acls.allow("User:alice", AclOperation.READ, ResourceType.TOPIC, topic)
    member = Member(acls)
    try:
        wait_until(lambda: member.topics() == {"orders-1", "orders-2"}, 30, "orders-1 and orders-2 assigned",
                   details=lambda: str(member.topics()))
        time.sleep(3 * HEARTBEAT_INTERVAL_MS / 1000)
        assert member.topics() == {"orders-1", "orders-2"}, "orders-3 matches but alice may not describe it"

        granted = time.monotonic()
        acls.allow("User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders-3", PatternType.LITERAL)
        wait_until(lambda: member.topics() == {"orders-1", "orders-2", "orders-3"}, 30, "orders-3 assigned",
                   details=lambda: str(member.topics()))
        took = time.monotonic() - granted
        # At the group's next refresh, then a heartbeat for the new epoch and the client's metadata for the topic.
        assert took <= (REFRESH_INTERVAL_MS + 2 * HEARTBEAT_INTERVAL_MS + METADATA_REFRESH_MS) / 1000 + 2, took
    finally:
        member.close()
