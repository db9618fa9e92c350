"""TxnOffsetCommit (28): a transactional producer commits a group's offsets inside its transaction.

The offsets go to the group coordinator, written to ``__consumer_offsets``
in the producer's transaction and kept pending until its marker: the commit
marker makes them the group's committed offsets, the abort marker drops
them. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, as
KafkaApis checks them before the coordinator sees the request. Member id,
generation and group instance id exist from v3 (KIP-447); older requests
carry none, and the group coordinator then does not check them. The write is
verified with the transaction coordinator (KIP-890 part 1); v5 (transaction
version 2) adds the offsets partition to the transaction instead.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group, authorize_transactional_id, authorized_names
from coordinator.group.group_metadata import OffsetAndMetadata, TopicPartition
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5

#: Transaction version 2 (KIP-890 part 2): the commit also does AddOffsetsToTxn's work, adding the
#: group's __consumer_offsets partition to the transaction (clients without transaction version 2
#: send v4 at most).
IMPLICIT_ADD_VERSION = 5

#: The first version with member id, generation id and group instance id.
MEMBER_VERSION = 3
#: The first version with the committed leader epoch.
LEADER_EPOCH_VERSION = 2


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    version = ctx.api_version
    refusal = None
    if not authorize_transactional_id(ctx, broker, AclOperation.WRITE, request.transactional_id):
        refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if refusal is not None:
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
            TxnOffsetCommitResponseTopic(name=topic.name, partitions=[
                TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=refusal)
                for p in topic.partitions]) for topic in request.topics])
    coordinator = broker.group_coordinator
    now = coordinator.scheduler.now_ms()
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    readable = authorized_names(ctx, broker, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        meta = broker.metadata.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if meta is None or not 0 <= p.partition_index < meta.partition_count:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(
                p.committed_offset, p.committed_leader_epoch if version >= LEADER_EPOCH_VERSION else -1,
                p.committed_metadata if p.committed_metadata is not None else "", now)
    if offsets:
        future: asyncio.Future[dict[TopicPartition, ErrorCode]] = asyncio.get_running_loop().create_future()

        def done(result: dict[TopicPartition, ErrorCode]) -> None:
            if not future.done():
                future.set_result(result)

        members = version >= MEMBER_VERSION
        coordinator.handle_txn_commit_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            request.member_id if members else "", request.group_instance_id if members else None,
            request.generation_id if members else -1, offsets, done, request.transactional_id,
            version >= IMPLICIT_ADD_VERSION)
        errors.update(await future)
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TxnOffsetCommitResponseTopic(name=topic.name, partitions=[
            TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                             error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])
