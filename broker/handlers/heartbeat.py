"""Heartbeat (12): keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin.

The coordinator answers with a future, as for every group request; a heartbeat
never waits, so its future is done on return and the response goes back at
once, without a task.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group
from coordinator.group import group_requests
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, broker: BrokerServices,
           request: HeartbeatRequest) -> HeartbeatResponse | Awaitable[HeartbeatResponse]:
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    answer = broker.group_coordinator.heartbeat(group_requests.HeartbeatRequest(
        group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
        group_instance_id=request.group_instance_id if ctx.api_version >= 3 else None))
    if answer.done():
        return HeartbeatResponse(throttle_time_ms=0, error_code=answer.result())
    return _respond_when_done(answer)


async def _respond_when_done(answer: asyncio.Future[ErrorCode]) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time_ms=0, error_code=await answer)
