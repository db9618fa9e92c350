"""DescribeProducers (61): the active idempotent/transactional producers of partitions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer
    from broker.socket_server import RequestContext

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


def _producers(server: "KafkaServer", topic: str, index: int) -> PartitionResponse:
    partition = server.replica_manager.get_partition(topic, index)
    if partition is None:
        return PartitionResponse(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 error_message=None, active_producers=[])
    state = partition.log.producer_state
    entries = state.active_producers if state is not None else {}
    return PartitionResponse(
        partition_index=index, error_code=ErrorCode.NO_ERROR, error_message=None,
        active_producers=[
            ProducerState(
                producer_id=pid, producer_epoch=entry.producer_epoch, last_sequence=entry.last_seq,
                last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=-1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
            )
            for pid, entry in sorted(entries.items())
        ],
    )


def handle(ctx: "RequestContext", server: "KafkaServer", request: DescribeProducersRequest) -> DescribeProducersResponse:
    return DescribeProducersResponse(
        throttle_time_ms=0,
        topics=[TopicResponse(name=t.name, partitions=[_producers(server, t.name, i) for i in t.partition_indexes])
                for t in request.topics],
    )
