"""IncrementalAlterConfigs (44): SET / DELETE / APPEND / SUBTRACT single configs.

APPEND and SUBTRACT apply to LIST configs only (``cleanup.policy``,
``log.cleanup.policy``). The resulting set is validated as a whole, then
written durably and applied on the append thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.config.config_admin_manager import (
    ConfigOp,
    alter_resources,
    incremental_alter_broker,
    incremental_alter_topic,
    unsupported_resource,
)
from protocol.config_types import ConfigResourceType
from protocol.messages.incremental_alter_configs import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer
    from broker.socket_server import RequestContext

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


def _alter_one(server: "KafkaServer", resource: AlterConfigsResource, validate_only: bool) -> None:
    ops = [ConfigOp(c.name, c.config_operation, c.value) for c in resource.configs]
    if resource.resource_type == ConfigResourceType.TOPIC:
        incremental_alter_topic(server, resource.resource_name, ops, validate_only)
    elif resource.resource_type == ConfigResourceType.BROKER:
        incremental_alter_broker(server, resource.resource_name, ops, validate_only)
    else:
        raise unsupported_resource(resource.resource_type)


def _alter_all(server: "KafkaServer", request: IncrementalAlterConfigsRequest) -> list[AlterConfigsResourceResponse]:
    return alter_resources(request.resources, lambda r: _alter_one(server, r, request.validate_only),
                           AlterConfigsResourceResponse)


async def handle(ctx: "RequestContext", server: "KafkaServer",
                 request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    responses = await server.run_append(_alter_all, server, request)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
