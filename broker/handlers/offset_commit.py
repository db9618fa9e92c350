"""OffsetCommit (8): store a group's offsets in __consumer_offsets.

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID
by id from v10), as KafkaApis checks them before the coordinator sees the
request. The response is sent once the commit is in the log.

v0 and v1 (removed in Kafka 4) are served as Kafka 3.9 served them, with one
deliberate difference. v1 carries a generation, a member id and a
per-partition commit timestamp, which Kafka 3.9 records as the commit time
(-1 means now). v0 carries no generation: Kafka 3.9 wrote v0 commits to
ZooKeeper (``/consumers/<group>/offsets``) when it ran on ZooKeeper and
refused them with UNSUPPORTED_VERSION in KRaft mode. pafka's lone broker has
no ZooKeeper, so a v0 commit goes to the group coordinator as a "simple"
commit (generation -1, no member): it is stored in __consumer_offsets, seen
by OffsetFetch at every version, and, as any commit without a generation,
accepted only while the group has no active members (UNKNOWN_MEMBER_ID
otherwise).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group, authorized_names
from coordinator.group.group_metadata import OffsetAndMetadata, TopicPartition
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 8
MIN_VERSION = 0  # Kafka 4.0's floor is v2 (KIP-896); v0-v1 as Kafka 3.9
MAX_VERSION = 10

DEFAULT_RETENTION_TIME = -1
#: v1's per-partition commit timestamp meaning "the broker's now".
DEFAULT_TIMESTAMP = -1
#: The only version whose partitions carry a commit timestamp.
COMMIT_TIMESTAMP_VERSION = 1


async def handle(ctx: RequestContext, broker: BrokerServices, request: OffsetCommitRequest) -> OffsetCommitResponse:
    version = ctx.api_version
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return OffsetCommitResponse(throttle_time_ms=0, topics=[OffsetCommitResponseTopic(
            name=t.name, topic_id=t.topic_id, partitions=[OffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
                for p in t.partitions]) for t in request.topics])
    coordinator = broker.group_coordinator
    now = coordinator.scheduler.now_ms()
    retention = request.retention_time_ms if version <= 4 else DEFAULT_RETENTION_TIME
    expire = now + retention if retention != DEFAULT_RETENTION_TIME else -1
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    names: list[tuple[OffsetCommitRequestTopic, str | None]] = []  # (request topic, resolved name)
    for topic in request.topics:
        meta = broker.metadata.by_id(topic.topic_id) if version >= 10 else broker.metadata.get(topic.name)
        name = meta.name if meta is not None else (None if version >= 10 else topic.name)
        names.append((topic, name))
    readable = authorized_names(ctx, broker, AclOperation.READ, ResourceType.TOPIC,
                                (name for _, name in names if name is not None))
    for topic, name in names:
        meta = broker.metadata.get(name) if name is not None else None
        unknown = ErrorCode.UNKNOWN_TOPIC_ID if version >= 10 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for p in topic.partitions:
            tp = (name or str(topic.topic_id), p.partition_index)
            if name is not None and name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if meta is None or not 0 <= p.partition_index < meta.partition_count:
                errors[tp] = unknown
                continue
            committed_at = now
            if version == COMMIT_TIMESTAMP_VERSION and p.commit_timestamp != DEFAULT_TIMESTAMP:
                committed_at = p.commit_timestamp
            offsets[tp] = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch if version >= 6 else -1,
                                            p.committed_metadata if p.committed_metadata is not None else "",
                                            committed_at, expire)
    if offsets:
        future: asyncio.Future[dict[TopicPartition, ErrorCode]] = asyncio.get_running_loop().create_future()

        def done(result: dict[TopicPartition, ErrorCode]) -> None:
            if not future.done():
                future.set_result(result)

        coordinator.handle_commit_offsets(request.group_id, request.member_id,
                                          request.group_instance_id if version >= 7 else None,
                                          request.generation_id_or_member_epoch, offsets, done,
                                          member_epoch_api=version >= 9)
        errors.update(await future)
    topics = []
    for topic, name in names:
        key = name or str(topic.topic_id)
        topics.append(OffsetCommitResponseTopic(
            name=topic.name, topic_id=topic.topic_id,
            partitions=[OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                      error_code=errors[(key, p.partition_index)])
                        for p in topic.partitions]))
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)
