"""ConsumerGroupDescribe (69): a consumer-protocol group's epochs, assignor and members with their
current and target assignments.

Served only when ``group.coordinator.rebalance.protocols`` lists ``consumer``
(``REBALANCE_PROTOCOL``). A group that is not a consumer group (absent, or
classic) is GROUP_ID_NOT_FOUND, as Kafka answers. v1 adds the member type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group
from broker.security.authorized_operations import AUTHORIZED_OPERATIONS_OMITTED, authorized_operations
from coordinator.group.consumer_group import Assignment, ConsumerGroupMember
from coordinator.group.consumer_group_requests import ConsumerGroupDescription
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    Assignment as WireAssignment,
)
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1
REBALANCE_PROTOCOL = "consumer"
#: ConsumerGroupDescribe v1's MemberType of a member that heartbeats with the consumer protocol, and of a
#: classic member of the group (JoinGroup, SyncGroup, Heartbeat).
CONSUMER_MEMBER_TYPE = 1
CLASSIC_MEMBER_TYPE = 0


def _assignment(broker: BrokerServices, assignment: Assignment) -> WireAssignment:
    topics = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0])):
        topic = broker.metadata.by_id(topic_id)
        if topic is not None and partitions:
            topics.append(TopicPartitions(topic_id=topic_id, topic_name=topic.name, partitions=sorted(partitions)))
    return WireAssignment(topic_partitions=topics)


def _member(broker: BrokerServices, member: ConsumerGroupMember, target: Assignment) -> Member:
    return Member(
        member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
        member_epoch=member.member_epoch, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names), subscribed_topic_regex=member.subscribed_topic_regex,
        assignment=_assignment(broker, member.assigned), target_assignment=_assignment(broker, target),
        member_type=CONSUMER_MEMBER_TYPE if member.classic is None else CLASSIC_MEMBER_TYPE)


def _described(broker: BrokerServices, description: ConsumerGroupDescription, ops: int) -> DescribedGroup:
    group = description.group
    if group is None:
        return DescribedGroup(error_code=description.error, error_message=description.error_message,
                              group_id=description.group_id, authorized_operations=ops)
    return DescribedGroup(
        group_id=group.group_id, group_state=str(group.state), group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=description.assignor_name,
        members=[_member(broker, m, group.target.get(m.member_id, {})) for m in group.members.values()],
        authorized_operations=ops)


def handle(ctx: RequestContext, broker: BrokerServices,
           request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    groups: list[DescribedGroup] = []
    allowed = []
    for group_id in request.group_ids:
        if authorize_group(ctx, broker, AclOperation.DESCRIBE, group_id):
            allowed.append(group_id)
        else:
            groups.append(DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id,
                                         authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
    for description in broker.group_coordinator.consumer_group_describe(allowed):
        ops = (authorized_operations(ctx, broker, ResourceType.GROUP, description.group_id)
               if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED)
        groups.append(_described(broker, description, ops))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)
