"""Heartbeat (12): keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.socket_server import RequestContext

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, broker: BrokerServices, request: HeartbeatRequest) -> HeartbeatResponse:
    error = broker.group_coordinator.handle_heartbeat(
        request.group_id, request.member_id, request.group_instance_id if ctx.api_version >= 3 else None,
        request.generation_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
