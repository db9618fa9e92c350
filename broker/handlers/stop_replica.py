"""StopReplica (5): the controller tells a broker to stop replicas (and maybe delete them).

Only a broker in a cluster serves it. Each version's shape (v0: one list and
one delete flag; v1-v2: grouped by topic, one delete flag; v3+: per-partition
leader epoch and delete flag) becomes v3's per-partition states here, so the
replica manager sees one shape. A request meant for an earlier registration of
this broker answers STALE_BROKER_EPOCH.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.stop_replica import (
    StopReplicaPartitionError,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaTopicState,
)

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


def normalize(request: StopReplicaRequest, version: int) -> StopReplicaRequest:
    if version >= STATES_VERSION:
        return request
    delete = request.delete_partitions
    by_topic: dict[str, StopReplicaTopicState] = {}

    def add(topic: str, index: int) -> None:
        state = by_topic.get(topic)
        if state is None:
            state = by_topic[topic] = StopReplicaTopicState(topic_name=topic)
        state.partition_states.append(StopReplicaPartitionState(partition_index=index, leader_epoch=NO_EPOCH,
                                                                delete_partition=delete))

    if version == 0:
        for p in request.ungrouped_partitions:
            add(p.topic_name, p.partition_index)
    else:
        for t in request.topics:
            for index in t.partition_indexes:
                add(t.name, index)
    request.topic_states = list(by_topic.values())
    return request


async def handle(ctx: RequestContext, broker: BrokerServices, request: StopReplicaRequest) -> StopReplicaResponse:
    request = normalize(request, ctx.api_version)
    error = (broker.membership.check_broker_epoch(request.broker_epoch) if authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION)
             else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if error:
        return StopReplicaResponse(error_code=error, partition_errors=[
            StopReplicaPartitionError(topic_name=t.topic_name, partition_index=p.partition_index, error_code=error)
            for t in request.topic_states for p in t.partition_states])
    return await broker.membership.stop_replicas(request)
