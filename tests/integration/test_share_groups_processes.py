"""Share groups (KIP-932) over the wire on a real broker process, behind their switch.

Raw ShareGroupHeartbeat (76) and ShareGroupDescribe (77) v1 with pafka's codecs:
members join a share group and get every partition of the subscribed topic (one
partition shared by every member), the group is described and listed (ListGroups
type ``share``), DescribeGroups answers it as no classic group, the group and its
members' epochs and assignments come back after a restart (their records in
``__consumer_offsets``), and an empty group is deleted. confluent-kafka's share
consumer (librdkafka's preview) joins through the same heartbeat, gets its
partitions, and leaves when closed.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages import api_versions as av
from protocol.messages import delete_groups as dg
from protocol.messages import describe_groups as dsg
from protocol.messages import find_coordinator as fc
from protocol.messages import list_groups as lg
from protocol.messages import share_group_describe as sgd
from protocol.messages import share_group_heartbeat as sgh
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.share_groups import until_assigned
from testing.sockets import send_request
from testing.topics import create_topic

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.pafka_broker_config("group.coordinator.rebalance.protocols=classic,share")


def _heartbeat(broker: BrokerProcess, member_id: str, epoch: int, topics: list[str] | None = None,
               group: str = "sg") -> Any:
    return send_request(broker, 76, 1, sgh.ShareGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, subscribed_topic_names=topics))


def _describe(broker: BrokerProcess, group: str = "sg") -> Any:
    return send_request(broker, 77, 1, sgd.ShareGroupDescribeRequest(group_ids=[group])).groups[0]


def _assigned(response: Any) -> dict[uuid.UUID, list[int]]:
    assert response.assignment is not None
    return {tp.topic_id: tp.partitions for tp in response.assignment.topic_partitions}


def _until_assigned(broker: BrokerProcess, member_id: str, joined: Any, sizes: list[int]) -> Any:
    return until_assigned(lambda epoch: _heartbeat(broker, member_id, epoch), joined,
                          lambda r: sorted(len(p) for p in _assigned(r).values()) == sizes,
                          f"{member_id} assigned partitions {sizes}")


def test_share_group_joins_is_described_listed_reloaded_and_deleted(pafka_broker: BrokerProcess) -> None:
    keys = {k.api_key: (k.min_version, k.max_version)
            for k in send_request(pafka_broker, 18, 3, av.ApiVersionsRequest(
                client_software_name="pafka-tests", client_software_version="1")).api_keys}
    assert keys[76] == (1, 1) and keys[77] == (1, 1)
    create_topic(pafka_broker.bootstrap, "one", 1)
    create_topic(pafka_broker.bootstrap, "six", 6)
    wait_until(lambda: send_request(pafka_broker, 10, 1, fc.FindCoordinatorRequest(key="sg")), 30, "a coordinator",
               until=lambda r: r.error_code == ErrorCode.NO_ERROR)
    a = wait_until(lambda: _heartbeat(pafka_broker, "member-a", 0, ["one", "six"]), 30, "a loaded coordinator",
                   until=lambda r: r.error_code == ErrorCode.NO_ERROR)
    assert (a.member_id, a.member_epoch) == ("member-a", 1)
    # A partition is assigned once its share state is initialized through the share coordinator.
    a = _until_assigned(pafka_broker, "member-a", a, [1, 6])
    b = _heartbeat(pafka_broker, "member-b", 0, ["one"])
    assert b.error_code == ErrorCode.NO_ERROR
    b = _until_assigned(pafka_broker, "member-b", b, [1])
    assert list(_assigned(b).values()) == [[0]]
    a = _heartbeat(pafka_broker, "member-a", a.member_epoch)
    assert a.error_code == ErrorCode.NO_ERROR and a.member_epoch == b.member_epoch
    unknown = _heartbeat(pafka_broker, "member-z", 3)
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.UNKNOWN_MEMBER_ID,
                                                           "Member member-z is not a member of group sg.")

    described = _describe(pafka_broker)
    assert (described.error_code, described.group_state, described.assignor_name) == (0, "Stable", "simple")
    members = {m.member_id: m for m in described.members}
    assert set(members) == {"member-a", "member-b"}
    assert [tp.topic_name for tp in members["member-b"].assignment.topic_partitions] == ["one"]
    assert sorted(members["member-a"].subscribed_topic_names) == ["one", "six"]
    missing = _describe(pafka_broker, "nope")
    assert (missing.error_code, missing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")
    listed = send_request(pafka_broker, 16, 5, lg.ListGroupsRequest(types_filter=["share"])).groups
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed] == [
        ("sg", "share", "share", "Stable")]
    classic = send_request(pafka_broker, 15, 6, dsg.DescribeGroupsRequest(groups=["sg"])).groups[0]
    assert (classic.error_code, classic.group_state) == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead")

    pafka_broker.restart()
    again = wait_until(lambda: _heartbeat(pafka_broker, "member-a", a.member_epoch), 60, "the reloaded group",
                       until=lambda r: r.error_code == ErrorCode.NO_ERROR)
    assert again.member_epoch == a.member_epoch
    assert {m.member_id: m.member_epoch for m in _describe(pafka_broker).members} == {
        "member-a": a.member_epoch, "member-b": b.member_epoch}

    assert send_request(pafka_broker, 42, 2, dg.DeleteGroupsRequest(groups_names=["sg"])).results[0].error_code == (
        ErrorCode.NON_EMPTY_GROUP)
    for member in ("member-a", "member-b"):
        assert _heartbeat(pafka_broker, member, -1).member_epoch == -1
    assert _describe(pafka_broker).group_state == "Empty"
    assert send_request(pafka_broker, 42, 2, dg.DeleteGroupsRequest(groups_names=["sg"])).results[0].error_code == 0
    assert _describe(pafka_broker).error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_confluent_share_consumers_join_get_the_shared_partition_and_leave(pafka_broker: BrokerProcess) -> None:
    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("this confluent-kafka has no share consumer")
    create_topic(pafka_broker.bootstrap, "queue", 1)
    consumers = [confluent_kafka.ShareConsumer({"bootstrap.servers": pafka_broker.bootstrap, "group.id": "q",
                                                "client.id": f"share-{i}"}) for i in range(2)]
    try:
        for consumer in consumers:
            consumer.subscribe(["queue"])

        def stable() -> Any:
            for consumer in consumers:
                consumer.poll(0.2)
            return _describe(pafka_broker, "q")

        # Both members have the one partition, at the group's assignment epoch.
        described = wait_until(stable, 60, "both share consumers in the group with the partition", until=lambda d: (
            d.error_code == 0 and len(d.members) == 2
            and all(m.member_epoch == d.assignment_epoch for m in d.members)
            and all([tp.partitions for tp in m.assignment.topic_partitions] == [[0]] for m in d.members)))
        assert sorted(m.client_id for m in described.members) == ["share-0", "share-1"]
        assert all(m.subscribed_topic_names == ["queue"] for m in described.members)
        listed = send_request(pafka_broker, 16, 5, lg.ListGroupsRequest(types_filter=["share"])).groups
        assert [(g.group_id, g.group_state) for g in listed] == [("q", "Stable")]
    finally:
        for consumer in consumers:
            consumer.close()
    # close() leaves the group (member epoch -1).
    wait_until(lambda: _describe(pafka_broker, "q"), 15, "the group empty once both closed",
               until=lambda d: d.group_state == "Empty")
