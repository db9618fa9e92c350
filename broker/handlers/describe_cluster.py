"""DescribeCluster (60): the cluster id, controller and brokers (KIP-700).

A lone broker is its own controller; a broker in a cluster names the controller
and the live brokers its metadata cache knows. Asked for controller endpoints
(endpoint_type 2), a broker answers MISMATCHED_ENDPOINT_TYPE as Kafka's do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.handlers.metadata import brokers
from broker.security.authorized_operations import AUTHORIZED_OPERATIONS_OMITTED, cluster_authorized_operations
from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2


def handle(ctx: RequestContext, broker: BrokerServices, request: DescribeClusterRequest) -> DescribeClusterResponse:
    version = ctx.api_version
    endpoint_type = request.endpoint_type if version >= 1 else ENDPOINT_TYPE_BROKER
    response = DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NO_ERROR, error_message=None, endpoint_type=endpoint_type,
        cluster_id=broker.cluster_id, controller_id=broker.cluster_view.controller_id(), brokers=[],
        cluster_authorized_operations=(cluster_authorized_operations(ctx, broker) if request.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
    )
    if endpoint_type == ENDPOINT_TYPE_CONTROLLER:
        response.error_code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
        response.error_message = ("The request was sent to an endpoint of type BROKER, "
                                  "but we wanted an endpoint of type CONTROLLER")
        return response
    if endpoint_type != ENDPOINT_TYPE_BROKER:
        response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response.error_message = f"Unsupported endpoint type {endpoint_type}"
        return response
    response.brokers = [
        DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=False)
        for b in brokers(broker, ctx.listener_name)
    ]
    return response
