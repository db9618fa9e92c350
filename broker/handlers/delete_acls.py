"""DeleteAcls (31): remove the ACL bindings each filter matches; each filter's result lists them.

Needs ALTER on the cluster; SECURITY_DISABLED with no authorizer; a filter with
an UNKNOWN element gets INVALID_REQUEST and deletes nothing, the others still apply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.acl_binding import AclBinding, AclBindingFilter, filter_of
from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 31
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, broker: BrokerServices, request: DeleteAclsRequest) -> DeleteAclsResponse:
    authorizer = broker.authorizer
    if not authorize_cluster(ctx, broker, AclOperation.ALTER):
        return _all_failed(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if authorizer is None:
        return _all_failed(request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    filters = [filter_of(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                         f.host_filter, f.operation, f.permission_type) for f in request.filters]
    valid: list[AclBindingFilter] = [f for f in filters if f.unknown_element() is None]
    deleted = iter(await authorizer.delete_acls(valid) if valid else [])
    results = []
    for binding_filter in filters:
        unknown = binding_filter.unknown_element()
        if unknown is not None:
            results.append(DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST, matching_acls=[],
                                                  error_message=f"The filter contains an unknown {unknown}"))
        else:
            results.append(DeleteAclsFilterResult(error_code=ErrorCode.NO_ERROR, error_message=None,
                                                  matching_acls=[_matching(b) for b in next(deleted)]))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)


def _matching(binding: AclBinding) -> DeleteAclsMatchingAcl:
    pattern, entry = binding.pattern, binding.entry
    return DeleteAclsMatchingAcl(error_code=ErrorCode.NO_ERROR, error_message=None,
                                 resource_type=pattern.resource_type, resource_name=pattern.name,
                                 pattern_type=pattern.pattern_type, principal=entry.principal, host=entry.host,
                                 operation=entry.operation, permission_type=entry.permission_type)


def _all_failed(request: DeleteAclsRequest, error: ErrorCode, message: str) -> DeleteAclsResponse:
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        DeleteAclsFilterResult(error_code=error, error_message=message, matching_acls=[]) for _ in request.filters])
