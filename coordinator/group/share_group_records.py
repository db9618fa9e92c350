"""The ``__consumer_offsets`` records of a share group: what a change writes, and the group they rebuild.

Kafka's GroupCoordinatorRecordHelpers for share groups. As for the consumer
groups (``consumer_group_records``), :class:`ShareGroupChange` takes a snapshot
of what a heartbeat (or a fencing, a leave, an initialization) may touch and
afterwards gives the records of the difference, in the order Kafka writes them:

1. for each member gone: the tombstones of its current assignment, its target
   and its metadata;
2. a member's metadata when it joined or its subscription (or client) changed;
3. the subscribed topics' metadata when they changed, then the group epoch
   when it moved;
4. every changed target of a new target assignment, then the assignment epoch;
5. a member's current assignment when it moved;
6. the share partitions' state metadata (initializing, initialized, deleting)
   when it changed.

They are appended through the same coordinator log as the consumer groups'
(``ConsumerGroupLog``); :func:`rebuild_share_group` turns what a load replayed
back into the group.
"""

from __future__ import annotations

import uuid

from coordinator.common.coordinator_log import KeyValues
from coordinator.group.consumer_group import Assignment, TopicInfo
from coordinator.group.record_formats import ConsumerGroupPartitionMetadataValue, TopicMetadata
from coordinator.group.share_group import ShareGroup, ShareGroupMember, TopicPartitionsInfo
from coordinator.group.share_group_record_formats import (
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_PARTITION_METADATA,
    SHARE_GROUP_STATE_PARTITION_METADATA,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    LoadedShareGroup,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupRecordKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue,
    ShareGroupValue,
    StateTopics,
    encode_share_group_key,
    encode_share_group_value,
)

#: Kafka's MemberState byte of a share group member (always stable: it has nothing to revoke).
_STABLE = 0


def _record(record_type: int, group_id: str, value: ShareGroupValue | None,
            member_id: str | None = None) -> tuple[bytes, bytes | None]:
    key = encode_share_group_key(ShareGroupRecordKey(record_type, group_id, member_id))
    return key, None if value is None else encode_share_group_value(value)


def _normalized(assignment: Assignment | None) -> dict[uuid.UUID, frozenset[int]]:
    return {} if assignment is None else {t: p for t, p in assignment.items() if p}


def _metadata(member: ShareGroupMember) -> ShareGroupMemberMetadataValue:
    return ShareGroupMemberMetadataValue(member.rack_id, member.client_id, member.client_host,
                                         member.subscribed_topic_names)


def _current(member: ShareGroupMember) -> ShareGroupCurrentMemberAssignmentValue:
    return ShareGroupCurrentMemberAssignmentValue(member.member_epoch, member.previous_member_epoch, _STABLE,
                                                  _normalized(member.assigned))


def _state_topics(info: TopicPartitionsInfo) -> StateTopics:
    return tuple((topic_id, name, partitions) for topic_id, (name, partitions) in sorted(
        info.items(), key=lambda item: str(item[0])))


def state_metadata(group: ShareGroup) -> ShareGroupStatePartitionMetadataValue:
    return ShareGroupStatePartitionMetadataValue(
        _state_topics(group.initializing), _state_topics(group.initialized),
        tuple(sorted(group.deleting.items(), key=lambda item: str(item[0]))))


def member_tombstones(group_id: str, member_id: str) -> KeyValues:
    """A member leaves: its current assignment, its target, then its metadata."""
    return [_record(t, group_id, None, member_id) for t in (
        SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, SHARE_GROUP_MEMBER_METADATA)]


def share_group_tombstones(group: ShareGroup) -> KeyValues:
    """The group is deleted: every member's records, then the group's own, its metadata last."""
    records: KeyValues = []
    for member_id in sorted(set(group.members) | set(group.target)):
        records += member_tombstones(group.group_id, member_id)
    records += [_record(t, group.group_id, None) for t in (
        SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, SHARE_GROUP_PARTITION_METADATA,
        SHARE_GROUP_STATE_PARTITION_METADATA, SHARE_GROUP_METADATA)]
    return records


def _partition_metadata(metadata: dict[str, TopicInfo]) -> ConsumerGroupPartitionMetadataValue:
    return ConsumerGroupPartitionMetadataValue(tuple(
        TopicMetadata(info.topic_id, name, info.num_partitions) for name, info in sorted(metadata.items())))


class ShareGroupChange:
    """What a change of ``group`` touching the members ``member_ids`` writes (see the module's docstring)."""

    def __init__(self, group: ShareGroup, member_ids: list[str]) -> None:
        self.group_epoch = group.group_epoch
        self.assignment_epoch = group.assignment_epoch
        self.subscription_metadata = dict(group.subscription_metadata)
        self.members = {m: group.members.get(m) for m in dict.fromkeys(member_ids)}
        self.target = {m: _normalized(t) for m, t in group.target.items()}
        self.state = state_metadata(group)

    def records(self, group: ShareGroup) -> KeyValues:
        gid = group.group_id
        records: KeyValues = []
        for member_id, before in self.members.items():
            if before is not None and member_id not in group.members:
                records += member_tombstones(gid, member_id)
        changed = {m: after for m, before in self.members.items()
                   if (after := group.members.get(m)) is not None and after != before}
        for member_id, after in changed.items():
            before = self.members[member_id]
            if before is None or _metadata(before) != _metadata(after):
                records.append(_record(SHARE_GROUP_MEMBER_METADATA, gid, _metadata(after), member_id))
        if group.subscription_metadata != self.subscription_metadata:
            records.append(_record(SHARE_GROUP_PARTITION_METADATA, gid,
                                   _partition_metadata(group.subscription_metadata)))
        if group.group_epoch != self.group_epoch:
            records.append(_record(SHARE_GROUP_METADATA, gid, ShareGroupMetadataValue(group.group_epoch)))
        records += self._target_records(group)
        for member_id, after in changed.items():
            before = self.members[member_id]
            if before is None or _current(before) != _current(after):
                records.append(_record(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, _current(after), member_id))
        state = state_metadata(group)
        if state != self.state:
            records.append(_record(SHARE_GROUP_STATE_PARTITION_METADATA, gid, state))
        return records

    def _target_records(self, group: ShareGroup) -> KeyValues:
        records: KeyValues = []
        for member_id in sorted(group.target):
            target = _normalized(group.target[member_id])
            if self.target.get(member_id) != target:
                records.append(_record(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, group.group_id,
                                       ShareGroupTargetAssignmentMemberValue(target), member_id))
        if group.assignment_epoch != self.assignment_epoch:
            records.append(_record(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id,
                                   ShareGroupTargetAssignmentMetadataValue(group.assignment_epoch)))
        return records


def _topics_info(topics: StateTopics) -> TopicPartitionsInfo:
    return {topic_id: (name, partitions) for topic_id, name, partitions in topics}


def rebuild_share_group(group_id: str, loaded: LoadedShareGroup) -> ShareGroup:
    """The group its records describe: epochs, subscribed topics, members with their assignments, the
    target assignment and its share partitions' state."""
    group = ShareGroup(group_id)
    group.group_epoch = loaded.group_epoch
    group.assignment_epoch = loaded.assignment_epoch
    if loaded.partition_metadata is not None:
        group.subscription_metadata = {t.topic_name: TopicInfo(t.topic_id, t.num_partitions)
                                       for t in loaded.partition_metadata.topics}
    if loaded.state_metadata is not None:
        group.initializing = _topics_info(loaded.state_metadata.initializing)
        group.initialized = _topics_info(loaded.state_metadata.initialized)
        group.deleting = dict(loaded.state_metadata.deleting)
    for member_id, metadata in loaded.members.items():
        current = loaded.current.get(member_id)
        group.members[member_id] = ShareGroupMember(
            member_id, rack_id=metadata.rack_id, client_id=metadata.client_id, client_host=metadata.client_host,
            subscribed_topic_names=tuple(sorted(set(metadata.subscribed_topic_names))),
            member_epoch=0 if current is None else current.member_epoch,
            previous_member_epoch=0 if current is None else current.previous_member_epoch,
            assigned={} if current is None else dict(current.assigned))
    group.target = {m: dict(t) for m, t in loaded.targets.items() if m in group.members}
    return group
