"""ACLs enforced on Metadata, Produce, Fetch and a consumer group, with confluent-kafka clients authenticated as different
users (SASL PLAIN) against a lone broker with the ACL authorizer."""

from __future__ import annotations

import time
from typing import Any

import pytest

from broker.security.authorized_operations import AUTHORIZED_OPERATIONS_OMITTED
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from pytest_pafka.plugin import BrokerFactory
from tests.broker.acl_helpers import AclBroker, acl_broker_process

T, C = ResourceType.TOPIC, ResourceType.CLUSTER


@pytest.fixture(scope="module")
def acls(pafka_module_broker_factory: BrokerFactory) -> AclBroker:
    broker, sasl = acl_broker_process(pafka_module_broker_factory, "auto.create.topics.enable=true")
    setup = AclBroker(broker, sasl).wait_ready()
    setup.allow("User:admin", AclOperation.ALL, C, "kafka-cluster")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(setup.confluent_config("admin"))
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in ("secret", "public", "app-1")]).values():
        future.result(timeout=15)
    return setup


def _metadata(acls: AclBroker, user: str | None, topics: list[str] | None, allow_create: bool = False
              ) -> MetadataResponse:
    wanted = None if topics is None else [MetadataRequestTopic(name=t) for t in topics]
    with acls.connect(user) as client:
        response = client.request(MetadataRequest(topics=wanted, allow_auto_topic_creation=allow_create,
                                                  include_topic_authorized_operations=True,
                                                  include_cluster_authorized_operations=True), version=10)
    assert isinstance(response, MetadataResponse)
    return response


def test_metadata_hides_and_refuses_unauthorized_topics(acls: AclBroker) -> None:
    acls.allow("User:alice", AclOperation.READ, T, "public")
    everything = _metadata(acls, "alice", None)
    assert [t.name for t in everything.topics] == ["public"]
    assert everything.topics[0].topic_authorized_operations == (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)
    assert everything.cluster_authorized_operations == 0
    named = _metadata(acls, "alice", ["public", "secret", "missing"])
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("public", ErrorCode.NO_ERROR), ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("missing", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    assert {t.name for t in _metadata(acls, "admin", None).topics} >= {"public", "secret", "app-1"}
    assert _metadata(acls, None, None).topics == []  # User:ANONYMOUS has no ACL at all


def test_auto_creation_needs_create(acls: AclBroker) -> None:
    acls.allow("User:bob", AclOperation.DESCRIBE, T, "auto-", PatternType.PREFIXED)
    [refused] = _metadata(acls, "bob", ["auto-1"], allow_create=True).topics
    assert refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    acls.allow("User:bob", AclOperation.CREATE, T, "auto-", PatternType.PREFIXED)
    [created] = _metadata(acls, "bob", ["auto-1"], allow_create=True).topics
    assert created.error_code == ErrorCode.NO_ERROR and len(created.partitions) == 1


def _produce(acls: AclBroker, user: str, topic: str, idempotent: bool = False) -> str | None:
    from confluent_kafka import Producer

    errors: list[str] = []
    producer = Producer({**acls.confluent_config(user), "message.timeout.ms": 5000,
                         "enable.idempotence": idempotent})
    producer.produce(topic, b"value", on_delivery=lambda err, _m: errors.append(str(err.code()) if err else "ok"))
    producer.flush(10)
    return errors[0] if errors else None


def test_produce_needs_write(acls: AclBroker) -> None:
    from confluent_kafka import KafkaError

    assert _produce(acls, "alice", "app-1") == str(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    acls.allow("User:alice", AclOperation.WRITE, T, "app-", PatternType.PREFIXED)
    assert _produce(acls, "alice", "app-1") == "ok"
    acls.allow("User:alice", AclOperation.WRITE, T, "app-1", permission=AclPermissionType.DENY)
    assert _produce(acls, "alice", "app-1") == str(KafkaError.TOPIC_AUTHORIZATION_FAILED)


def test_an_idempotent_producer_needs_write_on_some_topic(acls: AclBroker) -> None:
    """InitProducerId without a transactional id: WRITE on any topic (or IDEMPOTENT_WRITE on the cluster)
    is enough for librdkafka's idempotent producer. (The refusal without either is checked on the wire in
    test_acl_txn_and_configs: librdkafka treats it as fatal, and its delivery callback cannot report it.)"""
    acls.allow("User:bob", AclOperation.WRITE, T, "public")
    assert _produce(acls, "bob", "public", idempotent=True) == "ok"


def test_fetch_needs_read(acls: AclBroker) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    acls.allow("User:admin", AclOperation.ALL, T, "fetched")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(acls.confluent_config("admin"))  # kept alive until its future is done
    admin.create_topics([NewTopic("fetched", 1, 1)])["fetched"].result(15)
    assert _produce(acls, "admin", "fetched") == "ok"

    def consume(user: str) -> tuple[bytes | None, int | None]:
        consumer = Consumer({**acls.confluent_config(user), "group.id": "unused", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("fetched", 0, OFFSET_BEGINNING)])
            message = _first_message(consumer, 15)
            if message is None or message.error():
                return None, message.error().code() if message is not None else None
            return message.value(), None
        finally:
            consumer.close()

    # DESCRIBE lets bob see the topic (so the client fetches), not read it; READ on the group lets
    # the client find its coordinator and look up committed offsets.
    acls.allow("User:bob", AclOperation.READ, ResourceType.GROUP, "unused")
    acls.allow("User:bob", AclOperation.DESCRIBE, T, "fetched")
    assert consume("bob") == (None, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    acls.allow("User:bob", AclOperation.READ, T, "fetched")
    assert consume("bob") == (b"value", None)


def test_a_subscribed_consumer_needs_read_on_its_group(acls: AclBroker) -> None:
    """A confluent-kafka consumer in a group (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
    OffsetFetch, OffsetCommit) is refused without READ on the group and served with it."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    acls.allow("User:admin", AclOperation.ALL, T, "grouped")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(acls.confluent_config("admin"))
    admin.create_topics([NewTopic("grouped", 1, 1)])["grouped"].result(15)
    assert _produce(acls, "admin", "grouped") == "ok"
    acls.allow("User:alice", AclOperation.READ, T, "grouped")

    def subscribe(user: str) -> tuple[bytes | None, int | None]:
        consumer = Consumer({**acls.confluent_config(user), "group.id": "subscribers",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.subscribe(["grouped"])
            message = _first_message(consumer, 20)
            if message is None or message.error():
                return None, message.error().code() if message is not None else None
            consumer.commit(message, asynchronous=False)
            [committed] = consumer.committed([TopicPartition("grouped", 0)], timeout=10)
            assert committed.offset == message.offset() + 1
            return message.value(), None
        finally:
            consumer.close()

    assert subscribe("alice") == (None, KafkaError.GROUP_AUTHORIZATION_FAILED)
    acls.allow("User:alice", AclOperation.READ, ResourceType.GROUP, "subscribers")
    assert subscribe("alice") == (b"value", None)


def _first_message(consumer: Any, seconds: float) -> Any:
    """The consumer's first message or error within ``seconds``; None if nothing came."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            return message
    return None


def test_no_authorizer_reports_every_operation() -> None:
    from client.connection import BrokerConnection
    from pytest_pafka.broker_process import BrokerProcess

    with BrokerProcess() as broker, BrokerConnection(broker.host, broker.port) as client:
        response = client.request(MetadataRequest(topics=None, include_cluster_authorized_operations=True), version=10)
        assert isinstance(response, MetadataResponse)
        assert response.cluster_authorized_operations not in (0, AUTHORIZED_OPERATIONS_OMITTED)
