"""ConsumerGroupHeartbeat (68): join, heartbeat in and leave a group of the consumer protocol (KIP-848).

Served only when ``group.coordinator.rebalance.protocols`` lists ``consumer``
(``REBALANCE_PROTOCOL``; see broker.config.consumer_group_config). v1 lets
the member choose its member id (an empty one is invalid) and adds
SubscribedTopicRegex. READ on the group and DESCRIBE on every subscribed
topic are needed, as in Kafka; a regular expression gives the member only
the topics its principal may DESCRIBE (the coordinator asks through the
request's ``topic_authorizer``). A heartbeat that changed the group is answered
once its records are appended to ``__consumer_offsets``; one that changed
nothing (the steady case) at once, on the socket server's synchronous path.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Collection
from typing import TYPE_CHECKING

from broker.handlers.join_group import client_host
from broker.security.auth_helper import authorize_group, authorized_names
from coordinator.group.consumer_group import Assignment
from coordinator.group.consumer_group_regex import TopicAuthorizer
from coordinator.group.consumer_group_requests import ConsumerGroupHeartbeatRequest as CoordinatorRequest
from coordinator.group.consumer_group_requests import ConsumerGroupHeartbeatResult
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    Assignment as WireAssignment,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1
REBALANCE_PROTOCOL = "consumer"


def topic_authorizer(ctx: RequestContext, broker: BrokerServices) -> TopicAuthorizer | None:
    """The topics the client may DESCRIBE, asked only when the coordinator refreshes a regular expression
    (None without an authorizer: every topic, as Kafka filters only when one is configured)."""
    if broker.authorizer is None:
        return None

    def describable(names: frozenset[str]) -> Collection[str]:
        return authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC, names)

    return describable


def coordinator_request(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest,
                        authorizer: TopicAuthorizer | None = None) -> CoordinatorRequest:
    owned: dict[uuid.UUID, frozenset[int]] | None = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    names = request.subscribed_topic_names
    return CoordinatorRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        client_id=ctx.client_id or "", client_host=client_host(ctx), instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=request.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=request.server_assignor, owned=owned, member_id_required=ctx.api_version >= 1,
        topic_authorizer=authorizer)


def build_response(result: ConsumerGroupHeartbeatResult) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=result.error, error_message=result.error_message,
        member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=None if result.assignment is None else _wire_assignment(result.assignment))


def _wire_assignment(assignment: Assignment) -> WireAssignment:
    return WireAssignment(topic_partitions=[
        TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0])) if partitions])


def handle(ctx: RequestContext, broker: BrokerServices, request: ConsumerGroupHeartbeatRequest
           ) -> ConsumerGroupHeartbeatResponse | Awaitable[ConsumerGroupHeartbeatResponse]:
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = request.subscribed_topic_names
    if names and len(authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
        # Kafka: a member may only subscribe to topics it may describe.
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    answer = broker.group_coordinator.consumer_group_heartbeat(
        coordinator_request(ctx, request, topic_authorizer(ctx, broker)))
    if answer.done():  # it changed nothing (most heartbeats): answered on the synchronous path
        return build_response(answer.result())
    return _once_appended(answer)


async def _once_appended(answer: asyncio.Future[ConsumerGroupHeartbeatResult]) -> ConsumerGroupHeartbeatResponse:
    """The answer of a heartbeat that changed the group, once its records are in __consumer_offsets."""
    return build_response(await answer)
