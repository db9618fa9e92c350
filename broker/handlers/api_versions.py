"""ApiVersions (18): the APIs and version ranges this broker serves.

A client newer than the broker may send a version we do not know; the socket
server then answers with a v0 response carrying UNSUPPORTED_VERSION and our
ranges (KIP-511), and the client retries with a version we do know. From v3
the answer also carries the broker's feature flags (broker.features).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from broker import handlers  # the package object: its MODULES exist once discovery ends
from broker.config.consumer_group_config import DEFAULT_REBALANCE_PROTOCOLS
from broker.features import report_features
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def served_by(module: ModuleType, cluster: bool, rebalance_protocols: Sequence[str] = DEFAULT_REBALANCE_PROTOCOLS) -> bool:
    """The inter-broker APIs (``CLUSTER_ONLY``) are served only by a broker in a cluster; the APIs of a
    rebalance protocol (``REBALANCE_PROTOCOL``) only when ``group.coordinator.rebalance.protocols`` lists it."""
    protocol = getattr(module, "REBALANCE_PROTOCOL", None)
    if protocol is not None and protocol not in rebalance_protocols:
        return False
    return cluster or not getattr(module, "CLUSTER_ONLY", False)


def max_version(module: ModuleType, rebalance_protocols: Sequence[str] = DEFAULT_REBALANCE_PROTOCOLS) -> int:
    """The highest version served: ``MAX_VERSION``, or ``MAX_VERSION_WITH``'s version while its rebalance
    protocol is switched on (a version that only adds that protocol's keys)."""
    switched: tuple[str, int] | None = getattr(module, "MAX_VERSION_WITH", None)
    if switched is not None and switched[0] in rebalance_protocols:
        return switched[1]
    version: int = module.MAX_VERSION
    return version


def advertised_versions(cluster: bool = False,
                        rebalance_protocols: Sequence[str] = DEFAULT_REBALANCE_PROTOCOLS) -> list[tuple[int, int, int]]:
    """(api key, min, max) of every handler module this broker serves, in key order: a version is
    advertised exactly when a handler serves it. A lone broker (``cluster`` False) leaves out the
    controller-to-broker and broker-to-controller APIs."""
    return sorted(
        (module.API_KEY, module.MIN_VERSION, max_version(module, rebalance_protocols))
        for module in handlers.MODULES if served_by(module, cluster, rebalance_protocols)
    )


def build_response(error_code: int = ErrorCode.NO_ERROR, cluster: bool = False,
                   rebalance_protocols: Sequence[str] = DEFAULT_REBALANCE_PROTOCOLS) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi)
                  for k, lo, hi in advertised_versions(cluster, rebalance_protocols)],
        throttle_time_ms=0,
    )


def _valid_client_software(text: str) -> bool:
    # KIP-511: letters, digits, '.', '-' and must start and end alphanumerically.
    return bool(text) and text[0].isalnum() and text[-1].isalnum() and all(c.isalnum() or c in ".-" for c in text)


def handle(ctx: RequestContext, broker: BrokerServices, request: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (
        _valid_client_software(request.client_software_name) and _valid_client_software(request.client_software_version)
    ):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    if ctx.api_version >= 3 and broker.client_metrics is not None:  # client metrics match and label by them
        broker.client_metrics.note_client_software(ctx.connection, request.client_software_name,
                                                   request.client_software_version)
    protocols = broker.config.group_coordinator_rebalance_protocols
    response = build_response(cluster=broker.membership.is_cluster, rebalance_protocols=protocols)
    report_features(response, ctx.api_version, protocols)
    return response
