"""AddPartitionsToTxn (24): a transactional producer names the partitions it is about to write.

v0-v3 come from clients: one transaction per request. v4+ are Kafka's
broker-to-broker form (KIP-890 part 1): many transactions per request, each
either added (as a client's would be) or, with ``verify_only``, only checked
against the coordinator's ongoing transaction: a partition leader asking
whether a transactional produce belongs there. Kafka requires CLUSTER_ACTION
for v4+ (a broker's principal has it as a super user).

As Kafka's KafkaApis does, partitions of topics that do not exist fail the
whole transaction: they get UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, and nothing is added. Otherwise the transaction
coordinator's answer applies to every partition (added) or to each partition
(verified). Clients before v2 get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED;
callers before v5 get INVALID_TXN_STATE for TRANSACTION_ABORTABLE, the error
code v5 introduced.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster, authorize_transactional_id, authorized_names
from coordinator.transaction.transaction_metadata import TopicPartition
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTransaction,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5

PRODUCER_FENCED_VERSION = 2
BATCHED_VERSION = 4
TRANSACTION_ABORTABLE_VERSION = 5


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    version = ctx.api_version
    if version < BATCHED_VERSION:
        partitions = [(topic.name, index) for topic in request.v3_and_below_topics for index in topic.partitions]
        transactional_id = request.v3_and_below_transactional_id
        errors = (_refused(ctx, broker, version, transactional_id, partitions)
                  or await _add(broker, version, transactional_id, request.v3_and_below_producer_id,
                                request.v3_and_below_producer_epoch, partitions))
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_by_topic(errors))
    if not authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION):  # the broker-to-broker form
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                          results_by_transaction=[])
    results = await asyncio.gather(*(_transaction(ctx, broker, version, txn) for txn in request.transactions))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_transaction=list(results))


def _refused(ctx: RequestContext, broker: BrokerServices, version: int, transactional_id: str,
             partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """Kafka's rule: a client (v0-v3) needs WRITE on the transactional id, and every caller WRITE on each
    topic; when a topic is refused the others are not attempted. Empty when nothing is refused."""
    if version < BATCHED_VERSION and not authorize_transactional_id(ctx, broker, AclOperation.WRITE,
                                                                    transactional_id):
        return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = authorized_names(ctx, broker, AclOperation.WRITE, ResourceType.TOPIC, (t for t, _ in partitions))
    if all(t in writable for t, _ in partitions):
        return {}
    return {tp: ErrorCode.OPERATION_NOT_ATTEMPTED if tp[0] in writable else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            for tp in partitions}


async def _transaction(ctx: RequestContext, broker: BrokerServices, version: int,
                       txn: AddPartitionsToTxnTransaction) -> AddPartitionsToTxnResult:
    partitions = [(topic.name, index) for topic in txn.topics for index in topic.partitions]
    refused = _refused(ctx, broker, version, txn.transactional_id, partitions)
    if refused:
        errors = refused
    elif txn.verify_only:
        errors = _unknown_partitions(broker, partitions) or broker.transaction_coordinator.verify_partitions_in_transaction(
            txn.transactional_id, txn.producer_id, txn.producer_epoch, set(partitions))
    else:
        errors = await _add(broker, version, txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions)
    if version < TRANSACTION_ABORTABLE_VERSION:
        errors = {tp: ErrorCode.INVALID_TXN_STATE if e == ErrorCode.TRANSACTION_ABORTABLE else e
                  for tp, e in errors.items()}
    return AddPartitionsToTxnResult(transactional_id=txn.transactional_id, topic_results=_by_topic(errors))


async def _add(broker: BrokerServices, version: int, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    unknown = _unknown_partitions(broker, partitions)
    if unknown:
        return unknown
    error = await broker.transaction_coordinator.handle_add_partitions_to_transaction(
        transactional_id, producer_id, producer_epoch, set(partitions))
    if error == ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return dict.fromkeys(partitions, error)


def _unknown_partitions(broker: BrokerServices, partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """Every partition's error when one does not exist (nothing is attempted then); else empty."""
    unknown = set()
    for topic, index in partitions:
        meta = broker.metadata.get(topic)
        if meta is None or not 0 <= index < meta.partition_count:
            unknown.add((topic, index))
    if not unknown:
        return {}
    return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in partitions}


def _by_topic(errors: dict[TopicPartition, ErrorCode]) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=error))
    return [AddPartitionsToTxnTopicResult(name=name, results_by_partition=results)
            for name, results in by_topic.items()]
