"""Metadata's topic auto-creation, as clients trigger it.

Producers ask for auto-creation; librdkafka consumers (allow.auto.create.topics
false by default) do not; ``auto.create.topics.enable=false`` on the broker
wins over any client. An auto-created topic has ``num.partitions`` partitions.
"""

from __future__ import annotations

import time

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request

METADATA_KEY = 3
INVALID_TOPIC_EXCEPTION = 17


def _topics(bootstrap: str) -> dict[str, int]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}


def test_a_producer_creates_its_topic_with_num_partitions() -> None:
    from confluent_kafka import Producer

    with BrokerProcess("num.partitions=4") as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("made-by-producer", value=b"v")
        assert producer.flush(15) == 0
        assert _topics(broker.bootstrap).get("made-by-producer") == 4


def test_a_consumer_does_not_create_topics() -> None:
    from confluent_kafka import Consumer, TopicPartition

    with BrokerProcess() as broker:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pafka-tests-unused"})
        try:
            consumer.assign([TopicPartition("wanted-by-consumer", 0, 0)])
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                consumer.poll(0.2)
        finally:
            consumer.close()
        assert "wanted-by-consumer" not in _topics(broker.bootstrap)


def test_broker_setting_wins_over_the_client() -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    with BrokerProcess("auto.create.topics.enable=false") as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=1500)
        try:
            with pytest.raises(KafkaTimeoutError):
                producer.send("not-created", value=b"v").get(timeout=5)
        finally:
            producer.close(timeout=5)
        assert "not-created" not in _topics(broker.bootstrap)
        assert "Traceback" not in broker.log_text()


@pytest.mark.parametrize("version", [1, 4, 9, 12, 13])
def test_invalid_topic_names_are_refused(broker: BrokerProcess, version: int) -> None:
    # Clients check names themselves, so the request is sent raw.
    from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic

    names = ["bad name!", "x" * 250, ".."]
    request = MetadataRequest(topics=[MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=True,
                              include_topic_authorized_operations=False)
    response = send_request(broker, METADATA_KEY, version, request)
    assert {t.name: t.error_code for t in response.topics} == dict.fromkeys(names, INVALID_TOPIC_EXCEPTION)
    assert not set(names) & set(_topics(broker.bootstrap))
    assert "Traceback" not in broker.log_text()
