"""ConsumerGroupDescribe (69): a consumer-protocol group's epochs, assignor and members with their
current and target assignments.

Served only when ``group.coordinator.rebalance.protocols`` lists ``consumer``
(``REBALANCE_PROTOCOL``). A group that is not a consumer group (absent, or
classic) is GROUP_ID_NOT_FOUND, as Kafka answers. v1 adds the member type.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol, TypeVar

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

T = TypeVar("T")
D = TypeVar("D", bound="GroupDescription")
G = TypeVar("G")


def assigned_topics(broker: BrokerServices, assignment: Assignment,
                    wire: Callable[[uuid.UUID, str, list[int]], T]) -> list[T]:
    """An assignment as the describe answers of the consumer and share groups carry it: by topic id, with
    the topic's name and its partitions sorted; a topic deleted since is left out."""
    topics = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0])):
        topic = broker.metadata.by_id(topic_id)
        if topic is not None and partitions:
            topics.append(wire(topic_id, topic.name, sorted(partitions)))
    return topics


def _assignment(broker: BrokerServices, assignment: Assignment) -> WireAssignment:
    def wire(topic_id: uuid.UUID, name: str, partitions: list[int]) -> TopicPartitions:
        return TopicPartitions(topic_id=topic_id, topic_name=name, partitions=partitions)
    return WireAssignment(topic_partitions=assigned_topics(broker, assignment, wire))


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


class GroupDescription(Protocol):
    @property
    def group_id(self) -> str: ...


def describe_authorized(ctx: RequestContext, broker: BrokerServices, group_ids: list[str], include_operations: bool,
                        describe: Callable[[list[str]], Iterable[D]], answer: Callable[[D, int], G],
                        refused: Callable[[str], G]) -> list[G]:
    """The groups the principal may DESCRIBE described (with its authorized operations when asked), the others
    GROUP_AUTHORIZATION_FAILED (``refused``) first, as the consumer and share groups' describe answers are."""
    groups = []
    allowed = []
    for group_id in group_ids:
        if authorize_group(ctx, broker, AclOperation.DESCRIBE, group_id):
            allowed.append(group_id)
        else:
            groups.append(refused(group_id))
    for description in describe(allowed):
        ops = (authorized_operations(ctx, broker, ResourceType.GROUP, description.group_id)
               if include_operations else AUTHORIZED_OPERATIONS_OMITTED)
        groups.append(answer(description, ops))
    return groups


def handle(ctx: RequestContext, broker: BrokerServices,
           request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    groups = describe_authorized(
        ctx, broker, request.group_ids, request.include_authorized_operations,
        broker.group_coordinator.consumer_group_describe,
        lambda description, ops: _described(broker, description, ops),
        lambda group_id: DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id,
                                        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)
