"""CreateAcls (30): new ACL bindings, each stored or refused with its own error.

Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every creation
otherwise); with no authorizer configured every creation gets
SECURITY_DISABLED, as in Kafka. A malformed binding (unknown or ANY codes, a
MATCH/ANY pattern, an empty name, a CLUSTER resource not named
``kafka-cluster``, a principal without ``Type:``) gets INVALID_REQUEST and the
others are still created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.acl_binding import binding_of
from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 30
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, broker: BrokerServices, request: CreateAclsRequest) -> CreateAclsResponse:
    authorizer = broker.authorizer
    if not authorize_cluster(ctx, broker, AclOperation.ALTER):
        return _all_failed(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                           "Cluster authorization failed.")
    if authorizer is None:
        return _all_failed(request, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    bindings = [binding_of(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                           c.operation, c.permission_type) for c in request.creations]
    errors = await authorizer.create_acls(bindings)
    results = [AclCreationResult(error_code=ErrorCode.NO_ERROR, error_message=None) if error is None
               else AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=error) for error in errors]
    return CreateAclsResponse(throttle_time_ms=0, results=results)


def _all_failed(request: CreateAclsRequest, error: ErrorCode, message: str) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time_ms=0, results=[AclCreationResult(error_code=error, error_message=message)
                                                           for _ in request.creations])
