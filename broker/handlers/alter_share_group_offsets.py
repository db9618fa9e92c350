"""AlterShareGroupOffsets (91): reset the share-partition start offsets of an empty share group.

Served only when ``group.coordinator.rebalance.protocols`` lists ``share``
(``REBALANCE_PROTOCOL``), at v0 as Kafka 4.2. As Kafka's KafkaApis: READ on the
group, else the whole answer is GROUP_AUTHORIZATION_FAILED (top level and every
partition); READ on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED. A group with members is NON_EMPTY_GROUP, an
unknown group GROUP_ID_NOT_FOUND (top level and every partition, as Kafka's
error response).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group, authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0
REBALANCE_PROTOCOL = "share"
TOPIC_AUTHORIZATION_MESSAGE = "Topic authorization failed."


def _error_response(request: AlterShareGroupOffsetsRequest, error: ErrorCode,
                    message: str | None) -> AlterShareGroupOffsetsResponse:
    """Kafka's AlterShareGroupOffsetsRequest.getErrorResponse: the error at the top and on every partition."""
    return AlterShareGroupOffsetsResponse(error_code=error, error_message=message, responses=[
        AlterShareGroupOffsetsResponseTopic(topic_name=t.topic_name, partitions=[
            AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index, error_code=error,
                                                    error_message=message) for p in t.partitions])
        for t in request.topics])


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return _error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    allowed = authorized_names(ctx, broker, AclOperation.READ, ResourceType.TOPIC,
                               [t.topic_name for t in request.topics])
    offsets: dict[str, dict[int, int]] = {}
    for topic in request.topics:
        if topic.topic_name in allowed:
            offsets.setdefault(topic.topic_name, {}).update(
                {p.partition_index: p.start_offset for p in topic.partitions})
    answer = await broker.group_coordinator.share_offsets.alter(request.group_id, offsets)
    if answer.error != ErrorCode.NO_ERROR:
        return _error_response(request, answer.error, answer.error_message)
    responses = [AlterShareGroupOffsetsResponseTopic(
        topic_name=t.topic_name, topic_id=t.topic_id, partitions=[
            AlterShareGroupOffsetsResponsePartition(partition_index=p.partition, error_code=p.error,
                                                    error_message=p.error_message) for p in t.partitions])
        for t in answer.topics]
    responses += [AlterShareGroupOffsetsResponseTopic(topic_name=t.topic_name, partitions=[
        AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index,
                                                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                error_message=TOPIC_AUTHORIZATION_MESSAGE) for p in t.partitions])
        for t in request.topics if t.topic_name not in allowed]
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, responses=responses)
