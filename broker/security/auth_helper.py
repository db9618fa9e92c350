"""Kafka's AuthHelper: the authorization questions handlers ask, one call each.

With no authorizer configured every question is answered yes after one
attribute check, so the Produce and Fetch paths pay nothing more. The client's
principal and IP address come from its connection.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from protocol.acl_types import CLUSTER_NAME, AclOperation, ResourceType
from protocol.config_types import ConfigResourceType
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext


def authorize(ctx: RequestContext, broker: BrokerServices, operation: AclOperation, resource_type: ResourceType,
              name: str) -> bool:
    authorizer = broker.authorizer
    return authorizer is None or authorizer.authorize(ctx.principal, ctx.connection.client_host, operation,
                                                      resource_type, name)


def authorize_cluster(ctx: RequestContext, broker: BrokerServices, operation: AclOperation) -> bool:
    return authorize(ctx, broker, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorize_topic(ctx: RequestContext, broker: BrokerServices, operation: AclOperation, topic: str) -> bool:
    return authorize(ctx, broker, operation, ResourceType.TOPIC, topic)


def authorized_names(ctx: RequestContext, broker: BrokerServices, operation: AclOperation,
                     resource_type: ResourceType, names: Iterable[str]) -> set[str]:
    """Kafka's filterByAuthorized: the names (topics, groups) the client may perform ``operation`` on."""
    authorizer = broker.authorizer
    if authorizer is None:
        return set(names)
    principal, host = ctx.principal, ctx.connection.client_host
    return {name for name in set(names) if authorizer.authorize(principal, host, operation, resource_type, name)}


def authorize_by_resource_type(ctx: RequestContext, broker: BrokerServices, operation: AclOperation,
                               resource_type: ResourceType) -> bool:
    """May the client perform ``operation`` on some resource of the type (InitProducerId's "WRITE on any topic")?"""
    authorizer = broker.authorizer
    return authorizer is None or authorizer.authorize_by_resource_type(ctx.principal, ctx.connection.client_host,
                                                                       operation, resource_type)


def authorize_group(ctx: RequestContext, broker: BrokerServices, operation: AclOperation, group_id: str) -> bool:
    return authorize(ctx, broker, operation, ResourceType.GROUP, group_id)


def authorize_transactional_id(ctx: RequestContext, broker: BrokerServices, operation: AclOperation,
                               transactional_id: str) -> bool:
    return authorize(ctx, broker, operation, ResourceType.TRANSACTIONAL_ID, transactional_id)


def config_resource_refusal(ctx: RequestContext, broker: BrokerServices, operation: AclOperation,
                            resource_type: int, name: str) -> tuple[ErrorCode, str] | None:
    """Kafka's rule for a config resource (DESCRIBE_CONFIGS or ALTER_CONFIGS): broker, broker-logger and
    client-metrics configs are the cluster's, topic configs the topic's, group configs the group's; the error and message when refused."""
    if resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER,
                         ConfigResourceType.CLIENT_METRICS):
        if authorize_cluster(ctx, broker, operation):
            return None
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    if resource_type == ConfigResourceType.TOPIC and not authorize_topic(ctx, broker, operation, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Authorization failed for topic {name}."
    if resource_type == ConfigResourceType.GROUP and not authorize_group(ctx, broker, operation, name):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, f"Authorization failed for group {name}."
    return None
