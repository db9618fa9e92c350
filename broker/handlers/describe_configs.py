"""DescribeConfigs (32): topic, broker and group configs with values, sources, synonyms and docs.

A TOPIC resource lists every topic config (or the requested keys) with its
effective value and where it comes from; a BROKER resource named by this
broker's id lists every broker setting, and the "" resource lists the dynamic
cluster-wide defaults, as Kafka does; a GROUP resource lists every group config, the
group's own (GROUP_CONFIG) or the broker's (DEFAULT_CONFIG); a CLIENT_METRICS resource lists the
subscription's own configs (CLIENT_METRICS_CONFIG), as Kafka does. A sensitive config (a password, a JAAS
config, a key) is listed with a null value and ``is_sensitive``.

v0 (Kafka 3.9's floor) has neither sources nor synonyms: each entry says
``is_default`` instead, true when the value is Kafka's default (its source
would be DEFAULT_CONFIG), as Kafka 3.9 answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.config.config_admin_manager import ConfigChangeError, check_broker_resource
from broker.config.topic_config import ConfigEntry, topic_config_entries
from broker.security.auth_helper import config_resource_refusal
from protocol.acl_types import AclOperation
from protocol.config_types import ConfigResourceType, ConfigSource
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 32
MIN_VERSION = 0
MAX_VERSION = 4


def _entries(broker: BrokerServices, resource: DescribeConfigsResource, synonyms: bool, docs: bool) -> list[ConfigEntry]:
    if resource.resource_type == ConfigResourceType.TOPIC:
        if resource.resource_name not in broker.metadata:
            raise ConfigChangeError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    f"The topic '{resource.resource_name}' does not exist.")
        return topic_config_entries(broker.dynamic_config, broker.metadata.configs_of(resource.resource_name),
                                    synonyms, docs)
    if resource.resource_type == ConfigResourceType.BROKER:
        check_broker_resource(broker, resource.resource_name)
        return broker.dynamic_config.entries(resource.resource_name, synonyms, docs)
    if resource.resource_type == ConfigResourceType.CLIENT_METRICS and broker.client_metrics_admin is not None:
        if not resource.resource_name:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")
        return broker.client_metrics_admin.entries(resource.resource_name)
    if resource.resource_type == ConfigResourceType.GROUP and broker.group_config_admin is not None:
        return broker.group_config_admin.entries(resource.resource_name, broker.config, synonyms, docs)
    try:
        kind = ConfigResourceType(resource.resource_type).name
    except ValueError:
        kind = str(resource.resource_type)
    raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {kind}")


def _result_entry(entry: ConfigEntry, version: int) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=entry.name, value=entry.value, read_only=entry.read_only, config_source=entry.source,
        is_default=version == 0 and entry.source == ConfigSource.DEFAULT_CONFIG,
        is_sensitive=entry.sensitive,
        synonyms=[DescribeConfigsSynonym(name=s.name, value=s.value, source=s.source) for s in entry.synonyms],
        config_type=entry.config_type if version >= 3 else 0,
        documentation=entry.doc if version >= 3 else None,
    )


def describe(broker: BrokerServices, resource: DescribeConfigsResource, synonyms: bool, docs: bool,
             version: int) -> DescribeConfigsResult:
    result = DescribeConfigsResult(error_code=ErrorCode.NO_ERROR, error_message=None,
                                   resource_type=resource.resource_type, resource_name=resource.resource_name,
                                   configs=[])
    try:
        entries = _entries(broker, resource, synonyms, docs)
    except ConfigChangeError as exc:
        result.error_code, result.error_message = exc.error_code, exc.message
        return result
    wanted = resource.configuration_keys
    result.configs = [_result_entry(e, version) for e in entries if wanted is None or e.name in wanted]
    return result


def handle(ctx: RequestContext, broker: BrokerServices, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    version = ctx.api_version
    docs = bool(request.include_documentation) and version >= 3
    synonyms = bool(request.include_synonyms) and version >= 1
    results = []
    for resource in request.resources:
        refusal = config_resource_refusal(ctx, broker, AclOperation.DESCRIBE_CONFIGS, resource.resource_type,
                                          resource.resource_name)
        if refusal is None:
            results.append(describe(broker, resource, synonyms, docs, version))
        else:
            results.append(DescribeConfigsResult(error_code=refusal[0], error_message=refusal[1],
                                                 resource_type=resource.resource_type,
                                                 resource_name=resource.resource_name, configs=[]))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
