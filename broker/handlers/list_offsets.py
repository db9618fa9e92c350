"""ListOffsets (2): earliest, latest, max timestamp, or the first offset at a time.

As in Kafka's Partition.fetchOffsetForTimestamp, consumers only see offsets
below the high watermark (read_uncommitted) or the last stable offset
(read_committed): "latest" is that bound, and a timestamp lookup that lands at
or beyond it answers offset -1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from replication.partition import READ_COMMITTED, Partition
from storage.log import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer
    from broker.socket_server import RequestContext

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 10  # v11 (KIP-1005 earliest-pending-upload) needs tiered storage
LATEST_TIERED_TIMESTAMP = -5
#: ListOffsets responses carry the offset's leader epoch from v4 on.
LEADER_EPOCH_MIN_VERSION = 4


def _lookup(partition: Partition, timestamp: int, isolation: int, from_replica: bool) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) or (-1, -1, -1) when nothing qualifies."""
    log = partition.log
    if from_replica:
        last_fetchable = partition.log_end_offset
    elif isolation == READ_COMMITTED:
        last_fetchable = partition.last_stable_offset
    else:
        last_fetchable = partition.high_watermark
    if timestamp == LATEST_TIMESTAMP:
        epoch = log.leader_epoch_cache.epoch_for_offset(last_fetchable)
        return -1, last_fetchable, -1 if epoch is None else epoch
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return -1, -1, -1  # no tiered storage: nothing has been uploaded
    found = log.fetch_offset_by_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    if timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP) and found.offset >= last_fetchable:
        return -1, -1, -1
    return found.timestamp, found.offset, -1 if found.leader_epoch is None else found.leader_epoch


def handle(ctx: "RequestContext", server: "KafkaServer", request: ListOffsetsRequest) -> ListOffsetsResponse:
    from_replica = request.replica_id >= 0
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            partition = server.replica_manager.get_partition(topic.name, p.partition_index)
            entry = ListOffsetsPartitionResponse(partition_index=p.partition_index, timestamp=-1, offset=-1,
                                                 leader_epoch=-1)
            if partition is None:
                entry.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.current_leader_epoch >= 0 and p.current_leader_epoch != partition.leader_epoch:
                entry.error_code = (ErrorCode.FENCED_LEADER_EPOCH if p.current_leader_epoch < partition.leader_epoch
                                    else ErrorCode.UNKNOWN_LEADER_EPOCH)
            else:
                entry.timestamp, entry.offset, leader_epoch = _lookup(
                    partition, p.timestamp, request.isolation_level, from_replica)
                if ctx.api_version >= LEADER_EPOCH_MIN_VERSION:
                    # Older versions have no such field: it must keep its default.
                    entry.leader_epoch = leader_epoch
            partitions.append(entry)
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
