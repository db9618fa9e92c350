"""DescribeProducers (61): the active idempotent/transactional producers of partitions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


def _producers(broker: BrokerServices, topic: str, index: int) -> PartitionResponse:
    code, entries = broker.replica_manager.active_producer_state((topic, index))
    return PartitionResponse(
        partition_index=index, error_code=code, error_message=None,
        active_producers=[
            ProducerState(
                producer_id=pid, producer_epoch=entry.producer_epoch, last_sequence=entry.last_seq,
                last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=-1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
            )
            for pid, entry in sorted(entries.items())
        ],
    )


def handle(ctx: RequestContext, broker: BrokerServices, request: DescribeProducersRequest) -> DescribeProducersResponse:
    readable = authorized_names(ctx, broker, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    return DescribeProducersResponse(
        throttle_time_ms=0,
        topics=[TopicResponse(name=t.name, partitions=[
            _producers(broker, t.name, i) if t.name in readable else PartitionResponse(
                partition_index=i, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None)
            for i in t.partition_indexes]) for t in request.topics],
    )
