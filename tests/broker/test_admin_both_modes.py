"""The admin APIs answer the same on a lone broker and on a member of a three-broker cluster.

Every test runs once per mode and compares the broker's answers (error codes and messages on
the wire) with one expected answer, written once: a test passing in both modes shows both modes
answer identically. Only what must differ is left out (topic ids, throttle times, the count of
registered brokers in a message).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer

from protocol.errors import ErrorCode
from protocol.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.messages.delete_records import DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster
from pytest_pafka.zookeeper import ZooKeeperProcess
from testing.sockets import HasAddress, send_request

pytestmark = pytest.mark.slow

ZERO = uuid.UUID(int=0)
TOPIC_RESOURCE = 2
SET, DELETE = 0, 1
#: ConfigSource TOPIC_CONFIG: an override of the topic itself.
TOPIC_CONFIG_SOURCE = 1
TIMEOUT_MS = 20_000
BAD_RETENTION = "Invalid value later for configuration retention.ms: Not a number of type LONG"


@dataclass
class Target:
    """Where the admin requests go (any broker) and who leads a partition."""

    entry: HasAddress
    bootstrap: str
    cluster: Cluster | None = None

    def leader_of(self, topic: str, partition: int) -> HasAddress:
        if self.cluster is None:
            return self.entry
        state = self.cluster.partition_state(topic, partition)
        assert state is not None
        return self.cluster.broker(state["leader"])


@pytest.fixture(scope="module", params=["lone", "cluster"])
def target(request: pytest.FixtureRequest, zookeeper: ZooKeeperProcess) -> Iterator[Target]:
    """A lone broker, or broker 1 of ZooKeeper + three brokers: one per module and mode."""
    if request.param == "lone":
        with BrokerProcess() as broker:
            yield Target(broker, broker.bootstrap)
    else:
        with Cluster(3, zookeeper=zookeeper) as cluster:
            yield Target(cluster.broker(1), cluster.bootstrap, cluster)


# -- helpers --------------------------------------------------------------------------------------
def create(target: Target, *topics: CreatableTopic, validate_only: bool = False) -> list[tuple[Any, ...]]:
    response = send_request(target.entry, 19, 7, CreateTopicsRequest(
        topics=list(topics), timeout_ms=TIMEOUT_MS, validate_only=validate_only))
    return [(r.name, r.error_code, _registered(r.error_message), r.num_partitions, r.replication_factor,
             sorted((c.name, c.value) for c in r.configs or [] if c.config_source == TOPIC_CONFIG_SOURCE))
            for r in response.topics]


def _registered(message: str | None) -> str | None:
    """A message naming how many brokers are registered: the one thing the modes must differ in."""
    return None if message is None else re.sub(r"only \d+ broker\(s\)", "only N broker(s)", message)


def topic(name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None,
          assignments: dict[int, list[int]] | None = None) -> CreatableTopic:
    return CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf,
                          assignments=[CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                                       for p, b in (assignments or {}).items()],
                          configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])


def delete(target: Target, *entries: tuple[str | None, uuid.UUID]) -> list[tuple[Any, ...]]:
    response = send_request(target.entry, 20, 6, DeleteTopicsRequest(
        topics=[DeleteTopicState(name=n, topic_id=i) for n, i in entries], timeout_ms=TIMEOUT_MS))
    return sorted(((r.name, r.error_code, r.error_message) for r in response.responses), key=repr)


def topic_id(target: Target, name: str) -> uuid.UUID:
    (result,) = send_request(target.entry, 19, 7, CreateTopicsRequest(
        topics=[topic(name)], timeout_ms=TIMEOUT_MS, validate_only=False)).topics
    assert result.error_code == ErrorCode.NO_ERROR, result.error_message
    return uuid.UUID(str(result.topic_id))


def grow(target: Target, name: str, count: int, assignments: list[list[int]] | None = None) -> tuple[Any, ...]:
    wanted = None if assignments is None else [CreatePartitionsAssignment(broker_ids=b) for b in assignments]
    (result,) = send_request(target.entry, 37, 3, CreatePartitionsRequest(
        topics=[CreatePartitionsTopic(name=name, count=count, assignments=wanted)], timeout_ms=TIMEOUT_MS,
        validate_only=False)).results
    return result.error_code, result.error_message


def describe_overrides(target: Target, name: str) -> tuple[Any, ...]:
    (result,) = send_request(target.entry, 32, 4, DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=name,
                                           configuration_keys=None)],
        include_synonyms=False, include_documentation=False)).results
    overrides = sorted((c.name, c.value) for c in result.configs if c.config_source == TOPIC_CONFIG_SOURCE)
    return result.error_code, result.error_message, overrides


def alter(target: Target, name: str, key: str, value: str) -> tuple[Any, ...]:
    (result,) = send_request(target.entry, 44, 1, IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=name, configs=[
            AlterableConfig(name=key, config_operation=SET, value=value)])],
        validate_only=False)).responses
    return result.error_code, result.error_message


def delete_records(target: Target, name: str, partition: int, offset: int) -> tuple[int, int]:
    (result,) = send_request(target.leader_of(name, 0), 21, 2, DeleteRecordsRequest(
        topics=[DeleteRecordsTopic(name=name, partitions=[
            DeleteRecordsPartition(partition_index=partition, offset=offset)])], timeout_ms=TIMEOUT_MS)).topics
    (answer,) = result.partitions
    return answer.error_code, answer.low_watermark


# -- CreateTopics ---------------------------------------------------------------------------------
def test_create_topics_good_and_bad(target: Target) -> None:
    answers = create(
        target, topic("ct-good", 2, 1, {"retention.ms": "60000"}), topic("ct-dup"), topic("ct-dup"),
        topic("ct-rf0", 1, 0), topic("ct-rf9", 1, 9), topic("ct-p0", 0, 1),
        topic("ct-badcfg", 1, 1, {"retention.ms": "soon"}), topic("ct-unknowncfg", 1, 1, {"no.such": "1"}),
        topic("bad/name"), topic("ct-assign", -1, -1, {}, {0: [99]}))
    assert answers == [
        ("ct-good", 0, "", 2, 1, [("retention.ms", "60000")]),
        ("ct-dup", ErrorCode.INVALID_REQUEST, "Create topics request from client contains duplicate topic names.",
         -1, -1, []),
        ("ct-dup", ErrorCode.INVALID_REQUEST, "Create topics request from client contains duplicate topic names.",
         -1, -1, []),
        ("ct-rf0", ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.", -1, -1, []),
        ("ct-rf9", ErrorCode.INVALID_REPLICATION_FACTOR,
         ("Unable to replicate the partition 9 time(s): The target replication factor of 9 cannot be reached "
          "because only N broker(s) are registered."), -1, -1, []),
        ("ct-p0", ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.", -1, -1, []),
        ("ct-badcfg", ErrorCode.INVALID_CONFIG, ("Invalid value soon for configuration retention.ms: Not a number of "
                                                  "type LONG"), -1, -1, []),
        ("ct-unknowncfg", ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such", -1, -1, []),
        ("bad/name", ErrorCode.INVALID_TOPIC, ("Topic name \"bad/name\" is illegal, it contains a character "
                                               "other than ASCII alphanumerics, '.', '_' and '-'"), -1, -1, []),
        ("ct-assign", ErrorCode.INVALID_REPLICATION_ASSIGNMENT, "Unknown broker in the replica assignment.",
         -1, -1, []),
    ]


def test_create_topics_validate_only_and_already_exists(target: Target) -> None:
    assert create(target, topic("ct-validate", 3), validate_only=True) == [("ct-validate", 0, "", 3, 1, [])]
    assert create(target, topic("ct-validate", 3)) == [("ct-validate", 0, "", 3, 1, [])]
    assert create(target, topic("ct-validate", 3)) == [
        ("ct-validate", ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'ct-validate' already exists.", -1, -1, [])]
    assert create(target, topic("ct-validate", 3), validate_only=True) == [
        ("ct-validate", ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'ct-validate' already exists.", -1, -1, [])]


# -- DeleteTopics ---------------------------------------------------------------------------------
def test_delete_topics_by_name_and_by_id(target: Target) -> None:
    topic_id(target, "dt-by-name")
    by_id = topic_id(target, "dt-by-id")
    unknown = uuid.uuid4()
    assert delete(target, ("dt-by-name", ZERO), ("dt-none", ZERO), (None, by_id), (None, unknown)) == sorted([
        ("dt-by-name", 0, None),
        ("dt-none", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
        ("dt-by-id", 0, None),
        (None, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
    ], key=repr)
    # gone from the broker that answered: a second deletion finds neither
    assert delete(target, ("dt-by-name", ZERO)) == [
        ("dt-by-name", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]
    assert delete(target, (None, by_id)) == [
        (None, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")]


def test_delete_topics_malformed_entries(target: Target) -> None:
    kept = topic_id(target, "dt-kept")
    answers = delete(target, ("dt-kept", kept), (None, ZERO), ("dt-twice", ZERO), ("dt-twice", ZERO),
                     (None, kept), (None, kept))
    assert answers == sorted([
        ("dt-kept", ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        (None, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        ("dt-twice", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("dt-twice", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        (None, ErrorCode.INVALID_REQUEST, "Duplicate topic id."),
        (None, ErrorCode.INVALID_REQUEST, "Duplicate topic id."),
    ], key=repr)
    assert describe_overrides(target, "dt-kept")[0] == ErrorCode.NO_ERROR  # nothing was deleted


# -- CreatePartitions -----------------------------------------------------------------------------
def test_create_partitions_good_and_bad(target: Target) -> None:
    assert create(target, topic("cp-topic", 2))[0][1] == ErrorCode.NO_ERROR
    assert grow(target, "cp-topic", 3) == (0, None)
    assert grow(target, "cp-topic", 2) == (
        ErrorCode.INVALID_PARTITIONS, "The topic cp-topic currently has 3 partition(s); 2 would not be an increase.")
    assert grow(target, "cp-topic", 3) == (ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s).")
    assert grow(target, "cp-none", 4) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'cp-none' does not exist.")
    assert grow(target, "cp-topic", 4, [[99], [99]]) == (
        ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
        "Attempted to add 1 additional partition(s), but only 2 assignment(s) were specified.")
    assert grow(target, "cp-topic", 4, [[99]]) == (
        ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
        "The manual partition assignment includes broker 99, but no such broker is registered.")


# -- DescribeConfigs and IncrementalAlterConfigs --------------------------------------------------
def test_describe_and_alter_topic_configs(target: Target) -> None:
    assert create(target, topic("cfg-topic", 1, 1, {"cleanup.policy": "compact"}))[0][1] == ErrorCode.NO_ERROR
    assert describe_overrides(target, "cfg-topic") == (0, None, [("cleanup.policy", "compact")])
    assert alter(target, "cfg-topic", "retention.ms", "120000") == (0, None)
    assert describe_overrides(target, "cfg-topic") == (
        0, None, [("cleanup.policy", "compact"), ("retention.ms", "120000")])
    assert alter(target, "cfg-topic", "retention.ms", "later") == (ErrorCode.INVALID_CONFIG, BAD_RETENTION)
    assert alter(target, "cfg-none", "retention.ms", "1") == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'cfg-none' does not exist.")
    assert describe_overrides(target, "cfg-none") == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'cfg-none' does not exist.", [])


# -- DeleteRecords --------------------------------------------------------------------------------
def test_delete_records(target: Target) -> None:
    assert create(target, topic("dr-topic"))[0][1] == ErrorCode.NO_ERROR
    producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all"})
    for i in range(5):
        producer.produce("dr-topic", value=b"%d" % i, partition=0)
    assert producer.flush(20) == 0
    assert delete_records(target, "dr-topic", 0, 3) == (0, 3)
    assert delete_records(target, "dr-topic", 0, 9) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert delete_records(target, "dr-topic", 7, 1) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
