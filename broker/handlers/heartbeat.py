"""Heartbeat (12): keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, broker: BrokerServices, request: HeartbeatRequest) -> HeartbeatResponse:
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = broker.group_coordinator.handle_heartbeat(
        request.group_id, request.member_id, request.group_instance_id if ctx.api_version >= 3 else None,
        request.generation_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
