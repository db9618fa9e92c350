"""ListPartitionReassignments (46): the reassignments in progress, with each partition's current
replicas and those being added and removed (KIP-455). Served by the active controller; any other
broker answers NOT_CONTROLLER."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0
CLUSTER_ONLY = True


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    if not authorize_cluster(ctx, broker, AclOperation.DESCRIBE):
        return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                  error_message="Cluster authorization failed.")
    controller = broker.membership.controller
    partitions = (None if request.topics is None
                  else [(t.name, p) for t in request.topics for p in t.partition_indexes])
    found = None if controller is None else await controller.list_partition_reassignments(partitions)
    if found is None:
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
            error_message="This is not the correct controller for this cluster.")
    topics: dict[str, OngoingTopicReassignment] = {}
    for (name, index), assignment in sorted(found.items()):
        topic = topics.get(name)
        if topic is None:
            topic = topics[name] = OngoingTopicReassignment(name=name, partitions=[])
        topic.partitions.append(OngoingPartitionReassignment(
            partition_index=index, replicas=list(assignment.replicas), adding_replicas=list(assignment.adding),
            removing_replicas=list(assignment.removing)))
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR,
                                              topics=list(topics.values()))
