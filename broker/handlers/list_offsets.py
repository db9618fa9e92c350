"""ListOffsets (2): earliest, latest, max timestamp, or the first offset at a time.

The lookup is ``ReplicaManager.fetch_offset_for_timestamp``. As in Kafka's Partition.fetchOffsetForTimestamp, consumers only see offsets
below the high watermark (read_uncommitted) or the last stable offset
(read_committed): "latest" is that bound, and a timestamp lookup that lands at
or beyond it answers offset -1. A new leader whose high watermark has not yet
reached the start of its epoch answers those two OFFSET_NOT_AVAILABLE (KIP-207).

v0 (removed in Kafka 4, served as Kafka 3.9 served it) asks a different
question: up to ``max_num_offsets`` offsets "before" a time, answered as the
``old_style_offsets`` list by ``ReplicaManager.legacy_fetch_offsets_for_timestamp``
(segment starts dated by file modification time, plus the log end offset;
a consumer's list is capped at the high watermark). Burrow and sarama's
``Client.GetOffset`` under its default Version ask this for -1 and -2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 2
MIN_VERSION = 0
MAX_VERSION = 10  # v11 (KIP-1005 earliest-pending-upload) needs tiered storage
#: ListOffsets responses carry the offset's leader epoch from v4 on.
LEADER_EPOCH_MIN_VERSION = 4
#: replica_id of a consumer and of a debugging client (>= 0: a follower).
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
#: OFFSET_NOT_AVAILABLE (a new leader's high watermark still below its epoch's start) from v5
#: on; older versions get LEADER_NOT_AVAILABLE, as in Kafka.
OFFSET_NOT_AVAILABLE_MIN_VERSION = 5


def _handle_v0(broker: BrokerServices, request: ListOffsetsRequest) -> ListOffsetsResponse:
    from_consumer = request.replica_id == CONSUMER_REPLICA_ID
    fetch_only_from_leader = request.replica_id != DEBUGGING_REPLICA_ID
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            error, offsets = broker.replica_manager.legacy_fetch_offsets_for_timestamp(
                (topic.name, p.partition_index), p.timestamp, p.max_num_offsets, from_consumer,
                fetch_only_from_leader)
            if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                error = broker.cluster_view.unhosted_error(topic.name, p.partition_index)
            partitions.append(ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=error,
                                                           old_style_offsets=offsets))
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(topics=topics)


def handle(ctx: RequestContext, broker: BrokerServices, request: ListOffsetsRequest) -> ListOffsetsResponse:
    denied: list[ListOffsetsTopicResponse] = []
    if broker.authorizer is not None:
        described = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                     (t.name for t in request.topics))
        denied = [ListOffsetsTopicResponse(name=t.name, partitions=[
            ListOffsetsPartitionResponse(partition_index=p.partition_index,
                                         error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in t.partitions]) for t in request.topics if t.name not in described]
        request.topics = [t for t in request.topics if t.name in described]
    response = _handle_v0(broker, request) if ctx.api_version == 0 else _handle(ctx, broker, request)
    response.topics.extend(denied)
    return response


def _handle(ctx: RequestContext, broker: BrokerServices, request: ListOffsetsRequest) -> ListOffsetsResponse:
    # As Kafka: only a consumer's request has an isolation level (a follower and a debugging
    # client see up to the log end), and only a debugging client may ask a follower.
    isolation_level = request.isolation_level if request.replica_id == CONSUMER_REPLICA_ID else None
    fetch_only_from_leader = request.replica_id != DEBUGGING_REPLICA_ID
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            found = broker.replica_manager.fetch_offset_for_timestamp(
                (topic.name, p.partition_index), p.timestamp, isolation_level, p.current_leader_epoch,
                fetch_only_from_leader)
            error = found.error_code
            if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                error = broker.cluster_view.unhosted_error(topic.name, p.partition_index)
            elif error == ErrorCode.OFFSET_NOT_AVAILABLE and ctx.api_version < OFFSET_NOT_AVAILABLE_MIN_VERSION:
                error = ErrorCode.LEADER_NOT_AVAILABLE  # what older clients know to retry
            entry = ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=error,
                                                 timestamp=found.timestamp, offset=found.offset, leader_epoch=-1)
            if ctx.api_version >= LEADER_EPOCH_MIN_VERSION:
                # Older versions have no such field: it must keep its default.
                entry.leader_epoch = found.leader_epoch
            partitions.append(entry)
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
