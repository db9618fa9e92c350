"""Authorized-operations bitfields (Kafka's AclOperation codes) for Metadata and Describe* APIs.

With no authorizer every operation a resource type supports is allowed, which
is what Kafka reports then; with one, each supported operation is asked of it
(Kafka's AuthHelper.authorizedOperations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

#: Kafka's "not requested" value for authorized-operations fields.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

TOPIC_OPERATIONS = sum(1 << op for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                          AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
                                          AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS))
CLUSTER_OPERATIONS = sum(1 << op for op in (AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
                                            AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                                            AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE))
GROUP_OPERATIONS = sum(1 << op for op in (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE))

_ALL_SUPPORTED = {ResourceType.TOPIC: TOPIC_OPERATIONS, ResourceType.CLUSTER: CLUSTER_OPERATIONS,
                  ResourceType.GROUP: GROUP_OPERATIONS}


def authorized_operations(ctx: RequestContext, broker: BrokerServices, resource_type: ResourceType,
                          name: str) -> int:
    authorizer = broker.authorizer
    if authorizer is None:
        return _ALL_SUPPORTED[resource_type]
    return authorizer.authorized_operations(ctx.principal, ctx.connection.client_host, resource_type, name)


def cluster_authorized_operations(ctx: RequestContext, broker: BrokerServices) -> int:
    """As Kafka's Metadata and DescribeCluster: 0 unless the client may DESCRIBE the cluster."""
    if not authorize_cluster(ctx, broker, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, broker, ResourceType.CLUSTER, CLUSTER_NAME)
