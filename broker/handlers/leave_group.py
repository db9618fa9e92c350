"""LeaveGroup (13): members leave (batched with group instance ids from v3, KIP-345).

The coordinator answers with a future, as for every group request; leaving
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
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, broker: BrokerServices,
           request: LeaveGroupRequest) -> LeaveGroupResponse | Awaitable[LeaveGroupResponse]:
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return LeaveGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    leave = leave_request(ctx.api_version, request)
    answer = broker.group_coordinator.leave_group(leave)
    if answer.done():
        return build_response(ctx.api_version, leave, answer.result())
    return _respond_when_done(ctx.api_version, leave, answer)


def leave_request(version: int, request: LeaveGroupRequest) -> group_requests.LeaveGroupRequest:
    if version < 3:  # one member, by member id
        members: tuple[group_requests.LeavingMember, ...] = (group_requests.LeavingMember(request.member_id),)
    else:
        members = tuple(group_requests.LeavingMember(m.member_id, m.group_instance_id) for m in request.members)
    return group_requests.LeaveGroupRequest(request.group_id, members)


def build_response(version: int, leave: group_requests.LeaveGroupRequest,
                   result: group_requests.LeaveGroupResult) -> LeaveGroupResponse:
    if version < 3:
        # v0-v2 carry one member; its error is the response's.
        return LeaveGroupResponse(throttle_time_ms=0, error_code=result.error or result.member_errors[0])
    return LeaveGroupResponse(
        throttle_time_ms=0, error_code=result.error,
        members=[] if result.error else [
            MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=e)
            for m, e in zip(leave.members, result.member_errors, strict=True)])


async def _respond_when_done(version: int, leave: group_requests.LeaveGroupRequest,
                             answer: asyncio.Future[group_requests.LeaveGroupResult]) -> LeaveGroupResponse:
    return build_response(version, leave, await answer)
