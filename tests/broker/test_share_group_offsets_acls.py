"""Describe/Alter/DeleteShareGroupOffsets over the wire with the ACL authorizer, as Kafka's KafkaApis checks them:
DESCRIBE on the group and on each named topic to describe, READ on the group and the topics to alter, DELETE on the
group and READ on the topics to delete."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import alter_share_group_offsets as alter
from protocol.messages import delete_share_group_offsets as delete
from protocol.messages import describe_share_group_offsets as describe
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from pytest_pafka.plugin import BrokerFactory
from testing.share_groups import assigned_partitions, until_assigned
from tests.broker.acl_helpers import AclBroker, acl_broker_process

# The module's broker is a process of its own (acl_broker_process, not a plugin fixture).
pytestmark = pytest.mark.process

G, T = ResourceType.GROUP, ResourceType.TOPIC


@pytest.fixture(scope="module")
def acls(pafka_module_broker_factory: BrokerFactory) -> AclBroker:
    broker, sasl = acl_broker_process(pafka_module_broker_factory,
                                      "group.coordinator.rebalance.protocols=classic,consumer,share")
    setup = AclBroker(broker, sasl).wait_ready()
    with setup.connect("admin") as admin:
        created = admin.request(CreateTopicsRequest(topics=[
            CreatableTopic(name=t, num_partitions=2, replication_factor=1) for t in ("seen", "hidden")],
            timeout_ms=10_000), version=5)
        found = admin.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["any"]), version=4)
    assert isinstance(created, CreateTopicsResponse) and [t.error_code for t in created.topics] == [0, 0]
    assert isinstance(found, FindCoordinatorResponse)  # creates __consumer_offsets
    return setup


def _heartbeat(acls: AclBroker, user: str, epoch: int, topics: list[str] | None = None
               ) -> ShareGroupHeartbeatResponse:
    with acls.connect(user) as client:
        response = client.request(ShareGroupHeartbeatRequest(
            group_id="og", member_id=f"{user}-member", member_epoch=epoch, subscribed_topic_names=topics), version=1)
    assert isinstance(response, ShareGroupHeartbeatResponse)
    return response


def _request(acls: AclBroker, user: str, request: Any, version: int) -> Any:
    with acls.connect(user) as client:
        return client.request(request, version=version)


def _describe(acls: AclBroker, user: str, topics: list[str] | None) -> Any:
    wanted = None if topics is None else [describe.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=[0])
                                          for t in topics]
    return _request(acls, user, describe.DescribeShareGroupOffsetsRequest(groups=[
        describe.DescribeShareGroupOffsetsRequestGroup(group_id="og", topics=wanted)]), 1).groups[0]


def _alter(acls: AclBroker, user: str, topics: list[str]) -> Any:
    return _request(acls, user, alter.AlterShareGroupOffsetsRequest(group_id="og", topics=[
        alter.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=[
            alter.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)]) for t in topics]), 0)


def _delete(acls: AclBroker, user: str, topics: list[str]) -> Any:
    return _request(acls, user, delete.DeleteShareGroupOffsetsRequest(group_id="og", topics=[
        delete.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]), 0)


def test_share_group_offsets_apis_check_the_group_and_topic_acls(acls: AclBroker) -> None:
    acls.allow("User:alice", AclOperation.READ, G, "og")
    acls.allow("User:alice", AclOperation.DESCRIBE, T, "seen")
    joined = _heartbeat(acls, "alice", 0, ["seen"])
    assert joined.error_code == ErrorCode.NO_ERROR
    member = until_assigned(lambda epoch: _heartbeat(acls, "alice", epoch), joined,
                            lambda r: assigned_partitions(r) == [[0, 1]], "alice assigned [[0, 1]]")
    assert _heartbeat(acls, "alice", -1).member_epoch == -1 and member.member_epoch > 0

    refused = _describe(acls, "bob", None)
    assert (refused.group_id, refused.error_code) == ("og", ErrorCode.GROUP_AUTHORIZATION_FAILED)
    described = _describe(acls, "alice", ["seen", "hidden"])  # READ on the group implies DESCRIBE
    assert {t.topic_name: [p.error_code for p in t.partitions] for t in described.topics} == {
        "seen": [ErrorCode.NO_ERROR], "hidden": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}
    assert [t.topic_name for t in _describe(acls, "alice", None).topics] == ["seen"]

    group_refused = _alter(acls, "bob", ["seen"])
    assert group_refused.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert [p.error_code for t in group_refused.responses for p in t.partitions] == [
        ErrorCode.GROUP_AUTHORIZATION_FAILED]
    topic_refused = _alter(acls, "alice", ["seen"])  # DESCRIBE on the topic is not READ
    assert topic_refused.error_code == 0
    assert [p.error_code for t in topic_refused.responses for p in t.partitions] == [
        ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    acls.allow("User:alice", AclOperation.READ, T, "seen")
    assert [p.error_code for t in _alter(acls, "alice", ["seen"]).responses for p in t.partitions] == [0]

    assert _delete(acls, "alice", ["seen"]).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    acls.allow("User:alice", AclOperation.DELETE, G, "og")
    deleted = _delete(acls, "alice", ["seen", "hidden"])
    assert deleted.error_code == 0
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        ("seen", 0), ("hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
