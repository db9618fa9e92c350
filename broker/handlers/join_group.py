"""JoinGroup (11): join a classic group, parked until the rebalance completes.

The handler reads the wire request into the coordinator's request object
(``group_requests.JoinGroupRequest``: wire versions end here) and awaits the
future the coordinator answers with: completed once the group leaves
PreparingRebalance, or at once for an error, MEMBER_ID_REQUIRED, or a member
whose answer is already known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group
from coordinator.group import group_requests
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
    result = await broker.group_coordinator.join_group(join_request(ctx, request))
    return build_response(version, result)


def join_request(ctx: RequestContext, request: JoinGroupRequest) -> group_requests.JoinGroupRequest:
    """The request as the coordinator reads it, each field as Kafka assumes it for this version."""
    version = ctx.api_version
    return group_requests.JoinGroupRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=ctx.client_id or "", client_host=client_host(ctx),
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        session_timeout_ms=request.session_timeout_ms, protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        reason=request.reason if version >= 8 else None,
        require_known_member_id=version >= 4, supports_skip_assignment=version >= 9)
