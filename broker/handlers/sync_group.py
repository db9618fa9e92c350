"""SyncGroup (14): the leader hands in the assignment; every member waits for its own."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group
from coordinator.group.group_metadata import SyncGroupResult
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
    future: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()

    def done(result: SyncGroupResult) -> None:
        if not future.done():
            future.set_result(result)

    broker.group_coordinator.handle_sync_group(
        request.group_id, request.generation_id, request.member_id,
        request.protocol_type if version >= 5 else None, request.protocol_name if version >= 5 else None,
        request.group_instance_id if version >= 3 else None,
        {a.member_id: bytes(a.assignment) for a in request.assignments}, done)
    result = await future
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)
