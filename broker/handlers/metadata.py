"""Metadata (3): brokers, controller, topics and partition leadership.

Unknown topics are auto-created when both ``auto.create.topics.enable`` and the
request's ``allow_auto_topic_creation`` allow it (always allowed before v4).
Creation fsyncs the metadata store, so it runs on the append thread.
"""

from __future__ import annotations

import uuid
import weakref
from typing import TYPE_CHECKING

from broker.admin_manager import AdminError, validate_topic_name
from broker.authorized_operations import AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from broker.metadata_store import TopicMetadata
from coordinator.common.internal_topics import INTERNAL_TOPICS
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
    from broker.socket_server import RequestContext
    from replication.partition import Partition

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

ZERO_UUID = uuid.UUID(int=0)


def advertised_endpoint(broker: BrokerServices, listener_name: str) -> tuple[str, int]:
    """This broker's advertised host and port for the listener the client used."""
    advertised = broker.config.effective_advertised_listeners
    endpoint = next((listener for listener in advertised if listener.name == listener_name), advertised[0])
    host, port = endpoint.host, endpoint.port
    if port == 0:  # listening on an ephemeral port: advertise the bound one
        host, port = broker.socket_server.bound.get(endpoint.name, (host, port))
    return host, port


def brokers(broker: BrokerServices, listener_name: str) -> list[MetadataResponseBroker]:
    """This broker, as the client sees it through the listener it used."""
    host, port = advertised_endpoint(broker, listener_name)
    return [MetadataResponseBroker(node_id=broker.broker_id, host=host, port=port, rack=broker.config.rack)]


#: Each partition's entry as last answered, with the state it shows. Rebuilding the
#: entries (four objects each) for every request was a third of a 1,000-partition
#: Metadata and fed the cyclic collector's full passes (30-75 ms pauses, the p99).
#: Entries are only read by the encoder, so responses may share them.
_ShownState = tuple[int, int, tuple[int, ...], tuple[int, ...]]  # leader, leader epoch, replicas, ISR
_ENTRIES: weakref.WeakKeyDictionary[Partition, tuple[_ShownState, MetadataResponsePartition]] = (
    weakref.WeakKeyDictionary())


def partition_entry(partition: Partition) -> MetadataResponsePartition:
    state = (partition.leader_id, partition.leader_epoch, tuple(partition.replicas), tuple(partition.isr))
    cached = _ENTRIES.get(partition)
    if cached is not None and cached[0] == state:
        return cached[1]
    entry = MetadataResponsePartition(
        error_code=ErrorCode.NO_ERROR,
        partition_index=partition.partition_index,
        leader_id=partition.leader_id,
        leader_epoch=partition.leader_epoch,
        replica_nodes=list(partition.replicas),
        isr_nodes=list(partition.isr),
        offline_replicas=[],
    )
    _ENTRIES[partition] = (state, entry)
    return entry


def topic_response(broker: BrokerServices, topic: TopicMetadata, include_ops: bool) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=ErrorCode.NO_ERROR,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=[partition_entry(p) for p in broker.replica_manager.partitions_of(topic.name)],
        topic_authorized_operations=TOPIC_OPERATIONS if include_ops else AUTHORIZED_OPERATIONS_OMITTED,
    )


def error_topic(code: ErrorCode, name: str | None, topic_id: uuid.UUID = ZERO_UUID) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[],
                                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


async def handle(ctx: RequestContext, broker: BrokerServices, request: MetadataRequest) -> MetadataResponse:
    version = ctx.api_version
    include_ops = bool(request.include_topic_authorized_operations)
    topics: list[MetadataResponseTopic] = []
    if request.topics is None or (version == 0 and not request.topics):
        topics = [topic_response(broker, t, include_ops) for t in broker.metadata]
    else:
        allow_create = broker.config.auto_create_topics_enable and (version < 4 or request.allow_auto_topic_creation)
        for wanted in request.topics:
            topics.append(await _describe(broker, wanted.name, wanted.topic_id, allow_create, include_ops))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers(broker, ctx.listener_name),
        cluster_id=broker.cluster_id,
        controller_id=broker.broker_id,
        topics=topics,
        cluster_authorized_operations=(CLUSTER_OPERATIONS if request.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
    )


async def _describe(broker: BrokerServices, name: str | None, topic_id: uuid.UUID, allow_create: bool,
                    include_ops: bool) -> MetadataResponseTopic:
    if name is None:
        by_id = broker.metadata.by_id(topic_id)
        if by_id is None:
            return error_topic(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id)
        return topic_response(broker, by_id, include_ops)
    topic = broker.metadata.get(name)
    if topic is not None:
        return topic_response(broker, topic, include_ops)
    try:
        validate_topic_name(name)
    except AdminError:
        return error_topic(ErrorCode.INVALID_TOPIC, name)
    if not allow_create:
        return error_topic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
    try:
        created = await broker.append_thread.run(broker.admin.auto_create_topic, name)
    except AdminError as exc:
        if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and (existing := broker.metadata.get(name)):
            return topic_response(broker, existing, include_ops)  # a concurrent request created it
        return error_topic(exc.error_code, name)
    return topic_response(broker, created, include_ops)
