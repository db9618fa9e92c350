"""AlterPartition (56): a partition leader asks the controller to change its ISR.

Only a broker in a cluster serves it and only the active controller acts on it
(the controller checks the broker epoch and each partition's epoch); any other
broker answers NOT_CONTROLLER, and the leader's AlterPartitionManager asks again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 56
MIN_VERSION = 0
MAX_VERSION = 3
CLUSTER_ONLY = True


async def handle(ctx: RequestContext, broker: BrokerServices, request: AlterPartitionRequest) -> AlterPartitionResponse:
    if not authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION):
        return AlterPartitionResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = broker.membership.controller
    if controller is None or not controller.is_active:
        return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
    return await controller.alter_partition(request)
