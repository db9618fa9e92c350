"""``pafka consumer-groups --describe`` of a consumer-protocol group, against a scripted coordinator.

The scripted broker answers ListGroups v5 with the group's type and
ConsumerGroupDescribe with two members; the tool's lines are Kafka 4's
kafka-consumer-groups.sh's (members with epochs and assignments, the state with
the group and assignment epochs, offsets with lag).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from client import KafkaClient, TopicPartition
from client.consumer_groups import describe_consumer_group, group_type
from client.groups import GroupAdmin
from protocol.api import DecodedRequest
from protocol.errors import ErrorCode
from protocol.messages import consumer_group_describe as cgd
from protocol.messages import find_coordinator as fc
from protocol.messages import list_groups as lg
from protocol.messages import list_offsets as lo
from protocol.messages import offset_fetch as of
from protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.primitives import Message
from tests.tools.fake_broker import FakeBroker, api_versions_response
from tools.cli import main
from tools.consumer_group_describe import assignment_text

T = uuid.UUID(int=7)


def _assignment(partitions: dict[str, list[int]]) -> cgd.Assignment:
    return cgd.Assignment(topic_partitions=[cgd.TopicPartitions(topic_id=T, topic_name=t, partitions=ps)
                                            for t, ps in partitions.items()])


def _described(request: DecodedRequest) -> Message:
    if request.body.group_ids != ["g"]:
        return cgd.ConsumerGroupDescribeResponse(groups=[cgd.DescribedGroup(
            group_id=request.body.group_ids[0], error_code=ErrorCode.GROUP_ID_NOT_FOUND)])
    members = [
        cgd.Member(member_id="m1", member_epoch=5, client_id="c1", client_host="/10.0.0.1",
                   subscribed_topic_names=["t"], assignment=_assignment({"t": [0, 1]}),
                   target_assignment=_assignment({"t": [0, 1]}), member_type=1),
        cgd.Member(member_id="m2", instance_id="i2", member_epoch=4, client_id="c2", client_host="/10.0.0.2",
                   subscribed_topic_names=["t"], assignment=_assignment({"t": [2]}),
                   target_assignment=_assignment({"t": [2, 3]}), member_type=1),
    ]
    return cgd.ConsumerGroupDescribeResponse(groups=[cgd.DescribedGroup(
        group_id="g", group_state="Reconciling", group_epoch=6, assignment_epoch=6, assignor_name="uniform",
        members=members)])


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    port = [0]

    def handler(request: DecodedRequest) -> Message:
        key = request.api_key
        if key == 18:
            return api_versions_response({18: (0, 4), 3: (0, 12), 10: (0, 6), 16: (0, 5), 69: (0, 1), 9: (0, 9),
                                          2: (0, 9)})
        if key == 3:
            return MetadataResponse(
                brokers=[MetadataResponseBroker(node_id=1, host="127.0.0.1", port=port[0])],
                topics=[MetadataResponseTopic(name="t", topic_id=T, partitions=[
                    MetadataResponsePartition(partition_index=p, leader_id=1, replica_nodes=[1], isr_nodes=[1])
                    for p in range(4)])])
        if key == 10:
            return fc.FindCoordinatorResponse(coordinators=[fc.Coordinator(key="g", node_id=1, host="127.0.0.1",
                                                                           port=port[0])])
        if key == 16:
            return lg.ListGroupsResponse(groups=[lg.ListedGroup(group_id="g", protocol_type="consumer",
                                                                group_state="Reconciling", group_type="consumer")])
        if key == 69:
            return _described(request)
        if key == 9:
            return of.OffsetFetchResponse(topics=[of.OffsetFetchResponseTopic(name="t", partitions=[
                of.OffsetFetchResponsePartition(partition_index=p, committed_offset=10 * p) for p in range(4)])])
        return lo.ListOffsetsResponse(topics=[lo.ListOffsetsTopicResponse(name="t", partitions=[
            lo.ListOffsetsPartitionResponse(partition_index=p.partition_index, offset=100)
            for p in request.body.topics[0].partitions])])

    with FakeBroker(handler) as broker:
        port[0] = broker.port
        yield broker


def test_the_client_reads_the_type_and_the_description(fake: FakeBroker) -> None:
    with KafkaClient(f"127.0.0.1:{fake.port}", timeout=5) as client:
        admin = GroupAdmin(client, timeout=5)
        assert group_type(admin, "g") == "consumer"
        assert group_type(admin, "other") == ""
        described = describe_consumer_group(admin, "g")
        assert (described.state, described.group_epoch, described.assignment_epoch) == ("Reconciling", 6, 6)
        assert [m.member_epoch for m in described.members] == [5, 4]
        assert described.members[1].target_assignment == [TopicPartition("t", 2), TopicPartition("t", 3)]
        assert describe_consumer_group(admin, "gone").state == "Dead"


def _describe(fake: FakeBroker, *options: str) -> list[str]:
    result = CliRunner().invoke(main, ["consumer-groups", "--bootstrap-server", f"127.0.0.1:{fake.port}",
                                       "--describe", "--group", "g", *options])
    assert result.exit_code == 0, result.output
    return [line.rstrip() for line in result.output.splitlines() if line.strip()]


def test_members_verbose(fake: FakeBroker) -> None:
    lines = _describe(fake, "--members", "--verbose")
    assert lines[0].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                                "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    assert lines[1].split() == ["g", "m1", "/10.0.0.1", "c1", "2", "5", "t:0,1", "6", "t:0,1"]
    assert lines[2].split() == ["g", "m2", "i2", "/10.0.0.2", "c2", "1", "4", "t:2", "6", "t:2,3"]


def test_members_and_state(fake: FakeBroker) -> None:
    assert _describe(fake, "--members")[0].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST",
                                                       "CLIENT-ID", "#PARTITIONS"]
    state = _describe(fake, "--state", "--verbose")
    assert state[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                                "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert state[1].split()[-5:] == ["uniform", "Reconciling", "6", "6", "2"]


def test_offsets_with_lag_and_owner(fake: FakeBroker) -> None:
    lines = _describe(fake)
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert lines[1].split() == ["g", "t", "0", "0", "100", "100", "m1", "/10.0.0.1", "c1"]
    assert lines[4].split() == ["g", "t", "3", "30", "100", "70", "-", "-", "-"]


def test_assignment_text() -> None:
    assert assignment_text([]) == "-"
    assert assignment_text([TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)]) == "a:0,2;b:1"
