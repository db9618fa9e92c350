"""OffsetDelete (47): remove committed offsets of partitions a group no longer consumes (KIP-496)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group, authorized_names
from coordinator.group.group_metadata import TopicPartition
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, broker: BrokerServices, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    errors: dict[TopicPartition, ErrorCode] = {}
    partitions: list[TopicPartition] = []
    readable = authorized_names(ctx, broker, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        meta = broker.metadata.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= p.partition_index < meta.partition_count:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                partitions.append(tp)
    future: asyncio.Future[tuple[ErrorCode, dict[TopicPartition, ErrorCode]]] = (
        asyncio.get_running_loop().create_future())

    def done(error: ErrorCode, result: dict[TopicPartition, ErrorCode]) -> None:
        if not future.done():
            future.set_result((error, result))

    broker.group_coordinator.handle_delete_offsets(request.group_id, partitions, done)
    error, result = await future
    if error != ErrorCode.NO_ERROR:
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
    errors.update(result)
    return OffsetDeleteResponse(error_code=ErrorCode.NO_ERROR, throttle_time_ms=0, topics=[
        OffsetDeleteResponseTopic(name=t.name, partitions=[
            OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                          error_code=errors.get((t.name, p.partition_index), ErrorCode.NO_ERROR))
            for p in t.partitions])
        for t in request.topics])
