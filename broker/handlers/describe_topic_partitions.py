"""DescribeTopicPartitions (75, KIP-966): topics and partitions, paginated.

Topics come in name order (all of them when the request names none). At most
``response_partition_limit`` partitions (capped at Kafka's 2000) are returned;
when more remain, ``next_cursor`` names the topic and partition to ask for
next. Leadership comes from ``broker.cluster_view`` (in a cluster, the metadata
cache: every broker answers alike). pafka has no eligible leader replicas
(KIP-966's ELR is KRaft's): those lists are empty.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from broker.metadata_store import TopicMetadata
from broker.security.auth_helper import authorized_names
from broker.security.authorized_operations import AUTHORIZED_OPERATIONS_OMITTED, TOPIC_OPERATIONS, authorized_operations
from coordinator.common.internal_topics import INTERNAL_TOPICS
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0
#: Kafka's max.request.partition.size.limit default
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
ZERO_UUID = uuid.UUID(int=0)


def _error_topic(name: str, code: ErrorCode) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(error_code=code, name=name, topic_id=ZERO_UUID, is_internal=False,
                                                partitions=[], topic_authorized_operations=TOPIC_OPERATIONS)


def _partitions(broker: BrokerServices, topic: TopicMetadata, start: int,
                limit: int) -> list[DescribeTopicPartitionsResponsePartition]:
    found: list[DescribeTopicPartitionsResponsePartition] = []
    view = broker.cluster_view
    for partition in view.partition_states(topic.name):
        if partition.partition_index < start:
            continue
        if len(found) == limit:
            break
        found.append(DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode.NO_ERROR, partition_index=partition.partition_index,
            leader_id=partition.leader_id, leader_epoch=partition.leader_epoch,
            replica_nodes=list(partition.replicas), isr_nodes=list(partition.isr),
            eligible_leader_replicas=[], last_known_elr=[], offline_replicas=view.offline_replicas(partition)))
    return found


def handle(ctx: RequestContext, broker: BrokerServices,
           request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    requested = sorted({t.name for t in request.topics}) if request.topics else sorted(t.name for t in broker.metadata)
    described: set[str] | None = None
    if broker.authorizer is not None:
        described = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC, requested)
        if not request.topics:
            requested = [name for name in requested if name in described]
    cursor = request.cursor
    if cursor is not None:
        if request.topics and cursor.topic_name not in requested:
            return DescribeTopicPartitionsResponse(
                throttle_time_ms=0, next_cursor=None,
                topics=[_error_topic(name, ErrorCode.INVALID_REQUEST) for name in requested])
        requested = [name for name in requested if name >= cursor.topic_name]
    remaining = max(0, min(request.response_partition_limit, MAX_REQUEST_PARTITION_SIZE_LIMIT))
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor = None
    for i, name in enumerate(requested):
        if described is not None and name not in described:
            topics.append(DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID, is_internal=False,
                partitions=[], topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        topic = broker.metadata.get(name)
        if topic is None:
            topics.append(_error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        if remaining == 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        start = cursor.partition_index if cursor is not None and i == 0 and name == cursor.topic_name else 0
        partitions = _partitions(broker, topic, start, remaining)
        remaining -= len(partitions)
        topics.append(DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.NO_ERROR, name=name, topic_id=topic.topic_id, is_internal=name in INTERNAL_TOPICS,
            partitions=partitions,
            topic_authorized_operations=authorized_operations(ctx, broker, ResourceType.TOPIC, name)))
        last = partitions[-1].partition_index if partitions else start - 1
        if last + 1 < topic.partition_count and remaining == 0:
            next_cursor = Cursor(topic_name=name, partition_index=last + 1)
            break
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
