"""AlterPartitionReassignments (45): move partitions to new replicas, or cancel a move (KIP-455).

Only a broker in a cluster serves it, and only the active controller acts: any other broker
answers NOT_CONTROLLER at the top level, which sends the admin client to look the controller up
again. The controller starts each partition's reassignment (or cancels it, for null replicas)
and answers once it has started; the move itself completes when the new replicas have caught up
(``controller.partition_reassignment``). v1 (KIP-860's allow_replication_factor_change) is not
served: Kafka 3.9 has only v0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 0
CLUSTER_ONLY = True


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    if not authorize_cluster(ctx, broker, AclOperation.ALTER):
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.")
    controller = broker.membership.controller
    if controller is None or not controller.is_active:
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
            error_message="This is not the correct controller for this cluster.")
    wanted = {(t.name, p.partition_index): (None if p.replicas is None else list(p.replicas))
              for t in request.topics for p in t.partitions}
    outcome = await controller.alter_partition_reassignments(wanted)
    topics: dict[str, ReassignableTopicResponse] = {}
    for (name, index), (error, message) in outcome.items():
        topic = topics.get(name)
        if topic is None:
            topic = topics[name] = ReassignableTopicResponse(name=name, partitions=[])
        topic.partitions.append(ReassignablePartitionResponse(partition_index=index, error_code=error,
                                                              error_message=message))
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR,
                                               responses=list(topics.values()))
