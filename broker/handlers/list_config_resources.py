"""ListConfigResources (74), v0 ListClientMetricsResources: the names of config resources.

v0 lists the client-metrics subscriptions. v1 (KIP-1142) lists the resources of the types asked for,
every supported type when none is: groups with configs, client-metrics subscriptions, the live brokers
(as BROKER_LOGGER and BROKER resources) and the topics; a type outside those answers UNSUPPORTED_VERSION.
Needs DESCRIBE_CONFIGS on the cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.config_types import ConfigResourceType
from protocol.errors import ErrorCode
from protocol.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1

_V1_TYPES = (ConfigResourceType.GROUP, ConfigResourceType.CLIENT_METRICS, ConfigResourceType.BROKER_LOGGER,
             ConfigResourceType.BROKER, ConfigResourceType.TOPIC)


def _names(ctx: RequestContext, broker: BrokerServices, resource_type: int) -> list[str]:
    if resource_type == ConfigResourceType.GROUP:
        admin = broker.group_config_admin
        return sorted(group for group, configs in admin.configs.items() if configs) if admin is not None else []
    if resource_type == ConfigResourceType.CLIENT_METRICS:
        return broker.client_metrics.subscriptions.names() if broker.client_metrics is not None else []
    if resource_type in (ConfigResourceType.BROKER_LOGGER, ConfigResourceType.BROKER):
        return [str(node.node_id) for node in broker.cluster_view.alive_brokers(ctx.listener_name)]
    return sorted(topic.name for topic in broker.metadata)


def handle(ctx: RequestContext, broker: BrokerServices,
           request: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    if not authorize_cluster(ctx, broker, AclOperation.DESCRIBE_CONFIGS):
        return ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    supported = _V1_TYPES if ctx.api_version >= 1 else (ConfigResourceType.CLIENT_METRICS,)
    wanted = request.resource_types or list(supported)
    if any(resource_type not in supported for resource_type in wanted):
        return ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    resources = [ConfigResource(resource_name=name, resource_type=resource_type)
                 for resource_type in supported if resource_type in wanted
                 for name in _names(ctx, broker, resource_type)]
    return ListConfigResourcesResponse(error_code=ErrorCode.NO_ERROR, config_resources=resources)
