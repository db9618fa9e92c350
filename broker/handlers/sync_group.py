"""SyncGroup (14): the leader hands in the assignment; every member waits for its own.

Awaits the future the coordinator answers with (completed when the leader's
assignment is stored, or at once when the answer is already known).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group
from coordinator.group import group_requests
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, broker: BrokerServices, request: SyncGroupRequest) -> SyncGroupResponse:
    version = ctx.api_version
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return SyncGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                 protocol_type=None, protocol_name=None, assignment=b"")
    result = await broker.group_coordinator.sync_group(group_requests.SyncGroupRequest(
        group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments}))
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)
