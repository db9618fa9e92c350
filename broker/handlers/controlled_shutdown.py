"""ControlledShutdown (7): a stopping broker asks the controller to move its leaderships away.

Only a broker in a cluster serves it, and only the active controller acts on
it; any other broker answers NOT_CONTROLLER (the asker looks the controller up
again). The answer lists the partitions whose leadership could not move yet.
v0-v1 carry no broker epoch (-1: not checked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartition,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 7
MIN_VERSION = 0
MAX_VERSION = 3
CLUSTER_ONLY = True
#: The first version carrying the broker epoch.
BROKER_EPOCH_VERSION = 2


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: ControlledShutdownRequest) -> ControlledShutdownResponse:
    if not authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION):
        return ControlledShutdownResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = broker.membership.controller
    if controller is None or not controller.is_active:
        return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
    epoch = request.broker_epoch if ctx.api_version >= BROKER_EPOCH_VERSION else -1
    error, remaining = await controller.controlled_shutdown(request.broker_id, epoch)
    return ControlledShutdownResponse(error_code=error, remaining_partitions=[
        RemainingPartition(topic_name=topic, partition_index=index) for topic, index in remaining])
