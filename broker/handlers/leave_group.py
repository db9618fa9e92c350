"""LeaveGroup (13): members leave (batched with group instance ids from v3, KIP-345)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, broker: BrokerServices, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return LeaveGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if ctx.api_version < 3:
        error, errors = broker.group_coordinator.handle_leave_group(request.group_id, [(request.member_id, None)])
        # v0-v2 carry one member; its error is the response's.
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error or errors[0])
    members = [(m.member_id, m.group_instance_id) for m in request.members]
    error, errors = broker.group_coordinator.handle_leave_group(request.group_id, members)
    return LeaveGroupResponse(
        throttle_time_ms=0, error_code=error,
        members=[] if error else [MemberResponse(member_id=m, group_instance_id=i, error_code=e)
                                  for (m, i), e in zip(members, errors, strict=True)])
