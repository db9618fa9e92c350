"""ShareGroupHeartbeat and ShareGroupDescribe over the wire with the ACL authorizer: READ on the group and
DESCRIBE on every subscribed topic to heartbeat, DESCRIBE on the group to describe it."""

from __future__ import annotations

import pytest

from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from pytest_pafka.plugin import BrokerFactory
from testing.share_groups import assigned_partitions, until_assigned
from tests.broker.acl_helpers import AclBroker, acl_broker_process

# The module's broker is a process of its own (acl_broker_process, not a plugin fixture).
pytestmark = pytest.mark.process

G, T = ResourceType.GROUP, ResourceType.TOPIC


@pytest.fixture(scope="module")
def acls(pafka_module_broker_factory: BrokerFactory) -> AclBroker:
    broker, sasl = acl_broker_process(pafka_module_broker_factory, "group.coordinator.rebalance.protocols=classic,share")
    setup = AclBroker(broker, sasl).wait_ready()
    with setup.connect("admin") as admin:
        created = admin.request(CreateTopicsRequest(topics=[
            CreatableTopic(name=t, num_partitions=2, replication_factor=1) for t in ("seen", "hidden")],
            timeout_ms=10_000), version=5)
        found = admin.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["any"]), version=4)
    assert isinstance(created, CreateTopicsResponse) and [t.error_code for t in created.topics] == [0, 0]
    assert isinstance(found, FindCoordinatorResponse)  # creates __consumer_offsets
    return setup


def _join(acls: AclBroker, user: str, group: str, topics: list[str] | None, epoch: int = 0
          ) -> ShareGroupHeartbeatResponse:
    with acls.connect(user) as client:
        response = client.request(ShareGroupHeartbeatRequest(
            group_id=group, member_id=f"{user}-member", member_epoch=epoch, subscribed_topic_names=topics), version=1)
    assert isinstance(response, ShareGroupHeartbeatResponse)
    return response


def _until_assigned(acls: AclBroker, user: str, group: str, joined: ShareGroupHeartbeatResponse,
                    partitions: list[list[int]]) -> ShareGroupHeartbeatResponse:
    answer: ShareGroupHeartbeatResponse = until_assigned(
        lambda epoch: _join(acls, user, group, None, epoch), joined,
        lambda r: assigned_partitions(r) == partitions, f"{user} assigned {partitions}")
    return answer


def test_heartbeat_needs_read_on_the_group_and_describe_on_its_topics(acls: AclBroker) -> None:
    assert _join(acls, "bob", "sg", ["seen"]).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    acls.allow("User:alice", AclOperation.READ, G, "sg")
    acls.allow("User:alice", AclOperation.DESCRIBE, T, "seen")
    assert _join(acls, "alice", "sg", ["seen", "hidden"]).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    joined = _join(acls, "alice", "sg", ["seen"])
    assert (joined.error_code, joined.member_id, joined.member_epoch, joined.heartbeat_interval_ms) == (
        ErrorCode.NO_ERROR, "alice-member", 1, 5000)
    _until_assigned(acls, "alice", "sg", joined, [[0, 1]])


def test_describe_needs_describe_on_the_group(acls: AclBroker) -> None:
    acls.allow("User:carol", AclOperation.READ, G, "described")
    acls.allow("User:carol", AclOperation.DESCRIBE, T, "seen")
    joined = _join(acls, "carol", "described", ["seen"])
    assert joined.error_code == ErrorCode.NO_ERROR
    assigned = _until_assigned(acls, "carol", "described", joined, [[0, 1]])
    with acls.connect("carol") as client:
        response = client.request(ShareGroupDescribeRequest(group_ids=["described", "absent"]), version=1)
    assert isinstance(response, ShareGroupDescribeResponse)
    described = {g.group_id: g for g in response.groups}
    assert described["described"].error_code == ErrorCode.NO_ERROR  # READ implies DESCRIBE
    assert described["described"].group_state == "Stable"
    member = described["described"].members[0]
    assert (member.member_id, member.member_epoch) == ("carol-member", assigned.member_epoch)
    assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [("seen", [0, 1])]
    assert described["absent"].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
