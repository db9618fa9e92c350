"""Committed offsets against real broker processes: generations, metadata, restarts, admin APIs."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from protocol.consumer_protocol import encode_assignment, encode_subscription
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request
from testing.topics import create_topic
from tests.integration.group_helpers import admin_client, poll_until_assigned

TOPIC = "offsets-topic"


pytestmark = pytest.mark.pafka_broker_config("group.initial.rebalance.delay.ms=0", "log.flush.interval.messages=1")


@pytest.fixture
def broker(pafka_broker: BrokerProcess) -> BrokerProcess:
    """A broker of each test's own, with the topic its tests use."""
    create_topic(pafka_broker.bootstrap, TOPIC, 3)
    return pafka_broker


def _join(broker: BrokerProcess, group: str, member_id: str = "") -> Any:
    return send_request(broker, 11, 5, JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
        protocol_type="consumer", protocols=[JoinGroupRequestProtocol(name="range",
                                                                      metadata=encode_subscription([TOPIC]))]))


def _commit(broker: BrokerProcess, group: str, member_id: str, generation: int, offset: int) -> int:
    response = send_request(broker, 8, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, topics=[
            OffsetCommitRequestTopic(name=TOPIC, partitions=[
                OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_metadata="m")])]))
    return response.topics[0].partitions[0].error_code


def test_commit_with_a_stale_generation_gets_illegal_generation(broker: BrokerProcess) -> None:
    group = "stale"
    send_request(broker, 10, 3, FindCoordinatorRequest(key=group, key_type=0))
    first = _join(broker, group)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    member_id = first.member_id
    joined = _join(broker, group, member_id)
    assert joined.error_code == ErrorCode.NO_ERROR and joined.generation_id == 1
    assignment = encode_assignment({TOPIC: [0, 1, 2]})
    synced = send_request(broker, 14, 3, SyncGroupRequest(
        group_id=group, generation_id=1, member_id=member_id,
        assignments=[SyncGroupRequestAssignment(member_id=member_id, assignment=assignment)]))
    assert synced.error_code == ErrorCode.NO_ERROR and synced.assignment == assignment
    assert _commit(broker, group, member_id, 1, 10) == ErrorCode.NO_ERROR
    # The leader rejoins: a new generation; commits of the old one are refused.
    rejoined = _join(broker, group, member_id)
    assert rejoined.generation_id == 2
    assert _commit(broker, group, member_id, 1, 11) == ErrorCode.ILLEGAL_GENERATION
    assert _commit(broker, group, "someone-else", 2, 11) == ErrorCode.UNKNOWN_MEMBER_ID
    assert _commit(broker, group, member_id, 2, 11) == ErrorCode.REBALANCE_IN_PROGRESS  # not synced yet
    send_request(broker, 14, 3, SyncGroupRequest(
        group_id=group, generation_id=2, member_id=member_id,
        assignments=[SyncGroupRequestAssignment(member_id=member_id, assignment=assignment)]))
    assert _commit(broker, group, member_id, 2, 12) == ErrorCode.NO_ERROR


def _committed(broker: BrokerProcess, group: str) -> dict[int, tuple[int, str]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        out = {}
        for p in range(3):
            om = consumer.committed(TopicPartition(TOPIC, p), metadata=True)
            if om is not None:
                out[p] = (om.offset, om.metadata)
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_commit_metadata_round_trips_and_survives_a_restart(broker: BrokerProcess, stop: signal.Signals) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KTopicPartition

    group = f"durable-{stop.name}"
    committer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        committer.commit({KTopicPartition(TOPIC, 0): OffsetAndMetadata(5, "κafka metadata", -1),
                          KTopicPartition(TOPIC, 1): OffsetAndMetadata(7, "", -1)})
    finally:
        committer.close()
    expected = {0: (5, "κafka metadata"), 1: (7, "")}
    assert _committed(broker, group) == expected
    # librdkafka reads the same metadata back.
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        got = reader.committed([TopicPartition(TOPIC, 0)], timeout=10)[0]
        assert (got.offset, got.metadata) == (5, "κafka metadata")
    finally:
        reader.close()
    broker.restart(stop)
    assert _committed(broker, group) == expected


def test_list_describe_and_delete_groups(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupState
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    admin = admin_client(broker)
    active = KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id="active", enable_auto_commit=False)
    idle = None
    try:
        poll_until_assigned(active)
        # Started only now, once the active member is assigned (poll_until_assigned avoids kafka-python
        # 3.0.12's stranded join: see fetch_subscription_metadata).
        idle = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="idle", enable_auto_commit=False)
        idle.commit({KTopicPartition(TOPIC, 0): OffsetAndMetadata(1, "", -1),
                     KTopicPartition(TOPIC, 1): OffsetAndMetadata(2, "", -1)})
        listed = admin.list_consumer_groups().result(10)
        states = {g.group_id: g.state for g in listed.valid}
        assert states == {"active": ConsumerGroupState.STABLE, "idle": ConsumerGroupState.EMPTY}
        stable_only = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(10)
        assert [g.group_id for g in stable_only.valid] == ["active"]

        description = admin.describe_consumer_groups(["active"])["active"].result(10)
        assert description.state == ConsumerGroupState.STABLE and description.partition_assignor == "range"
        (member,) = description.members
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1, 2}
        assert member.host == "/127.0.0.1"

        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups(["active"])["active"].result(10)
        # OffsetDelete (kafka-python's admin): a topic the active group consumes is refused.
        active.commit({KTopicPartition(TOPIC, 2): OffsetAndMetadata(3, "", -1)})
        kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            result = kadmin.delete_group_offsets("active", [KTopicPartition(TOPIC, 2)])
            assert result[KTopicPartition(TOPIC, 2)].__name__ == "GroupSubscribedToTopicError"
            result = kadmin.delete_group_offsets("idle", [KTopicPartition(TOPIC, 0)])
            assert result[KTopicPartition(TOPIC, 0)].__name__ == "NoError"
        finally:
            kadmin.close()
        assert _committed(broker, "idle") == {1: (2, "")}
        admin.delete_consumer_groups(["idle"])["idle"].result(10)
        assert [g.group_id for g in admin.list_consumer_groups().result(10).valid] == ["active"]
        with pytest.raises(Exception, match="GROUP_ID_NOT_FOUND"):
            admin.delete_consumer_groups(["idle"])["idle"].result(10)
    finally:
        active.close()
        if idle is not None:
            idle.close()
    broker.restart()
    assert _committed(broker, "idle") == {}  # the tombstones survived the restart
    assert [g.group_id for g in admin_client(broker).list_consumer_groups().result(10).valid] == ["active"]


def test_metadata_beyond_offset_metadata_max_bytes_is_refused(broker: BrokerProcess) -> None:
    def commit(metadata: str) -> int:
        response = send_request(broker, 8, 8, OffsetCommitRequest(group_id="big-metadata", topics=[
            OffsetCommitRequestTopic(name=TOPIC, partitions=[OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_metadata=metadata)])]))
        return response.topics[0].partitions[0].error_code

    send_request(broker, 10, 3, FindCoordinatorRequest(key="big-metadata", key_type=0))
    assert commit("x" * 4097) == ErrorCode.OFFSET_METADATA_TOO_LARGE  # offset.metadata.max.bytes=4096
    assert commit("x" * 4096) == ErrorCode.NO_ERROR
    assert _committed(broker, "big-metadata") == {0: (1, "x" * 4096)}


def test_deleting_a_topic_removes_its_committed_offsets(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker.bootstrap, "short-lived", 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "outlived",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("short-lived", 0, 7)], asynchronous=False)
        assert consumer.committed([TopicPartition("short-lived", 0)], timeout=10)[0].offset == 7
        admin_client(broker).delete_topics(["short-lived"])["short-lived"].result(30)
        create_topic(broker.bootstrap, "short-lived", 1)
        # The re-created topic must not inherit the old position.
        assert consumer.committed([TopicPartition("short-lived", 0)], timeout=10)[0].offset < 0
    finally:
        consumer.close()
