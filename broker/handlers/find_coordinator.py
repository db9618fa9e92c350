"""FindCoordinator (10): which broker coordinates a group or a transactional id.

The coordinator of a group is the leader of partition
``abs(javaHashCode(group.id)) % offsets.topic.num.partitions`` of
``__consumer_offsets``; that of a transactional id (key type TRANSACTION) the
leader of its partition of ``__transaction_state``; that of a share partition's
state (key type SHARE, v6+, asked by brokers: CLUSTER_ACTION) the leader of the
partition of ``__share_group_state`` its key ``groupId:topicId:partition`` hashes to. Each topic is created on
first use, as Kafka does (``broker.topic_admin``). A cluster member answers
COORDINATOR_NOT_AVAILABLE until its partitions have leaders, as Kafka does; a
lone broker creates them on its append thread, waits, and answers at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster, authorized_names
from coordinator.common.internal_topics import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from coordinator.common.partitioner import partition_for
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse
from protocol.request_constants import CoordinatorType

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext


API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 5
#: v6 only adds key type SHARE (KIP-932): served behind the share switch.
SHARE_MIN_VERSION = 6
MAX_VERSION_WITH = ("share", SHARE_MIN_VERSION)


def valid_share_key(key: str) -> bool:
    """Kafka's share coordinator key: ``groupId:topicId:partition``, a non-empty group, a topic id
    and a non-negative partition (the group id may itself hold colons)."""
    group, sep, rest = key.rpartition(":")
    group, sep2, topic = group.rpartition(":")
    return bool(sep and sep2 and group and topic) and rest.isdigit()


async def ensure_offsets_topic(broker: BrokerServices) -> ErrorCode:
    return await ensure_internal_topic(broker, GROUP_METADATA_TOPIC_NAME)


async def ensure_internal_topic(broker: BrokerServices, name: str) -> ErrorCode:
    """NO_ERROR once the topic is usable here (created if missing), else COORDINATOR_NOT_AVAILABLE."""
    return await broker.topic_admin.ensure_internal_topic(name)


def _coordinator(broker: BrokerServices, key: str, topic: str, partition: int, listener: str) -> Coordinator:
    """The broker coordinating the key's partition, as this broker's placement names it."""
    node = broker.coordinator_placement.coordinator_node(topic, partition, listener)
    if node is None:
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                           error_message="The coordinator is not available.")
    return Coordinator(key=key, node_id=node.node_id, host=node.host, port=node.port, error_code=ErrorCode.NO_ERROR,
                       error_message=None)


def _find(broker: BrokerServices, key: str, key_type: int, listener: str) -> Coordinator:
    if key_type == CoordinatorType.TRANSACTION:
        return _coordinator(broker, key, TRANSACTION_STATE_TOPIC_NAME,
                            broker.transaction_coordinator.txn_manager.partition_for(key), listener)
    if key_type == CoordinatorType.GROUP:
        return _coordinator(broker, key, GROUP_METADATA_TOPIC_NAME,
                            broker.group_coordinator.manager.partition_for(key), listener)
    if key_type == CoordinatorType.SHARE and broker.share_coordinator is not None:
        if not valid_share_key(key):
            return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST,
                               error_message=f"Invalid share coordinator key {key}")
        return _coordinator(broker, key, SHARE_GROUP_STATE_TOPIC_NAME,
                            partition_for(key, broker.share_coordinator.coordinator_log.num_partitions), listener)
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST,
                       error_message=f"Unknown coordinator type {key_type} in request")


def _refused(ctx: RequestContext, broker: BrokerServices, key_type: int, keys: list[str]) -> dict[str, ErrorCode]:
    """Kafka's rule: DESCRIBE on the group, or on the transactional id, for each key."""
    if broker.authorizer is None:
        return {}
    if key_type == CoordinatorType.GROUP:
        allowed = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.GROUP, keys)
        return {k: ErrorCode.GROUP_AUTHORIZATION_FAILED for k in keys if k not in allowed}
    if key_type == CoordinatorType.TRANSACTION:
        allowed = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, keys)
        return {k: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for k in keys if k not in allowed}
    if key_type == CoordinatorType.SHARE and not authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION):
        # Only brokers ask for a share coordinator.
        return dict.fromkeys(keys, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return {}


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    version = ctx.api_version
    key_type = request.key_type if version >= 1 else CoordinatorType.GROUP
    keys = request.coordinator_keys if version >= 4 else [request.key]
    if key_type == CoordinatorType.SHARE and version < SHARE_MIN_VERSION:
        key_type = -1  # unknown before v6: answered INVALID_REQUEST
    refused = _refused(ctx, broker, key_type, keys)
    if len(refused) == len(keys):
        error = ErrorCode.NO_ERROR  # nothing to find: no internal topic is created for a refused client
    elif key_type == CoordinatorType.GROUP:
        error = await ensure_offsets_topic(broker)
    elif key_type == CoordinatorType.TRANSACTION:
        error = await ensure_internal_topic(broker, TRANSACTION_STATE_TOPIC_NAME)
    elif key_type == CoordinatorType.SHARE and version >= SHARE_MIN_VERSION and broker.share_coordinator is not None:
        error = await ensure_internal_topic(broker, SHARE_GROUP_STATE_TOPIC_NAME)
    else:
        error = ErrorCode.NO_ERROR
    results = []
    for key in keys:
        if key in refused:
            results.append(Coordinator(key=key, node_id=-1, host="", port=-1, error_code=refused[key],
                                       error_message=None))
        elif error != ErrorCode.NO_ERROR:
            results.append(Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error,
                                       error_message="The coordinator is not available."))
        else:
            results.append(_find(broker, key, key_type, ctx.listener_name))
    if version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=results)
    one = results[0]
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=one.error_code, error_message=one.error_message,
                                   node_id=one.node_id, host=one.host, port=one.port)
