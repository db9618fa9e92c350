"""Metadata (3): brokers, controller, topics and partition leadership.

Brokers, the controller and each partition's leader, ISR and offline replicas come
from ``broker.cluster_view``: the lone broker itself, or in a cluster the metadata
cache the controller feeds, so every broker of a cluster answers the same.

A cluster member that has not heard from a controller yet (just started, or
restarted while the controller's old ZooKeeper session still holds
``/controller``) knows no live broker, itself included. Kafka's ZooKeeper-mode
broker answers such a Metadata with an empty broker list, and librdkafka (2.13
and later) forgets every broker it knew on that answer and never reconnects
(its issue #5301; a chaos run's producer stopped for good that way). So such a
Metadata waits, up to ``zookeeper.session.timeout.ms`` (within which a new
controller is elected and sends its UpdateMetadata), for the first live broker;
if none has come, it names this broker alone, as a KRaft broker that waits to
catch up before serving never shows a client an empty cluster.

Unknown topics are auto-created when both ``auto.create.topics.enable`` and the
request's ``allow_auto_topic_creation`` allow it (always allowed before v4).
Creation fsyncs the metadata store, so it runs on the append thread.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.admin_manager import AdminError, validate_topic_name
from broker.metadata_store import TopicMetadata
from broker.metadata_view import NO_CONTROLLER_ID, PartitionStateView
from broker.security.auth_helper import authorize_cluster, authorize_topic, authorized_names
from broker.security.authorized_operations import (
    AUTHORIZED_OPERATIONS_OMITTED,
    authorized_operations,
    cluster_authorized_operations,
)
from coordinator.common.internal_topics import INTERNAL_TOPICS
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

ZERO_UUID = uuid.UUID(int=0)
NO_LEADER_ID = NO_CONTROLLER_ID  # MetadataResponse's -1 for both


def advertised_endpoint(broker: BrokerServices, listener_name: str) -> tuple[str, int]:
    """This broker's advertised host and port for the listener the client used."""
    advertised = broker.config.effective_advertised_listeners
    endpoint = next((listener for listener in advertised if listener.name == listener_name), advertised[0])
    host, port = endpoint.host, endpoint.port
    if port == 0:  # listening on an ephemeral port: advertise the bound one
        host, port = broker.socket_server.bound.get(endpoint.name, (host, port))
    return host, port


def brokers(broker: BrokerServices, listener_name: str) -> list[MetadataResponseBroker]:
    """The live brokers, as the client reaches them through the listener it used."""
    return [MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in broker.cluster_view.alive_brokers(listener_name)]


async def live_brokers_or_self(broker: BrokerServices, listener_name: str) -> list[MetadataResponseBroker]:
    """:func:`brokers`, but never an empty list (module docstring): a cluster member that knows
    no live broker yet waits for its first UpdateMetadata, then names itself if it is still alone."""
    known = brokers(broker, listener_name)
    if known:
        return known
    await broker.membership.wait_for_brokers(listener_name)
    known = brokers(broker, listener_name)
    if known:
        return known
    host, port = advertised_endpoint(broker, listener_name)
    return [MetadataResponseBroker(node_id=broker.broker_id, host=host, port=port, rack=broker.config.rack)]


#: Each partition's entry as last answered, with the state it shows. Rebuilding the
#: entries (four objects each) for every request was a third of a 1,000-partition
#: Metadata and fed the cyclic collector's full passes (30-75 ms pauses, the p99).
#: Entries are only read by the encoder, so responses may share them.
#: (leader, leader epoch, replicas, ISR, offline replicas, error)
_ShownState = tuple[int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...], int]
_ENTRIES: weakref.WeakKeyDictionary[PartitionStateView, tuple[_ShownState, MetadataResponsePartition]] = (
    weakref.WeakKeyDictionary())
_NO_REPLICAS: tuple[int, ...] = ()


def partition_entry(partition: PartitionStateView, offline: Sequence[int] = _NO_REPLICAS,
                    error: int = ErrorCode.NO_ERROR) -> MetadataResponsePartition:
    """A partition as Metadata shows it; with LEADER_NOT_AVAILABLE (and leader -1) when its
    leader is not a live broker on the client's listener, as Kafka's ZkMetadataCache answers."""
    state = (partition.leader_id, partition.leader_epoch, tuple(partition.replicas), tuple(partition.isr),
             tuple(offline), error)
    cached = _ENTRIES.get(partition)
    if cached is not None and cached[0] == state:
        return cached[1]
    entry = MetadataResponsePartition(
        error_code=error,
        partition_index=partition.partition_index,
        leader_id=partition.leader_id if error == ErrorCode.NO_ERROR else NO_LEADER_ID,
        leader_epoch=partition.leader_epoch,
        replica_nodes=list(partition.replicas),
        isr_nodes=list(partition.isr),
        offline_replicas=list(offline),
    )
    _ENTRIES[partition] = (state, entry)
    return entry


def partition_entries(broker: BrokerServices, topic: str, listener_name: str) -> list[MetadataResponsePartition]:
    view = broker.cluster_view
    if not view.is_cluster:  # the lone broker leads everything it hosts
        return [partition_entry(p) for p in view.partition_states(topic)]
    reachable = view.reachable_broker_ids(listener_name)
    return [partition_entry(p, view.offline_replicas(p),
                            ErrorCode.NO_ERROR if p.leader_id in reachable else ErrorCode.LEADER_NOT_AVAILABLE)
            for p in view.partition_states(topic)]


def topic_response(ctx: RequestContext, broker: BrokerServices, topic: TopicMetadata,
                   include_ops: bool) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=ErrorCode.NO_ERROR,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=partition_entries(broker, topic.name, ctx.listener_name),
        topic_authorized_operations=(authorized_operations(ctx, broker, ResourceType.TOPIC, topic.name)
                                     if include_ops else AUTHORIZED_OPERATIONS_OMITTED),
    )


def error_topic(code: ErrorCode, name: str | None, topic_id: uuid.UUID = ZERO_UUID) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[],
                                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


async def handle(ctx: RequestContext, broker: BrokerServices, request: MetadataRequest) -> MetadataResponse:
    """Kafka's handleTopicMetadataRequest: topics the client may not DESCRIBE are left out of an
    all-topics answer and TOPIC_AUTHORIZATION_FAILED when named; auto-creation needs CREATE on the
    cluster or the topic."""
    version = ctx.api_version
    include_ops = bool(request.include_topic_authorized_operations)
    live_brokers = await live_brokers_or_self(broker, ctx.listener_name)  # before the topics: it may wait for them
    topics: list[MetadataResponseTopic] = []
    if request.topics is None or (version == 0 and not request.topics):
        described = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                     (t.name for t in broker.metadata))
        topics = [topic_response(ctx, broker, t, include_ops) for t in broker.metadata if t.name in described]
    else:
        allow_create = broker.config.auto_create_topics_enable and (version < 4 or request.allow_auto_topic_creation)
        for wanted in request.topics:
            topics.append(await _describe(ctx, broker, wanted.name, wanted.topic_id, allow_create, include_ops))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=live_brokers,
        cluster_id=broker.cluster_id,
        controller_id=broker.cluster_view.controller_id(),
        topics=topics,
        cluster_authorized_operations=(cluster_authorized_operations(ctx, broker)
                                       if request.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
    )


async def _describe(ctx: RequestContext, broker: BrokerServices, name: str | None, topic_id: uuid.UUID,
                    allow_create: bool, include_ops: bool) -> MetadataResponseTopic:
    if name is None:
        by_id = broker.metadata.by_id(topic_id)
        if by_id is None:
            return error_topic(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id)
        if not authorize_topic(ctx, broker, AclOperation.DESCRIBE, by_id.name):
            return error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, topic_id)
        return topic_response(ctx, broker, by_id, include_ops)
    if not authorize_topic(ctx, broker, AclOperation.DESCRIBE, name):
        return error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
    topic = broker.metadata.get(name)
    if topic is not None:
        return topic_response(ctx, broker, topic, include_ops)
    try:
        validate_topic_name(name)
    except AdminError:
        return error_topic(ErrorCode.INVALID_TOPIC, name)
    if not allow_create:
        return error_topic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
    if not (authorize_cluster(ctx, broker, AclOperation.CREATE) or authorize_topic(ctx, broker, AclOperation.CREATE, name)):
        return error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
    # A lone broker creates the topic at once; a cluster member writes it to ZooKeeper and answers
    # LEADER_NOT_AVAILABLE until the controller's UpdateMetadata brings it here (the client asks again).
    code = await broker.topic_admin.auto_create_topic(name)
    created = broker.metadata.get(name) if code == ErrorCode.NO_ERROR else None
    if created is None:
        return error_topic(code or ErrorCode.LEADER_NOT_AVAILABLE, name)
    return topic_response(ctx, broker, created, include_ops)
