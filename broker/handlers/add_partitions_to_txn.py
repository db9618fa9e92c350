"""AddPartitionsToTxn (24): a transactional producer names the partitions it is about to write.

As Kafka's KafkaApis does, partitions of topics that do not exist fail the
whole request: they get UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, and nothing is added. Otherwise the transaction
coordinator's answer applies to every partition. Clients before v2 get
INVALID_PRODUCER_EPOCH for PRODUCER_FENCED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.transaction.transaction_metadata import TopicPartition
from protocol.errors import ErrorCode
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.socket_server import RequestContext

API_KEY = 24
MIN_VERSION = 0
# v4+ are the broker-to-broker batched and verify-only calls of KIP-890 part 1 (a partition leader
# checking a transactional produce): pafka's leaders do not verify yet, so they are not served.
MAX_VERSION = 3

PRODUCER_FENCED_VERSION = 2


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    partitions: list[TopicPartition] = []
    unknown: set[TopicPartition] = set()
    for topic in request.v3_and_below_topics:
        meta = broker.metadata.get(topic.name)
        for index in topic.partitions:
            partitions.append((topic.name, index))
            if meta is None or not 0 <= index < meta.partition_count:
                unknown.add((topic.name, index))
    errors: dict[TopicPartition, ErrorCode]
    if unknown:
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for tp in partitions}
    else:
        error = await broker.transaction_coordinator.handle_add_partitions_to_transaction(
            request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, set(partitions))
        if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < PRODUCER_FENCED_VERSION:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        errors = dict.fromkeys(partitions, error)
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for tp in partitions:
        by_topic.setdefault(tp[0], []).append(
            AddPartitionsToTxnPartitionResult(partition_index=tp[1], partition_error_code=errors[tp]))
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[AddPartitionsToTxnTopicResult(name=name, results_by_partition=results)
                                       for name, results in by_topic.items()])
