"""ApiVersions (18): the APIs and version ranges this broker serves.

A client newer than the broker may send a version we do not know; the socket
server then answers with a v0 response carrying UNSUPPORTED_VERSION and our
ranges (KIP-511), and the client retries with a version we do know.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from broker import handlers  # the package object: its MODULES exist once discovery ends
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def served_by(module: ModuleType, cluster: bool) -> bool:
    """The inter-broker APIs (``CLUSTER_ONLY``) are served only by a broker in a cluster."""
    return cluster or not getattr(module, "CLUSTER_ONLY", False)


def advertised_versions(cluster: bool = False) -> list[tuple[int, int, int]]:
    """(api key, min, max) of every handler module this broker serves, in key order: a version is
    advertised exactly when a handler serves it. A lone broker (``cluster`` False) leaves out the
    controller-to-broker and broker-to-controller APIs."""
    return sorted(
        (module.API_KEY, module.MIN_VERSION, module.MAX_VERSION)
        for module in handlers.MODULES if served_by(module, cluster)
    )


def build_response(error_code: int = ErrorCode.NO_ERROR, cluster: bool = False) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in advertised_versions(cluster)],
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
    return build_response(cluster=broker.membership.is_cluster)
