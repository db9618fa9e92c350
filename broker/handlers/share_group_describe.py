"""ShareGroupDescribe (77): a share group's epochs, assignor and members with their assignments.

Served only when ``group.coordinator.rebalance.protocols`` lists ``share``
(``REBALANCE_PROTOCOL``), at v1, Kafka 4.2's stable version. A group that is
absent, or of another type, is GROUP_ID_NOT_FOUND, as Kafka answers.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from broker.handlers.consumer_group_describe import assigned_topics, describe_authorized
from broker.security.authorized_operations import AUTHORIZED_OPERATIONS_OMITTED
from coordinator.group.consumer_group import Assignment
from coordinator.group.share_group import ShareGroupMember
from coordinator.group.share_group_requests import ShareGroupDescription
from protocol.errors import ErrorCode
from protocol.messages.share_group_describe import (
    Assignment as WireAssignment,
)
from protocol.messages.share_group_describe import (
    DescribedGroup,
    Member,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    TopicPartitions,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1
REBALANCE_PROTOCOL = "share"


def _assignment(broker: BrokerServices, assignment: Assignment) -> WireAssignment:
    def wire(topic_id: uuid.UUID, name: str, partitions: list[int]) -> TopicPartitions:
        return TopicPartitions(topic_id=topic_id, topic_name=name, partitions=partitions)
    return WireAssignment(topic_partitions=assigned_topics(broker, assignment, wire))


def _member(broker: BrokerServices, member: ShareGroupMember) -> Member:
    return Member(
        member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.member_epoch,
        client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names), assignment=_assignment(broker, member.assigned))


def _described(broker: BrokerServices, description: ShareGroupDescription, ops: int) -> DescribedGroup:
    group = description.group
    if group is None:
        return DescribedGroup(error_code=description.error, error_message=description.error_message,
                              group_id=description.group_id, authorized_operations=ops)
    return DescribedGroup(
        group_id=group.group_id, group_state=str(group.state), group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=description.assignor_name,
        members=[_member(broker, m) for m in group.members.values()], authorized_operations=ops)


def handle(ctx: RequestContext, broker: BrokerServices,
           request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    groups = describe_authorized(
        ctx, broker, request.group_ids, request.include_authorized_operations,
        broker.group_coordinator.share_group_describe,
        lambda description, ops: _described(broker, description, ops),
        lambda group_id: DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id,
                                        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=groups)
