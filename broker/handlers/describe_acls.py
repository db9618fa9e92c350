"""DescribeAcls (29): the ACL bindings a filter matches, grouped by resource pattern.

Needs DESCRIBE on the cluster; SECURITY_DISABLED with no authorizer; a filter
with an UNKNOWN element gets INVALID_REQUEST (Kafka refuses it when parsing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.acl_binding import AclBinding, ResourcePattern, filter_of
from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 29
MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx: RequestContext, broker: BrokerServices, request: DescribeAclsRequest) -> DescribeAclsResponse:
    authorizer = broker.authorizer
    if not authorize_cluster(ctx, broker, AclOperation.DESCRIBE):
        return _failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if authorizer is None:
        return _failed(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    binding_filter = filter_of(request.resource_type_filter, request.resource_name_filter,
                               request.pattern_type_filter, request.principal_filter, request.host_filter,
                               request.operation, request.permission_type)
    unknown = binding_filter.unknown_element()
    if unknown is not None:
        return _failed(ErrorCode.INVALID_REQUEST, f"The filter contains an unknown {unknown}")
    return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR, error_message=None,
                                resources=_by_resource(authorizer.acls(binding_filter)))


def _by_resource(bindings: list[AclBinding]) -> list[DescribeAclsResource]:
    grouped: dict[ResourcePattern, list[AclDescription]] = {}
    for binding in bindings:
        entry = binding.entry
        grouped.setdefault(binding.pattern, []).append(AclDescription(
            principal=entry.principal, host=entry.host, operation=entry.operation,
            permission_type=entry.permission_type))
    return [DescribeAclsResource(resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
                                 acls=acls) for p, acls in grouped.items()]


def _failed(error: ErrorCode, message: str) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=error, error_message=message, resources=[])
