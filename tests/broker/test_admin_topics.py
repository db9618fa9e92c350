"""DeleteTopics and CreatePartitions against a real broker, with kafka-python and confluent-kafka."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import NewPartitions, NewTopic
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    InvalidPartitionsError,
    TopicDeletionDisabledError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)

from protocol.errors import ErrorCode
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request


def _partition_dirs(broker: BrokerProcess, topic: str) -> list[str]:
    return sorted(p.name for p in Path(broker.data_dir).iterdir() if p.is_dir() and p.name.rsplit("-", 1)[0] == topic)


def _produce(broker: BrokerProcess, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    delivered = []
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=partition,
                         on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(10) == 0
    assert delivered == [None] * count


def _end_offsets(broker: BrokerProcess, topic: str, partitions: int) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        consumer.close()


# -- DeleteTopics -----------------------------------------------------------------------
def test_delete_topic_by_name_removes_dirs_and_metadata(broker, admin):
    admin.create_topics({"del-a": {"num_partitions": 2, "configs": {"retention.ms": "12345"}}})
    _produce(broker, "del-a", 5)
    assert _partition_dirs(broker, "del-a") == ["del-a-0", "del-a-1"]
    old_id = admin.describe_topics(["del-a"])[0]["topic_id"]

    result = admin.delete_topics(["del-a"])
    assert [t["error_code"] for t in result["topics"]] == [0]
    assert _partition_dirs(broker, "del-a") == []
    assert not [p for p in Path(broker.data_dir).iterdir() if p.name.endswith("-delete")]
    assert "del-a" not in admin.list_topics()

    # Recreated under the same name: a new id, empty logs, no old overrides.
    admin.create_topics({"del-a": {"num_partitions": 1}})
    assert admin.describe_topics(["del-a"])[0]["topic_id"] != old_id
    assert _end_offsets(broker, "del-a", 1) == {0: 0}
    from kafka.admin import ConfigResource, ConfigResourceType
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "del-a")], config_filter="all")
    assert configs["topic"]["del-a"]["retention.ms"]["value"] == "604800000"
    assert configs["topic"]["del-a"]["retention.ms"]["config_source"] == "DEFAULT_CONFIG"


def test_delete_topic_by_id_v6(broker, admin):
    admin.create_topics({"del-by-id": {"num_partitions": 1}})
    topic_id = admin.describe_topics(["del-by-id"])[0]["topic_id"]
    result = admin.delete_topics([uuid.UUID(str(topic_id))])
    assert result["topics"][0]["error_code"] == 0
    assert result["topics"][0]["name"] == "del-by-id"
    assert "del-by-id" not in admin.list_topics()


def test_delete_unknown_topic_name_and_id(admin):
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["no-such-topic"])
    with pytest.raises(UnknownTopicIdError):
        admin.delete_topics([uuid.uuid4()])


def test_delete_topics_wire_errors(broker):
    # Duplicates and name+id together are refused per topic, others still deleted.
    send_request(broker, 19, 7, _create_request("wire-del"))
    request = DeleteTopicsRequest(topics=[
        DeleteTopicState(name="wire-del", topic_id=uuid.UUID(int=0)),
        DeleteTopicState(name="x", topic_id=uuid.uuid4()),
        DeleteTopicState(name=None, topic_id=uuid.UUID(int=0)),
    ], timeout_ms=5000)
    response = send_request(broker, 20, 6, request)
    codes = [(r.name, r.error_code) for r in response.responses]
    assert codes == [("wire-del", ErrorCode.NO_ERROR), ("x", ErrorCode.INVALID_REQUEST),
                     (None, ErrorCode.INVALID_REQUEST)]
    dupes = send_request(broker, 20, 5, DeleteTopicsRequest(topic_names=["a1", "a1"], timeout_ms=5000))
    assert [r.error_code for r in dupes.responses] == [ErrorCode.INVALID_REQUEST] * 2


def _create_request(name: str, partitions: int = 1):
    from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest

    return CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
                               timeout_ms=5000)


def test_delete_topics_with_confluent(broker, cadmin):
    futures = cadmin.create_topics([NewTopic("del-c", 3, 1)])
    futures["del-c"].result(10)
    _produce(broker, "del-c", 3, partition=2)
    cadmin.delete_topics(["del-c"])["del-c"].result(10)
    assert _partition_dirs(broker, "del-c") == []
    with pytest.raises(KafkaException) as info:
        cadmin.delete_topics(["del-c"])["del-c"].result(10)
    assert info.value.args[0].code() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_topic_deletion_disabled():
    with BrokerProcess("delete.topic.enable=false") as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_topics({"kept": {"num_partitions": 1}})
            with pytest.raises(TopicDeletionDisabledError):
                admin.delete_topics(["kept"])
            assert "kept" in admin.list_topics()
            assert _partition_dirs(broker, "kept") == ["kept-0"]
            for version in (0, 2):
                old = send_request(broker, 20, version, DeleteTopicsRequest(topic_names=["kept"], timeout_ms=1000))
                assert old.responses[0].error_code == ErrorCode.INVALID_REQUEST  # v0-2 clients know no code 73
        finally:
            admin.close()


def test_deleted_topic_stays_deleted_after_restart():
    with BrokerProcess() as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_topics({"gone": {"num_partitions": 2}, "stays": {"num_partitions": 1}})
            admin.delete_topics(["gone"])
        finally:
            admin.close()
        broker.restart(signal.SIGKILL)  # each deletion is durable when answered
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            topics = admin.list_topics()
            assert "gone" not in topics and "stays" in topics
            assert _partition_dirs(broker, "gone") == []
        finally:
            admin.close()


# -- CreatePartitions ---------------------------------------------------------------------
def test_create_partitions_hosts_new_partitions_at_once(broker, admin):
    admin.create_topics({"grow": {"num_partitions": 1}})
    admin.create_partitions({"grow": 3})
    described = admin.describe_topics(["grow"])[0]
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
    assert _partition_dirs(broker, "grow") == ["grow-0", "grow-1", "grow-2"]
    _produce(broker, "grow", 4, partition=2)
    assert _end_offsets(broker, "grow", 3) == {0: 0, 1: 0, 2: 4}


def test_create_partitions_validate_only_changes_nothing(broker, admin):
    admin.create_topics({"grow-v": {"num_partitions": 2}})
    response = admin.create_partitions({"grow-v": 5}, validate_only=True)
    assert response.results[0].error_code == 0
    assert len(admin.describe_topics(["grow-v"])[0]["partitions"]) == 2
    assert _partition_dirs(broker, "grow-v") == ["grow-v-0", "grow-v-1"]


def test_create_partitions_must_increase(admin):
    admin.create_topics({"grow-x": {"num_partitions": 3}})
    with pytest.raises(InvalidPartitionsError, match="would not be an increase"):
        admin.create_partitions({"grow-x": 2})
    with pytest.raises(InvalidPartitionsError, match="already has 3"):
        admin.create_partitions({"grow-x": 3})
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"grow-x": 1}, validate_only=True)
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.create_partitions({"grow-none": 4})
    assert len(admin.describe_topics(["grow-x"])[0]["partitions"]) == 3


def test_create_partitions_with_assignment(admin):
    admin.create_topics({"grow-a": {"num_partitions": 1}})
    admin.create_partitions({"grow-a": {"count": 3, "assignments": [[0], [0]]}})
    assert len(admin.describe_topics(["grow-a"])[0]["partitions"]) == 3
    response = admin.create_partitions({"grow-a": {"count": 4, "assignments": [[7]]}}, raise_errors=False)
    assert response.results[0].error_code == ErrorCode.INVALID_REPLICATION_ASSIGNMENT


def test_create_partitions_with_confluent(broker, cadmin):
    cadmin.create_topics([NewTopic("grow-c", 1, 1)])["grow-c"].result(10)
    cadmin.create_partitions([NewPartitions("grow-c", 4)])["grow-c"].result(10)
    _produce(broker, "grow-c", 2, partition=3)
    assert _end_offsets(broker, "grow-c", 4)[3] == 2
    with pytest.raises(KafkaException) as info:
        cadmin.create_partitions([NewPartitions("grow-c", 2)])["grow-c"].result(10)
    assert info.value.args[0].code() == ErrorCode.INVALID_PARTITIONS
    cadmin.create_partitions([NewPartitions("grow-c", 9)], validate_only=True)["grow-c"].result(10)
    assert len(_end_offsets(broker, "grow-c", 4)) == 4
    assert _partition_dirs(broker, "grow-c") == [f"grow-c-{i}" for i in range(4)]


def test_deleting_a_cleaned_topic_forgets_its_cleaner_checkpoint():
    """A recreated topic must not inherit the old one's cleaned offset (same dir names)."""
    with BrokerProcess("log.cleaner.backoff.ms=50") as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_topics({"cleaned": {"num_partitions": 1, "configs": {
                "cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01"}}})
            producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
            for i in range(30):
                producer.produce("cleaned", key=b"k%d" % (i % 3), value=b"x" * 100_000, partition=0)
            assert producer.flush(10) == 0
            checkpoint = Path(broker.data_dir) / "cleaner-offset-checkpoint"
            wait_until(lambda: checkpoint.exists() and "cleaned 0 " in checkpoint.read_text(), 15,
                       "the cleaner never cleaned the topic")
            admin.delete_topics(["cleaned"])
            assert "cleaned 0 " not in checkpoint.read_text()
            admin.create_topics({"cleaned": {"num_partitions": 1}})
            assert _end_offsets(broker, "cleaned", 1) == {0: 0}
        finally:
            admin.close()
