"""OffsetFetch (9): a group's committed offsets (batched groups from v8, KIP-709).

A partition without a committed offset gets offset -1 and empty metadata
with no error, as in Kafka; ``topics`` null means every committed offset.
With ``require_stable`` (v7+), a partition whose commit is not yet settled
(in flight, or in an open transaction) gets UNSTABLE_OFFSET_COMMIT and -1.

v0 (removed in Kafka 4) has v1's layout. Kafka 3.9 read v0 from ZooKeeper
(where v0 commits went) on a ZooKeeper cluster and refused it with
UNSUPPORTED_VERSION in KRaft mode; pafka's lone broker has no ZooKeeper and
its OffsetCommit v0 writes to the group coordinator, so v0 reads from the
coordinator too: what a v0 client commits, it reads back.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, TypedDict

from broker.security.auth_helper import authorize_group, authorized_names
from coordinator.group.group_metadata import OffsetAndMetadata, TopicPartition
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from protocol.primitives import UUID_ZERO

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 9
MIN_VERSION = 0  # Kafka 4.0's floor is v1 (KIP-896); v0 as described above
MAX_VERSION = 10

NO_METADATA = ""


#: (partition index, committed offset or None, the partition's error).
_Fetched = tuple[int, OffsetAndMetadata | None, ErrorCode]


def _fetch_group(ctx: RequestContext, broker: BrokerServices, group_id: str, require_stable: bool,
                 wanted: list[tuple[str, list[int]]] | None, member_id: str | None = None, member_epoch: int = -1
                 ) -> tuple[ErrorCode, list[tuple[str, list[_Fetched]]]]:
    """Needs DESCRIBE on the group; a named topic without DESCRIBE answers TOPIC_AUTHORIZATION_FAILED, and one
    left out of an all-topics fetch is not reported. A member of a consumer-protocol group (v9+) is checked
    as Kafka checks it (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
    if not authorize_group(ctx, broker, AclOperation.DESCRIBE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    member_error = broker.group_coordinator.consumer_offset_fetch_error(group_id, member_id, member_epoch)
    if member_error is not None:
        return member_error, []
    partitions: list[TopicPartition] | None = None
    if wanted is not None:
        partitions = [(t, p) for t, indexes in wanted for p in indexes]
    error, offsets, unstable = broker.group_coordinator.handle_fetch_offsets(group_id, require_stable, partitions)
    if error != ErrorCode.NO_ERROR:
        return error, []
    by_topic: dict[str, list[_Fetched]] = {}
    if wanted is not None:
        described = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in wanted))
        for topic, indexes in wanted:
            by_topic.setdefault(topic, []).extend(
                (p, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED) if topic not in described else
                (p, offsets.get((topic, p)),
                 ErrorCode.UNSTABLE_OFFSET_COMMIT if (topic, p) in unstable else ErrorCode.NO_ERROR)
                for p in indexes)
    else:
        described = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                     (t for t, _ in offsets))
        for (topic, p), om in sorted(offsets.items()):
            if topic in described:
                by_topic.setdefault(topic, []).append((p, om, ErrorCode.NO_ERROR))
    return ErrorCode.NO_ERROR, list(by_topic.items())


class _Committed(TypedDict):
    """A partition's committed offset, as the response's partition fields."""

    committed_offset: int
    committed_leader_epoch: int
    metadata: str


def _values(om: OffsetAndMetadata | None) -> _Committed:
    if om is None:
        return {"committed_offset": -1, "committed_leader_epoch": -1, "metadata": NO_METADATA}
    return {"committed_offset": om.offset, "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata}


def _handle_single(ctx: RequestContext, version: int, broker: BrokerServices, request: OffsetFetchRequest) -> OffsetFetchResponse:
    wanted = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
    error, topics = _fetch_group(ctx, broker, request.group_id, request.require_stable if version >= 7 else False, wanted)
    if error != ErrorCode.NO_ERROR and version < 2:
        # v1 has no top-level error: every requested partition carries it.
        return OffsetFetchResponse(throttle_time_ms=0, topics=[
            OffsetFetchResponseTopic(name=name, partitions=[
                OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, metadata=NO_METADATA,
                                             error_code=error) for p in indexes])
            for name, indexes in (wanted or [])])
    return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[
        OffsetFetchResponseTopic(name=name, partitions=[
            OffsetFetchResponsePartition(partition_index=p, error_code=code, **_values(om))
            for p, om, code in parts])
        for name, parts in topics])


def _handle_batched(ctx: RequestContext, version: int, broker: BrokerServices, request: OffsetFetchRequest) -> OffsetFetchResponse:
    by_id = version >= 10
    groups = []
    for group in request.groups:
        unknown_ids: list[tuple[uuid.UUID, list[int]]] = []
        wanted: list[tuple[str, list[int]]] | None = None
        if group.topics is not None:
            wanted = []
            for t in group.topics:
                name = t.name
                if by_id:
                    meta = broker.metadata.by_id(t.topic_id)
                    if meta is None:
                        unknown_ids.append((t.topic_id, list(t.partition_indexes)))
                        continue
                    name = meta.name
                wanted.append((name, list(t.partition_indexes)))
        member = (group.member_id, group.member_epoch) if version >= 9 else (None, -1)
        error, topics = _fetch_group(ctx, broker, group.group_id, request.require_stable, wanted, *member)
        response_topics = []
        for name, parts in topics:
            meta = broker.metadata.get(name) if by_id else None
            if by_id and meta is None:
                continue  # a deleted topic has no id to report
            response_topics.append(OffsetFetchResponseTopics(
                name=name, topic_id=meta.topic_id if meta is not None else UUID_ZERO,
                partitions=[OffsetFetchResponsePartitions(partition_index=p, error_code=code,
                                                          **_values(om)) for p, om, code in parts]))
        if error == ErrorCode.NO_ERROR:
            for topic_id, indexes in unknown_ids:
                response_topics.append(OffsetFetchResponseTopics(topic_id=topic_id, partitions=[
                    OffsetFetchResponsePartitions(partition_index=p, committed_offset=-1, metadata=NO_METADATA,
                                                  error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in indexes]))
        groups.append(OffsetFetchResponseGroup(group_id=group.group_id, topics=response_topics, error_code=error))
    return OffsetFetchResponse(throttle_time_ms=0, groups=groups)


def handle(ctx: RequestContext, broker: BrokerServices, request: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.api_version >= 8:
        return _handle_batched(ctx, ctx.api_version, broker, request)
    return _handle_single(ctx, ctx.api_version, broker, request)
