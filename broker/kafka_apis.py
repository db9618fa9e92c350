"""KafkaApis: routes each decoded request to its handler module.

Every handler module in ``broker.handlers`` declares ``API_KEY``, the version
range it implements (``MIN_VERSION``..``MAX_VERSION``) and
``handle(ctx, broker, request)``, where ``broker`` is the
:class:`~broker.broker_services.BrokerServices` it may call. ApiVersions
advertises exactly those ranges, so a version is advertised only once its
handler exists.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from broker import handlers
from broker.broker_services import BrokerServices
from broker.config.consumer_group_config import DEFAULT_REBALANCE_PROTOCOLS
from broker.handlers import api_versions
from broker.request_context import RequestContext
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class UnsupportedRequest(Exception):
    """A request for an API or version we decode but do not serve: close the connection."""


class KafkaApis:
    def __init__(self, services: BrokerServices) -> None:
        self.services = services
        cluster = services.membership.is_cluster
        protocols = services.config.group_coordinator_rebalance_protocols
        self.handlers: dict[int, ModuleType] = {module.API_KEY: module for module in handlers.MODULES
                                                if api_versions.served_by(module, cluster, protocols)}
        self.max_versions = {key: api_versions.max_version(module, protocols) for key, module in self.handlers.items()}

    def dispatch(self, ctx: RequestContext) -> Any:
        request = ctx.request
        module = self.handlers.get(request.api_key)
        version = request.api_version
        if module is None or not module.MIN_VERSION <= version <= self.max_versions[request.api_key]:
            raise UnsupportedRequest(f"{request.api.name} v{version} is not served by this broker")
        quotas = self.services.quotas
        if quotas is None or not quotas.enabled:
            return module.handle(ctx, self.services, request.body)
        return quotas.handle(ctx, module.handle, self.services, request.body)

    @staticmethod
    def unsupported_api_versions_response(cluster: bool = False,
                                          rebalance_protocols: Sequence[str] = DEFAULT_REBALANCE_PROTOCOLS) -> Any:
        return api_versions.build_response(ErrorCode.UNSUPPORTED_VERSION, cluster, rebalance_protocols)
