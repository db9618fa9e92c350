"""Share groups (KIP-932) on pafka's client: what kafka-share-groups.sh needs.

Listing (ListGroups with the type filter ``share``), ShareGroupDescribe, and the
share-partition start offsets: DescribeShareGroupOffsets, AlterShareGroupOffsets
(an empty group only) and DeleteShareGroupOffsets, each sent to the group's
coordinator (retried while it moves or loads, as every group request).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from client.errors import KafkaApiError, api_error, check_error
from client.groups import GroupAdmin, GroupListing
from client.metadata import TopicPartition
from protocol.errors import ErrorCode
from protocol.messages import alter_share_group_offsets as _alter
from protocol.messages import delete_share_group_offsets as _delete
from protocol.messages import describe_share_group_offsets as _offsets
from protocol.messages import list_groups as _lg
from protocol.messages import share_group_describe as _sgd

__all__ = ["ShareGroupDescription", "ShareMemberDescription", "SharePartitionOffset", "alter_share_group_offsets",
           "delete_share_group_offsets", "describe_share_group", "describe_share_group_offsets",
           "list_share_groups"]

SHARE_GROUP_TYPE = "share"
_RETRIABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    host: str
    subscribed_topic_names: list[str]
    assignment: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: list[ShareMemberDescription] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """A share partition's start offset (-1: none yet), its leader epoch and lag (-1: unknown)."""

    start_offset: int
    leader_epoch: int
    lag: int


def list_share_groups(admin: GroupAdmin, states: Iterable[str] = ()) -> list[GroupListing]:
    """The share groups of every broker (ListGroups v5+, filtered by type)."""
    cluster = admin.client.refresh_metadata([])
    wanted = list(states)
    out: list[GroupListing] = []
    for node_id in sorted(cluster.brokers):
        deadline = time.monotonic() + admin.timeout
        conn = admin.client.connection(node_id)
        while True:
            response = conn.request(_lg.ListGroupsRequest(states_filter=wanted, types_filter=[SHARE_GROUP_TYPE]),
                                    version=conn.version_for(_lg.API_KEY))
            assert isinstance(response, _lg.ListGroupsResponse)
            if response.error_code not in _RETRIABLE or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        check_error(response.error_code, api_name="ListGroups")
        out.extend(GroupListing(g.group_id, g.protocol_type, g.group_state) for g in response.groups
                   if g.group_type == SHARE_GROUP_TYPE)
    return sorted(out, key=lambda g: g.group_id)


def describe_share_group(admin: GroupAdmin, group_id: str) -> ShareGroupDescription:
    """ShareGroupDescribe of one group; a group the coordinator does not have raises GROUP_ID_NOT_FOUND."""
    response = admin._request(group_id, _sgd.ShareGroupDescribeRequest(group_ids=[group_id]),
                              lambda r: r.groups[0].error_code)
    assert isinstance(response, _sgd.ShareGroupDescribeResponse)
    g = response.groups[0]
    check_error(g.error_code, api_name="ShareGroupDescribe", message=g.error_message)
    members = [ShareMemberDescription(
        m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host, list(m.subscribed_topic_names),
        sorted(TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions))
        for m in g.members]
    return ShareGroupDescription(g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
                                 members)


def describe_share_group_offsets(admin: GroupAdmin, group_id: str,
                                 partitions: Iterable[TopicPartition] | None = None
                                 ) -> dict[TopicPartition, SharePartitionOffset]:
    """The start offsets of the group's share partitions (every one it initialized when ``partitions`` is None)."""
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [_offsets.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                  for t, ps in by_topic.items()]
    request = _offsets.DescribeShareGroupOffsetsRequest(groups=[
        _offsets.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=topics)])
    response = admin._request(group_id, request, lambda r: r.groups[0].error_code)
    assert isinstance(response, _offsets.DescribeShareGroupOffsetsResponse)
    g = response.groups[0]
    check_error(g.error_code, api_name="DescribeShareGroupOffsets", message=g.error_message)
    out = {}
    for t in g.topics:
        for p in t.partitions:
            check_error(p.error_code, api_name="DescribeShareGroupOffsets", topic=t.topic_name,
                        partition=p.partition_index, message=p.error_message)
            out[TopicPartition(t.topic_name, p.partition_index)] = SharePartitionOffset(
                p.start_offset, p.leader_epoch, p.lag)
    return out


def alter_share_group_offsets(admin: GroupAdmin, group_id: str,
                              offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, KafkaApiError | None]:
    """Reset the start offsets of an empty group; the group's error raises, each partition's is returned."""
    by_topic: dict[str, list[_alter.AlterShareGroupOffsetsRequestPartition]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            _alter.AlterShareGroupOffsetsRequestPartition(partition_index=tp.partition, start_offset=offset))
    request = _alter.AlterShareGroupOffsetsRequest(group_id=group_id, topics=[
        _alter.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in by_topic.items()])
    response = admin._request(group_id, request, lambda r: r.error_code)
    assert isinstance(response, _alter.AlterShareGroupOffsetsResponse)
    check_error(response.error_code, api_name="AlterShareGroupOffsets", message=response.error_message)
    return {TopicPartition(t.topic_name, p.partition_index):
            api_error(p.error_code, api_name="AlterShareGroupOffsets", message=p.error_message)
            if p.error_code else None
            for t in response.responses for p in t.partitions}


def delete_share_group_offsets(admin: GroupAdmin, group_id: str,
                               topics: Iterable[str]) -> dict[str, KafkaApiError | None]:
    """Delete an empty group's state for ``topics``; the group's error raises, each topic's is returned."""
    request = _delete.DeleteShareGroupOffsetsRequest(group_id=group_id, topics=[
        _delete.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in dict.fromkeys(topics)])
    response = admin._request(group_id, request, lambda r: r.error_code)
    assert isinstance(response, _delete.DeleteShareGroupOffsetsResponse)
    check_error(response.error_code, api_name="DeleteShareGroupOffsets", message=response.error_message)
    return {t.topic_name: api_error(t.error_code, api_name="DeleteShareGroupOffsets", message=t.error_message)
            if t.error_code else None for t in response.responses}
