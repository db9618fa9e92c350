"""IncrementalAlterConfigs (44): SET / DELETE / APPEND / SUBTRACT single configs.

APPEND and SUBTRACT apply to LIST configs only (``cleanup.policy``,
``log.cleanup.policy``). The resulting set is validated as a whole, then
written durably and applied on the append thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.config.config_admin_manager import (
    ConfigChangeError,
    ConfigOp,
    alter_resources,
    incremental_alter_broker,
    incremental_alter_client_metrics,
    incremental_alter_group,
    incremental_alter_topic,
    unsupported_resource,
)
from broker.security.auth_helper import config_resource_refusal
from protocol.acl_types import AclOperation
from protocol.config_types import ConfigResourceType
from protocol.errors import ErrorCode
from protocol.messages.incremental_alter_configs import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


def _alter_one(broker: BrokerServices, resource: AlterConfigsResource, validate_only: bool,
               refusals: dict[tuple[int, str], tuple[ErrorCode, str]]) -> None:
    refusal = refusals.get((resource.resource_type, resource.resource_name))
    if refusal is not None:
        raise ConfigChangeError(*refusal)
    ops = [ConfigOp(c.name, c.config_operation, c.value) for c in resource.configs]
    if resource.resource_type == ConfigResourceType.TOPIC:
        incremental_alter_topic(broker, resource.resource_name, ops, validate_only)
    elif resource.resource_type == ConfigResourceType.BROKER:
        incremental_alter_broker(broker, resource.resource_name, ops, validate_only)
    elif resource.resource_type == ConfigResourceType.GROUP:
        incremental_alter_group(broker, resource.resource_name, ops, validate_only)
    elif resource.resource_type == ConfigResourceType.CLIENT_METRICS:
        incremental_alter_client_metrics(broker, resource.resource_name, ops, validate_only)
    else:
        raise unsupported_resource(resource.resource_type)


def _alter_all(broker: BrokerServices, request: IncrementalAlterConfigsRequest,
               refusals: dict[tuple[int, str], tuple[ErrorCode, str]]) -> list[AlterConfigsResourceResponse]:
    return alter_resources(request.resources, lambda r: _alter_one(broker, r, request.validate_only, refusals),
                           AlterConfigsResourceResponse)


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    refusals = {(r.resource_type, r.resource_name): refusal for r in request.resources
                if (refusal := config_resource_refusal(ctx, broker, AclOperation.ALTER_CONFIGS, r.resource_type,
                                                       r.resource_name)) is not None}
    responses = await broker.append_thread.run(_alter_all, broker, request, refusals)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
