"""PushTelemetry (72): a client's metrics, pushed as OTLP under its subscription (KIP-714).

Kafka's checks come first (``broker.telemetry.client_metrics_manager``): a reserved instance id or a push
after the terminating one is INVALID_REQUEST, an early push THROTTLING_QUOTA_EXCEEDED, an outdated
subscription id UNKNOWN_SUBSCRIPTION_ID, an unknown compression UNSUPPORTED_COMPRESSION_TYPE, a payload
over ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE. The payload then reaches the broker's built-in receiver,
the Prometheus endpoint's ClientTelemetryCollector; one that does not decode is INVALID_RECORD.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 72
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, broker: BrokerServices, request: PushTelemetryRequest) -> PushTelemetryResponse:
    manager = broker.client_metrics
    if manager is None:
        return PushTelemetryResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    return manager.push(request, manager.client_information(ctx))
