"""A broker with default settings serves both rebalance protocols, as Kafka 4 does.

confluent-kafka joins with ``group.protocol=consumer`` without any broker
override, and with its default ``group.protocol=classic`` it still forms a
classic group: its admin describes that group through ConsumerGroupDescribe,
which answers GROUP_ID_NOT_FOUND for a classic group, then DescribeGroups.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.messages.api_versions import ApiVersionsRequest, FinalizedFeatureKey
from pytest_pafka import BrokerProcess
from testing.sockets import send_request
from testing.topics import create_topic

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

PARTITIONS, RECORDS = 3, 30


def _produce(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(10) == 0


def _consume_all(broker: BrokerProcess, group: str, topic: str, settings: dict[str, Any]) -> set[int]:
    """Every record's value, read by one member of ``group`` that commits what it read, then closes."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **settings})
    seen: set[int] = set()
    try:
        consumer.subscribe([topic])
        for _ in range(600):
            message = consumer.poll(0.1)
            if message is not None:
                assert message.error() is None, message.error()
                seen.add(int(message.value()))
            if len(seen) == RECORDS:
                break
        assert sorted(tp.partition for tp in consumer.assignment()) == list(range(PARTITIONS))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


def _describe(broker: BrokerProcess, group: str) -> Any:
    admin = confluent_admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    return admin.describe_consumer_groups([group])[group].result(10)


def test_a_default_broker_advertises_the_consumer_protocol(pafka_module_broker: BrokerProcess) -> None:
    response = send_request(pafka_module_broker, 18, 4,
                            ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert (advertised[68], advertised[69]) == ((0, 1), (0, 1))
    assert response.finalized_features == [
        FinalizedFeatureKey(name=name, min_version_level=1, max_version_level=1)
        for name in ("group.version", "share.version")]


def test_group_protocol_consumer_needs_no_broker_override(pafka_module_broker: BrokerProcess) -> None:
    _produce(pafka_module_broker, "default-consumer")
    seen = _consume_all(pafka_module_broker, "g-consumer", "default-consumer", {"group.protocol": "consumer"})
    assert seen == set(range(RECORDS))
    described = _describe(pafka_module_broker, "g-consumer")
    assert (described.type, described.partition_assignor) == (confluent_kafka.ConsumerGroupType.CONSUMER, "uniform")


def test_the_classic_protocol_is_unaffected(pafka_module_broker: BrokerProcess) -> None:
    _produce(pafka_module_broker, "default-classic")
    assert _consume_all(pafka_module_broker, "g-classic", "default-classic", {}) == set(range(RECORDS))
    described = _describe(pafka_module_broker, "g-classic")
    assert (described.type, described.state) == (confluent_kafka.ConsumerGroupType.CLASSIC,
                                                 confluent_kafka.ConsumerGroupState.EMPTY)
    # The committed offsets are the classic group's: a second member starts after them.
    again = confluent_kafka.Consumer({"bootstrap.servers": pafka_module_broker.bootstrap, "group.id": "g-classic"})
    try:
        committed = again.committed([confluent_kafka.TopicPartition("default-classic", p) for p in range(PARTITIONS)],
                                    timeout=10)
    finally:
        again.close()
    assert [tp.offset for tp in committed] == [RECORDS // PARTITIONS] * PARTITIONS
