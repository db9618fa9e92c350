"""ShareGroupHeartbeat (76): join, heartbeat in and leave a share group (KIP-932).

Served only when ``group.coordinator.rebalance.protocols`` lists ``share``
(``REBALANCE_PROTOCOL``; see broker.config.share_group_config), at v1, Kafka
4.2's stable version (the consumer chooses its member id). READ on the group
and DESCRIBE on every subscribed topic are needed, as in Kafka. A heartbeat that
changed the group is answered once its records are appended to
``__consumer_offsets``; one that changed nothing at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker.handlers.join_group import client_host
from broker.security.auth_helper import authorize_group, authorized_names
from coordinator.group.consumer_group import Assignment
from coordinator.group.share_group_requests import ShareGroupHeartbeatRequest as CoordinatorRequest
from coordinator.group.share_group_requests import ShareGroupHeartbeatResult
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.share_group_heartbeat import (
    Assignment as WireAssignment,
)
from protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1
REBALANCE_PROTOCOL = "share"


def coordinator_request(ctx: RequestContext, request: ShareGroupHeartbeatRequest) -> CoordinatorRequest:
    names = request.subscribed_topic_names
    return CoordinatorRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        client_id=ctx.client_id or "", client_host=client_host(ctx), rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names))


def build_response(result: ShareGroupHeartbeatResult) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=result.error, error_message=result.error_message,
        member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=None if result.assignment is None else _wire_assignment(result.assignment))


def _wire_assignment(assignment: Assignment) -> WireAssignment:
    return WireAssignment(topic_partitions=[
        TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0])) if partitions])


def handle(ctx: RequestContext, broker: BrokerServices, request: ShareGroupHeartbeatRequest
           ) -> ShareGroupHeartbeatResponse | Awaitable[ShareGroupHeartbeatResponse]:
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = request.subscribed_topic_names
    if names and len(authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    answer = broker.group_coordinator.share_group_heartbeat(coordinator_request(ctx, request))
    if answer.done():
        return build_response(answer.result())
    return _once_appended(answer)


async def _once_appended(answer: asyncio.Future[ShareGroupHeartbeatResult]) -> ShareGroupHeartbeatResponse:
    return build_response(await answer)
