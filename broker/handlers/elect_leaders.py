"""ElectLeaders (43): preferred (0) or unclean (1) leader election for some or all partitions.

Only a broker in a cluster serves it; the active controller elects (admin
clients send it to the controller Metadata names). Any other broker answers
NOT_CONTROLLER for each partition named (top level when all partitions were
asked for), which sends the admin client to look the controller up again.
v0 has no election type (preferred) and no top-level error code.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2
CLUSTER_ONLY = True
PREFERRED = 0


def _results(outcome: dict[tuple[str, int], tuple[int, str | None]]) -> list[ReplicaElectionResult]:
    by_topic: dict[str, ReplicaElectionResult] = {}
    for (topic, index), (error, message) in sorted(outcome.items()):
        result = by_topic.get(topic)
        if result is None:
            result = by_topic[topic] = ReplicaElectionResult(topic=topic)
        result.partition_result.append(PartitionResult(partition_id=index, error_code=error, error_message=message))
    return list(by_topic.values())


async def handle(ctx: RequestContext, broker: BrokerServices, request: ElectLeadersRequest) -> ElectLeadersResponse:
    election_type = request.election_type if ctx.api_version >= 1 else PREFERRED
    partitions = (None if request.topic_partitions is None
                  else [(t.topic, p) for t in request.topic_partitions for p in t.partitions])
    if not authorize_cluster(ctx, broker, AclOperation.ALTER):
        return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    replica_election_results=_results(dict.fromkeys(
                                        partitions or [], (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None))))
    controller = broker.membership.controller
    if controller is None or not controller.is_active:
        if partitions is None:
            return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER)
        return ElectLeadersResponse(throttle_time_ms=0, replica_election_results=_results(
            dict.fromkeys(partitions, (ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster."))))
    try:
        outcome = await asyncio.wait_for(controller.elect_leaders(election_type, partitions),
                                         max(request.timeout_ms, 0) / 1000)
    except TimeoutError:
        if partitions is None:
            return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.REQUEST_TIMED_OUT)
        outcome = dict.fromkeys(partitions, (ErrorCode.REQUEST_TIMED_OUT, None))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR,
                                replica_election_results=_results(outcome))
