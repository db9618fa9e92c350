"""LeaderAndIsr (4): the controller tells a broker which replicas it leads and follows.

Only a broker in a cluster serves it. The wire versions stop here, both ways:
the request's partition states (ungrouped below v2, each naming its topic; by
topic from v2, with topic ids from v5) become one list of
``PartitionState`` (topic id zero where the version has none), and the replica
manager's per-partition errors become the version's answer (a flat list below
v5, per topic id from v5). A request meant for an earlier registration of this
broker answers STALE_BROKER_EPOCH for every partition; one from a deposed
controller STALE_CONTROLLER_EPOCH (the replica manager decides).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
)
from replication.state_change_requests import BrokerEndpoint, LeaderAndIsrResult, LeaderAndIsrStates, PartitionState

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 4
MIN_VERSION = 0
MAX_VERSION = 7
CLUSTER_ONLY = True
#: The first version grouping the request's partition states by topic.
GROUPED_VERSION = 2
#: The first version grouping the response's errors by topic id.
GROUPED_ERRORS_VERSION = 5
ZERO_UUID = uuid.UUID(int=0)


def partition_states(request: LeaderAndIsrRequest, version: int) -> LeaderAndIsrStates:
    """The request as the replica manager takes it: every partition state, with its topic's id
    (zero below v5), topic by topic (below v2 in the order each topic first appears)."""
    if version < GROUPED_VERSION:
        by_topic: dict[str, list[PartitionState]] = {}
        for s in request.ungrouped_partition_states:
            by_topic.setdefault(s.topic_name, []).append(PartitionState(s.topic_name, ZERO_UUID, s))
        states = [state for topic_states in by_topic.values() for state in topic_states]
    else:
        states = [PartitionState(t.topic_name, t.topic_id, s) for t in request.topic_states for s in t.partition_states]
    live_leaders = {leader.broker_id: BrokerEndpoint(leader.broker_id, leader.host_name, leader.port)
                    for leader in request.live_leaders}
    return LeaderAndIsrStates(request.controller_id, request.controller_epoch, states, live_leaders)


def response_for(result: LeaderAndIsrResult, states: LeaderAndIsrStates, version: int) -> LeaderAndIsrResponse:
    """Per-partition errors as v0-v4 carry them (a flat list) or v5+ (by topic id: the first the
    request named for the topic)."""
    if version < GROUPED_ERRORS_VERSION:
        return LeaderAndIsrResponse(error_code=result.error_code, partition_errors=[
            LeaderAndIsrPartitionError(topic_name=t, partition_index=p, error_code=e)
            for (t, p), e in result.errors.items()])
    topic_ids: dict[str, uuid.UUID] = {}
    for state in states.partition_states:
        topic_ids.setdefault(state.topic, state.topic_id)
    by_topic: dict[str, LeaderAndIsrTopicError] = {}
    for (t, p), e in result.errors.items():
        entry = by_topic.get(t)
        if entry is None:
            entry = by_topic[t] = LeaderAndIsrTopicError(topic_id=topic_ids.get(t, ZERO_UUID), partition_errors=[])
        entry.partition_errors.append(LeaderAndIsrPartitionError(partition_index=p, error_code=e))
    return LeaderAndIsrResponse(error_code=result.error_code, topics=list(by_topic.values()))


def error_result(states: LeaderAndIsrStates, error_code: int) -> LeaderAndIsrResult:
    """Kafka's LeaderAndIsrRequest.getErrorResponse: the error at the top and on every partition."""
    return LeaderAndIsrResult(error_code, {s.tp: error_code for s in states.partition_states})


async def handle(ctx: RequestContext, broker: BrokerServices, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    version = ctx.api_version
    states = partition_states(request, version)
    error = (broker.membership.check_broker_epoch(request.broker_epoch) if authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION)
             else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    result = error_result(states, error) if error else await broker.membership.become_leader_or_follower(states)
    return response_for(result, states, version)
