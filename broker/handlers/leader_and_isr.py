"""LeaderAndIsr (4): the controller tells a broker which replicas it leads and follows.

Only a broker in a cluster serves it. Requests below v2 list partition states
ungrouped (each naming its topic); they are grouped by topic here, so the
replica manager sees one shape. Its answer comes back in the shape of the
request's version: per-partition errors below v5, per topic (by id) from v5.
A request meant for an earlier registration of this broker answers
STALE_BROKER_EPOCH for every partition; one from a deposed controller
STALE_CONTROLLER_EPOCH (the replica manager decides).
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
    LeaderAndIsrTopicState,
)

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


def normalize(request: LeaderAndIsrRequest, version: int) -> LeaderAndIsrRequest:
    """Group a pre-v2 request's partition states by topic (topic ids stay zero before v5)."""
    if version >= GROUPED_VERSION:
        return request
    by_topic: dict[str, LeaderAndIsrTopicState] = {}
    for state in request.ungrouped_partition_states:
        topic = by_topic.get(state.topic_name)
        if topic is None:
            topic = by_topic[state.topic_name] = LeaderAndIsrTopicState(topic_name=state.topic_name)
        topic.partition_states.append(state)
    request.topic_states = list(by_topic.values())
    request.ungrouped_partition_states = []
    return request


def shape_response(request: LeaderAndIsrRequest, response: LeaderAndIsrResponse, version: int) -> LeaderAndIsrResponse:
    """Per-partition errors below v5, per topic id from v5, whichever form the replica manager
    filled (the other form is cleared: the codec refuses a field its version lacks)."""
    names = {t.topic_id: t.topic_name for t in request.topic_states}
    ids = {t.topic_name: t.topic_id for t in request.topic_states}
    if version < GROUPED_ERRORS_VERSION:
        if not response.partition_errors:
            response.partition_errors = [
                LeaderAndIsrPartitionError(topic_name=p.topic_name or names.get(t.topic_id, ""),
                                           partition_index=p.partition_index, error_code=p.error_code)
                for t in response.topics for p in t.partition_errors]
        response.topics = []
        return response
    if not response.topics:
        grouped: dict[str, LeaderAndIsrTopicError] = {}
        for p in response.partition_errors:
            topic = grouped.get(p.topic_name)
            if topic is None:
                topic = grouped[p.topic_name] = LeaderAndIsrTopicError(topic_id=ids.get(p.topic_name, ZERO_UUID))
            topic.partition_errors.append(p)
        response.topics = list(grouped.values())
    response.partition_errors = []
    return response


def error_response(request: LeaderAndIsrRequest, error_code: int) -> LeaderAndIsrResponse:
    """Kafka's LeaderAndIsrRequest.getErrorResponse: the error at the top and on every partition."""
    return LeaderAndIsrResponse(error_code=error_code, topics=[
        LeaderAndIsrTopicError(topic_id=t.topic_id, partition_errors=[
            LeaderAndIsrPartitionError(topic_name=t.topic_name, partition_index=p.partition_index,
                                       error_code=error_code)
            for p in t.partition_states])
        for t in request.topic_states])


async def handle(ctx: RequestContext, broker: BrokerServices, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    version = ctx.api_version
    request = normalize(request, version)
    error = (broker.membership.check_broker_epoch(request.broker_epoch) if authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION)
             else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if error:
        response = error_response(request, error)
    else:
        response = await broker.membership.become_leader_or_follower(request)
    return shape_response(request, response, version)
