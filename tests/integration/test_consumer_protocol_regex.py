"""A regex subscription ``^orders-.*`` of confluent-kafka consumers (``group.protocol=consumer``) on a real broker.

The broker resolves the expression (KIP-848): a topic created after the members
joined is assigned within one metadata refresh of the client and its records
are consumed; a deleted one is revoked. Each member's own rebalance callbacks
say what it owns (incremental, as librdkafka reports them for this protocol).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from client.connection import BrokerConnection
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.topics import create_topic
from tests.integration.test_consumer_protocol_groups import group_epochs

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_module = pytest.importorskip("confluent_kafka.admin")

HEARTBEAT_INTERVAL_MS = 1000
#: The clients' topic.metadata.refresh.interval.ms.
METADATA_REFRESH_MS = 1000
PARTITIONS = 3
REGEX = "^orders-.*"

OVERRIDES = ("group.coordinator.rebalance.protocols=classic,consumer",
             f"group.consumer.heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}",
             "group.consumer.min.heartbeat.interval.ms=500",
             "group.consumer.session.timeout.ms=6000", "group.consumer.min.session.timeout.ms=3000")
pytestmark = [pytest.mark.slow, pytest.mark.pafka_broker_config(*OVERRIDES)]


class RegexMember:
    """A consumer subscribed with ``REGEX``, polling in its own thread."""

    def __init__(self, bootstrap: str, name: str, group: str) -> None:
        self.name = name
        self.lock = threading.Lock()
        self.owned: set[tuple[str, int]] = set()
        self.consumed: list[tuple[str, int, int]] = []
        self.stop = threading.Event()
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "client.id": name,
            "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS})
        self.consumer.subscribe([REGEX], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            self.owned |= {(tp.topic, tp.partition) for tp in partitions}

    def _on_revoke(self, _consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            self.owned -= {(tp.topic, tp.partition) for tp in partitions}

    def _run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.1)
            if message is not None and not message.error():
                with self.lock:
                    self.consumed.append((message.topic(), message.partition(), message.offset()))
        self.consumer.close()

    def snapshot(self) -> tuple[set[tuple[str, int]], list[tuple[str, int, int]]]:
        with self.lock:
            return set(self.owned), list(self.consumed)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def owned_by_all(members: list[RegexMember]) -> list[tuple[str, int]]:
    return sorted(tp for m in members for tp in m.snapshot()[0])


def every_partition(*topics: str) -> list[tuple[str, int]]:
    return sorted((t, p) for t in topics for p in range(PARTITIONS))


def produce(broker: BrokerProcess, topic: str, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(count):
        producer.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def delete_topic(broker: BrokerProcess, topic: str) -> None:
    admin = admin_module.AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(30)


def describe(broker: BrokerProcess, group: str) -> ConsumerGroupDescribeResponse:
    with BrokerConnection(broker.host, broker.port) as connection:
        response = connection.request(ConsumerGroupDescribeRequest(group_ids=[group]), version=1)
    assert isinstance(response, ConsumerGroupDescribeResponse)
    return response


def test_a_topic_created_later_is_assigned_within_one_metadata_refresh_and_a_deleted_one_revoked(
        pafka_broker: BrokerProcess) -> None:
    broker, group = pafka_broker, "regex-group"
    create_topic(broker.bootstrap, "orders-1", PARTITIONS)
    create_topic(broker.bootstrap, "payments", PARTITIONS)  # not matched
    members = [RegexMember(broker.bootstrap, f"m{i}", group) for i in range(2)]
    try:
        wait_until(lambda: owned_by_all(members) == every_partition("orders-1"), 30, "orders-1 assigned",
                   details=lambda: str(owned_by_all(members)))
        described = describe(broker, group).groups[0]
        # librdkafka sends its expressions combined, each in parentheses.
        assert [m.subscribed_topic_regex for m in described.members] == [f"({REGEX})"] * 2

        created = time.monotonic()
        create_topic(broker.bootstrap, "orders-2", PARTITIONS)
        wait_until(lambda: owned_by_all(members) == every_partition("orders-1", "orders-2"), 30,
                   "orders-2 assigned", details=lambda: str(owned_by_all(members)))
        took = time.monotonic() - created
        # One refresh of the client's metadata, and a heartbeat of each member for the new epoch to reach it.
        assert took <= (METADATA_REFRESH_MS + 2 * HEARTBEAT_INTERVAL_MS) / 1000, took

        produce(broker, "orders-2", 30)
        wait_until(lambda: sum(1 for m in members for c in m.snapshot()[1] if c[0] == "orders-2") >= 30, 30,
                   "orders-2's records consumed")

        deleted = time.monotonic()
        delete_topic(broker, "orders-1")
        wait_until(lambda: owned_by_all(members) == every_partition("orders-2"), 30, "orders-1 revoked",
                   details=lambda: str(owned_by_all(members)))
        took = time.monotonic() - deleted
        assert took <= (METADATA_REFRESH_MS + 2 * HEARTBEAT_INTERVAL_MS) / 1000, took
    finally:
        for member in members:
            member.close()


@pytest.mark.process
def test_the_resolved_topics_survive_a_broker_restart_without_a_new_epoch() -> None:
    """The regular expression's resolution is in __consumer_offsets (ConsumerGroupRegularExpression) and loaded
    with the group: after a restart its members go on with the same group epoch and partitions."""
    group = "regex-restart"
    with BrokerProcess(*OVERRIDES) as broker:
        create_topic(broker.bootstrap, "orders-1", PARTITIONS)
        create_topic(broker.bootstrap, "orders-2", PARTITIONS)
        members = [RegexMember(broker.bootstrap, f"r{i}", group) for i in range(2)]
        try:
            wait_until(lambda: owned_by_all(members) == every_partition("orders-1", "orders-2")
                       and all(len(m.snapshot()[0]) == PARTITIONS for m in members), 30,
                       "orders-1 and orders-2 assigned, balanced", details=lambda: str(owned_by_all(members)))
            time.sleep(2 * HEARTBEAT_INTERVAL_MS / 1000)  # the members' epochs settled too
            owned = [m.snapshot()[0] for m in members]
            epoch = group_epochs(broker.log_text(), group)[-1]
            before = len(broker.log_text())
            broker.restart()
            loaded = f"[GroupId {group}] Loaded consumer group at epoch {epoch} with 2 member(s)."
            wait_until(lambda: loaded in broker.log_text()[before:], 30, "the group loaded from its records")
            time.sleep(3 * HEARTBEAT_INTERVAL_MS / 1000)  # a few heartbeats on the restarted broker
            after = broker.log_text()[before:]
            assert [m.snapshot()[0] for m in members] == owned
        finally:
            for member in members:
                member.close()
    assert group_epochs(after, group) == [] and "joins the consumer group" not in after, after[-3000:]


def test_a_bad_regex_is_answered_invalid_regular_expression(pafka_broker: BrokerProcess) -> None:
    not_ready = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    with BrokerConnection(pafka_broker.host, pafka_broker.port) as connection:
        connection.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["bad-regex"]), version=4)

        def join() -> ConsumerGroupHeartbeatResponse:
            response = connection.request(ConsumerGroupHeartbeatRequest(
                group_id="bad-regex", member_id="m", member_epoch=0, rebalance_timeout_ms=30_000,
                subscribed_topic_names=[], subscribed_topic_regex="orders-(", topic_partitions=[]), version=1)
            assert isinstance(response, ConsumerGroupHeartbeatResponse)
            return response

        response = wait_until(join, 30, "the group coordinator", until=lambda r: r.error_code not in not_ready)
    assert (response.error_code, response.error_message) == (
        ErrorCode.INVALID_REGULAR_EXPRESSION,
        "SubscribedTopicRegex `orders-(` is not a valid regular expression: missing closing ).")
