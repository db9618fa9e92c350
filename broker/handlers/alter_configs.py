"""AlterConfigs (33): replace the whole set of dynamic configs of topics, the broker, groups or client-metrics subscriptions.

Configs not named in a resource go back to their defaults (that is this legacy
API's meaning; IncrementalAlterConfigs changes single keys). Changes are
written durably and applied on the append thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.config.config_admin_manager import (
    ConfigChangeError,
    alter_broker,
    alter_client_metrics,
    alter_group,
    alter_resources,
    alter_topic,
    unsupported_resource,
)
from broker.security.auth_helper import config_resource_refusal
from protocol.acl_types import AclOperation
from protocol.config_types import ConfigResourceType
from protocol.errors import ErrorCode
from protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


def _alter_one(broker: BrokerServices, resource: AlterConfigsResource, validate_only: bool,
               refusals: dict[tuple[int, str], tuple[ErrorCode, str]]) -> None:
    refusal = refusals.get((resource.resource_type, resource.resource_name))
    if refusal is not None:
        raise ConfigChangeError(*refusal)
    configs = [(c.name, c.value) for c in resource.configs]
    if resource.resource_type == ConfigResourceType.TOPIC:
        alter_topic(broker, resource.resource_name, configs, validate_only)
    elif resource.resource_type == ConfigResourceType.BROKER:
        alter_broker(broker, resource.resource_name, configs, validate_only)
    elif resource.resource_type == ConfigResourceType.GROUP:
        alter_group(broker, resource.resource_name, configs, validate_only)
    elif resource.resource_type == ConfigResourceType.CLIENT_METRICS:
        alter_client_metrics(broker, resource.resource_name, configs, validate_only)
    else:
        raise unsupported_resource(resource.resource_type)


def _alter_all(broker: BrokerServices, request: AlterConfigsRequest,
               refusals: dict[tuple[int, str], tuple[ErrorCode, str]]) -> list[AlterConfigsResourceResponse]:
    return alter_resources(request.resources, lambda r: _alter_one(broker, r, request.validate_only, refusals),
                           AlterConfigsResourceResponse)


async def handle(ctx: RequestContext, broker: BrokerServices, request: AlterConfigsRequest) -> AlterConfigsResponse:
    refusals = {(r.resource_type, r.resource_name): refusal for r in request.resources
                if (refusal := config_resource_refusal(ctx, broker, AclOperation.ALTER_CONFIGS, r.resource_type,
                                                       r.resource_name)) is not None}
    responses = await broker.append_thread.run(_alter_all, broker, request, refusals)
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)
