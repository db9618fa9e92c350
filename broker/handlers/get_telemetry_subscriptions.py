"""GetTelemetrySubscriptions (71): the metrics a client is asked to push, and how often (KIP-714).

A client asking with the zero instance id is given a new one. The answer is the union of the
client-metrics subscriptions matching the client (``broker.telemetry.client_metrics_manager``); asked
again before its push interval has passed, the broker answers THROTTLING_QUOTA_EXCEEDED. Any client may
ask: Kafka checks no ACL here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 71
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, broker: BrokerServices,
           request: GetTelemetrySubscriptionsRequest) -> GetTelemetrySubscriptionsResponse:
    manager = broker.client_metrics
    if manager is None:
        return GetTelemetrySubscriptionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    return manager.get_subscriptions(request.client_instance_id, manager.client_information(ctx))
