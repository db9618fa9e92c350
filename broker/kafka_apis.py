"""KafkaApis: routes each decoded request to its handler module.

Every handler module in ``broker.handlers`` declares ``API_KEY``, the version
range it implements (``MIN_VERSION``..``MAX_VERSION``) and
``handle(ctx, server, request)``. ApiVersions advertises exactly those
ranges, so a version is advertised only once its handler exists.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import TYPE_CHECKING, Any

from broker import handlers
from broker.socket_server import RequestContext
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer

log = logging.getLogger(__name__)


class UnsupportedRequest(Exception):
    """A request for an API or version we decode but do not serve: close the connection."""


class KafkaApis:
    def __init__(self, server: "KafkaServer") -> None:
        self.server = server
        self.handlers: dict[int, ModuleType] = {module.API_KEY: module for module in handlers.MODULES}

    def dispatch(self, ctx: RequestContext) -> Any:
        request = ctx.request
        module = self.handlers.get(request.api_key)
        version = request.api_version
        if module is None or not module.MIN_VERSION <= version <= module.MAX_VERSION:
            raise UnsupportedRequest(f"{request.api.name} v{version} is not served by this broker")
        return module.handle(ctx, self.server, request.body)

    def advertised_versions(self) -> list[tuple[int, int, int]]:
        """(api key, min, max) for ApiVersions, in key order."""
        return sorted(
            (key, getattr(module, "ADVERTISED_MIN_VERSION", module.MIN_VERSION), module.MAX_VERSION)
            for key, module in self.handlers.items()
        )

    def unsupported_api_versions_response(self) -> Any:
        from broker.handlers import api_versions

        return api_versions.build_response(self.server, ErrorCode.UNSUPPORTED_VERSION)
