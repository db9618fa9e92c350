"""DescribeShareGroupOffsets (90): a share group's share-partition start offsets (and, v1, their lag).

Served only when ``group.coordinator.rebalance.protocols`` lists ``share``
(``REBALANCE_PROTOCOL``), at v0-v1 as Kafka 4.2. As Kafka's KafkaApis: DESCRIBE
on the group (else GROUP_AUTHORIZATION_FAILED for it), DESCRIBE on each named
topic (else TOPIC_AUTHORIZATION_FAILED on its partitions); when no topics are
named every partition the group initialized is described, leaving out the
topics the client may not describe. The lag runs to each partition's high
watermark, read here or asked of the partition's leader
(``broker.partition_end_offsets``); -1 when it cannot be had.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group, authorized_names
from coordinator.group.share_group_offsets import ShareGroupOffsets, SharePartitionOffset, ShareTopicOffsets
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1
REBALANCE_PROTOCOL = "share"
TOPIC_AUTHORIZATION_MESSAGE = "Topic authorization failed."


def _partition(p: SharePartitionOffset) -> DescribeShareGroupOffsetsResponsePartition:
    return DescribeShareGroupOffsetsResponsePartition(
        partition_index=p.partition, start_offset=p.start_offset, leader_epoch=p.leader_epoch, lag=p.lag,
        error_code=p.error, error_message=p.error_message)


def _group(answer: ShareGroupOffsets) -> DescribeShareGroupOffsetsResponseGroup:
    return DescribeShareGroupOffsetsResponseGroup(
        group_id=answer.group_id, error_code=answer.error, error_message=answer.error_message,
        topics=[_topic(t) for t in answer.topics])


def _topic(t: ShareTopicOffsets) -> DescribeShareGroupOffsetsResponseTopic:
    return DescribeShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=t.topic_id,
                                                  partitions=[_partition(p) for p in t.partitions])


async def _describe(ctx: RequestContext, broker: BrokerServices,
                    group: DescribeShareGroupOffsetsRequestGroup) -> DescribeShareGroupOffsetsResponseGroup:
    coordinator = broker.group_coordinator.share_offsets
    if group.topics is None:
        answer = await coordinator.describe(group.group_id, None)
        allowed = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                   [t.topic_name for t in answer.topics])
        answer.topics = [t for t in answer.topics if t.topic_name in allowed]
        return _group(answer)
    if not group.topics:
        return DescribeShareGroupOffsetsResponseGroup(group_id=group.group_id)
    allowed = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC,
                               [t.topic_name for t in group.topics])
    wanted = {t.topic_name: list(t.partitions) for t in group.topics if t.topic_name in allowed}
    answer = await coordinator.describe(group.group_id, wanted)
    response = _group(answer)
    if answer.error == ErrorCode.NO_ERROR:
        response.topics += [DescribeShareGroupOffsetsResponseTopic(topic_name=t.topic_name, partitions=[
            DescribeShareGroupOffsetsResponsePartition(
                partition_index=p, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message=TOPIC_AUTHORIZATION_MESSAGE) for p in t.partitions])
            for t in group.topics if t.topic_name not in allowed]
    return response


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    groups = []
    for group in request.groups:
        if not authorize_group(ctx, broker, AclOperation.DESCRIBE, group.group_id):
            groups.append(DescribeShareGroupOffsetsResponseGroup(
                group_id=group.group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
        else:
            groups.append(await _describe(ctx, broker, group))
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)
