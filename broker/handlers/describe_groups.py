"""DescribeGroups (15): state, protocol, members and (when Stable) their metadata and assignments.

An unknown group is reported as Dead with no error, as Kafka does, except
from v6 (KIP-1043) where it is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group
from broker.security.authorized_operations import AUTHORIZED_OPERATIONS_OMITTED, authorized_operations
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6


def _describe(ctx: RequestContext, broker: BrokerServices, group_id: str, include_ops: bool) -> DescribedGroup:
    if not authorize_group(ctx, broker, AclOperation.DESCRIBE, group_id):
        return DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="",
                              protocol_type="", protocol_data="", authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    version = ctx.api_version
    ops = (authorized_operations(ctx, broker, ResourceType.GROUP, group_id) if include_ops
           else AUTHORIZED_OPERATIONS_OMITTED)
    error, summary = broker.group_coordinator.handle_describe_group(group_id)
    if error != ErrorCode.NO_ERROR:
        return DescribedGroup(error_code=error, group_id=group_id, authorized_operations=ops)
    if summary is None:
        if version >= 6:
            return DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.",
                                  group_id=group_id, group_state="Dead", authorized_operations=ops)
        return DescribedGroup(group_id=group_id, group_state="Dead", authorized_operations=ops)
    return DescribedGroup(
        group_id=group_id, group_state=summary.state, protocol_type=summary.protocol_type,
        protocol_data=summary.protocol, authorized_operations=ops,
        members=[DescribedGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                      client_id=m.client_id, client_host=m.client_host,
                                      member_metadata=m.metadata, member_assignment=m.assignment)
                 for m in summary.members])


def handle(ctx: RequestContext, broker: BrokerServices, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    include_ops = ctx.api_version >= 3 and request.include_authorized_operations
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[
        _describe(ctx, broker, group_id, include_ops) for group_id in request.groups])
