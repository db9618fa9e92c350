"""JoinGroup (11): join a classic group, parked until the rebalance completes.

The handler returns an awaitable: the coordinator calls back once the group
leaves PreparingRebalance (or at once for an error, MEMBER_ID_REQUIRED, or a
member whose answer is already known).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group
from coordinator.group.group_metadata import JoinGroupResult
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


def client_host(ctx: RequestContext) -> str:
    """Kafka reports a member's host as ``/<address>`` (InetAddress.toString)."""
    peer = ctx.connection.peer
    return "/" + peer.rsplit(":", 1)[0] if peer != "?" else "/unknown"


def build_response(version: int, result: JoinGroupResult) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # nullable from v7 only
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader_id,
        skip_assignment=result.skip_assignment, member_id=result.member_id,
        members=[JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                 for m, i, md in result.members])


async def handle(ctx: RequestContext, broker: BrokerServices, request: JoinGroupRequest) -> JoinGroupResponse:
    version = ctx.api_version
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return JoinGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, generation_id=-1,
                                 protocol_type=None, protocol_name=None if version >= 7 else "", leader="",
                                 skip_assignment=False, member_id=request.member_id, members=[])
    future: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()

    def done(result: JoinGroupResult) -> None:
        if not future.done():
            future.set_result(result)

    broker.group_coordinator.handle_join_group(
        request.group_id, request.member_id, request.group_instance_id if version >= 5 else None,
        require_known_member_id=version >= 4, support_skip_assignment=version >= 9,
        client_id=ctx.client_id or "", client_host=client_host(ctx),
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        session_timeout_ms=request.session_timeout_ms, protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols], callback=done)
    return build_response(version, await future)
