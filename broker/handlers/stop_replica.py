"""StopReplica (5): the controller tells a broker to stop replicas (and maybe delete them).

Only a broker in a cluster serves it. Each version's shape (v0: one list and
one delete flag; v1-v2: grouped by topic, one delete flag; v3+: per-partition
leader epoch and delete flag) becomes one list of ``StopReplicaPartition``
here, so the replica manager sees no wire version; its per-partition errors
come back as the answer (one shape in every version). A request meant for an
earlier registration of this broker answers STALE_BROKER_EPOCH.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.stop_replica import StopReplicaPartitionError, StopReplicaRequest, StopReplicaResponse
from replication.state_change_requests import StopReplicaPartition, StopReplicaResult, StopReplicaStates

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 5
MIN_VERSION = 0
MAX_VERSION = 4
CLUSTER_ONLY = True
#: LeaderAndIsr's EpochDuringDelete / NoEpoch: what older versions imply for the leader epoch.
NO_EPOCH = -1
#: The first version with per-partition states.
STATES_VERSION = 3


def partition_states(request: StopReplicaRequest, version: int) -> StopReplicaStates:
    """Every partition the request names, with its leader epoch (NO_EPOCH before v3) and delete flag."""
    delete = request.delete_partitions
    if version == 0:
        partitions = [StopReplicaPartition(p.topic_name, p.partition_index, NO_EPOCH, delete)
                      for p in request.ungrouped_partitions]
    elif version < STATES_VERSION:
        partitions = [StopReplicaPartition(t.name, index, NO_EPOCH, delete)
                      for t in request.topics for index in t.partition_indexes]
    else:
        partitions = [StopReplicaPartition(t.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
                      for t in request.topic_states for p in t.partition_states]
    return StopReplicaStates(request.controller_id, request.controller_epoch, partitions)


def response_for(result: StopReplicaResult) -> StopReplicaResponse:
    return StopReplicaResponse(error_code=result.error_code, partition_errors=[
        StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=e) for (t, p), e in result.errors.items()])


async def handle(ctx: RequestContext, broker: BrokerServices, request: StopReplicaRequest) -> StopReplicaResponse:
    states = partition_states(request, ctx.api_version)
    error = (broker.membership.check_broker_epoch(request.broker_epoch) if authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION)
             else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if error:
        return StopReplicaResponse(error_code=error, partition_errors=[
            StopReplicaPartitionError(topic_name=p.topic, partition_index=p.partition_index, error_code=error)
            for p in states.partitions])
    return response_for(await broker.membership.stop_replicas(states))
