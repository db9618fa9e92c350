"""Consumer-protocol groups (KIP-848) on pafka's client: their type and ConsumerGroupDescribe.

``group_type`` asks the group's coordinator (ListGroups v5 lists each group with
its type: ``classic`` or ``consumer``); ``describe_consumer_group`` sends
ConsumerGroupDescribe, which describes what DescribeGroups cannot for such a
group: each member's epoch, current and target assignment, the group epoch and
the target assignment's epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from client.errors import check_error
from client.groups import GroupAdmin
from client.metadata import TopicPartition
from protocol.errors import ErrorCode
from protocol.messages import consumer_group_describe as _cgd
from protocol.messages import list_groups as _lg

__all__ = ["ConsumerGroupDescription", "ConsumerMemberDescription", "describe_consumer_group", "group_type"]

#: ListGroups' type of a consumer-protocol group.
CONSUMER_GROUP_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: list[TopicPartition]
    target_assignment: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: list[ConsumerMemberDescription] = field(default_factory=list)


def group_type(admin: GroupAdmin, group_id: str) -> str:
    """The group's type as its coordinator lists it (ListGroups v5); "" when the coordinator lists
    no type (before v5) or does not have the group."""
    conn = admin.coordinator(group_id)
    version = conn.version_for(_lg.API_KEY)
    if version < 5:
        return ""
    response = conn.request(_lg.ListGroupsRequest(states_filter=[], types_filter=[]), version=version)
    assert isinstance(response, _lg.ListGroupsResponse)
    check_error(response.error_code, api_name="ListGroups")
    return next((g.group_type for g in response.groups if g.group_id == group_id), "")


def _partitions(assignment: _cgd.Assignment) -> list[TopicPartition]:
    return sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


def describe_consumer_group(admin: GroupAdmin, group_id: str) -> ConsumerGroupDescription:
    """ConsumerGroupDescribe of one group, from its coordinator; a group it does not have is Dead."""
    response = admin._request(group_id, _cgd.ConsumerGroupDescribeRequest(group_ids=[group_id]),
                              lambda r: r.groups[0].error_code)
    assert isinstance(response, _cgd.ConsumerGroupDescribeResponse)
    g = response.groups[0]
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return ConsumerGroupDescription(group_id, "Dead", -1, -1, "")
    check_error(g.error_code, api_name="ConsumerGroupDescribe", message=g.error_message)
    members = [ConsumerMemberDescription(
        m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
        list(m.subscribed_topic_names), m.subscribed_topic_regex, _partitions(m.assignment),
        _partitions(m.target_assignment)) for m in g.members]
    return ConsumerGroupDescription(g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
                                    members)
