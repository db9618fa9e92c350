"""What the coordinator answers about consumer-protocol groups besides their heartbeats.

- ConsumerGroupDescribe, and the consumer groups ListGroups lists;
- OffsetCommit (and TxnOffsetCommit) from their members: the member id and
  its current member epoch (sent as the generation id) are checked,
  STALE_MEMBER_EPOCH for another epoch (ILLEGAL_GENERATION in a transaction); the offsets are stored with the classic offsets of the same
  group id (``GroupOffsets``' store), and read back by OffsetFetch as any;
- a JoinGroup for an empty consumer group drops it so the classic group can
  form (one with members answers its classic members itself:
  ``consumer_group_classic_members``); a classic member's commit carries its
  member epoch as the generation (ILLEGAL_GENERATION for another);
- OffsetDelete: GROUP_SUBSCRIBED_TO_TOPIC for the partitions of a topic a
  member subscribes to (by name or through its expression);
- DeleteGroups: NON_EMPTY_GROUP for a consumer group with members.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.common.scheduler import Scheduler
from coordinator.group.consumer_group import ConsumerGroup
from coordinator.group.consumer_group_heartbeat import ConsumerGroupHeartbeat
from coordinator.group.consumer_group_requests import ConsumerGroupDescription
from coordinator.group.group_metadata import GroupMetadata, GroupState, OffsetAndMetadata, TopicPartition
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_offsets import CommitCallback
from coordinator.group.group_status import GroupStatus
from protocol.errors import ErrorCode


class ConsumerGroupAdmin:
    """Owned by the coordinator, over the groups of its ``ConsumerGroupHeartbeat``."""

    def __init__(self, heartbeats: ConsumerGroupHeartbeat, manager: GroupMetadataManager, scheduler: Scheduler,
                 status: GroupStatus) -> None:
        self.heartbeats = heartbeats
        self.manager = manager
        self.scheduler = scheduler
        self.status = status

    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self.heartbeats.groups

    # -- ConsumerGroupDescribe -----------------------------------------------------------
    def describe(self, group_ids: list[str]) -> list[ConsumerGroupDescription]:
        return [self._describe(group_id) for group_id in group_ids]

    def _describe(self, group_id: str) -> ConsumerGroupDescription:
        error = self.status.validate(group_id)
        if error is not None:
            return ConsumerGroupDescription(group_id, error)
        group = self.heartbeats.groups.get(group_id)
        if group is None:
            return ConsumerGroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND)
        assignor = self.heartbeats.assignor_for(group.members.values())
        return ConsumerGroupDescription(group_id, group=group, assignor_name=assignor)

    # -- ListGroups ----------------------------------------------------------------------
    def list_groups(self, states: set[str]) -> list[ConsumerGroup]:
        """The consumer groups, filtered by state (case-insensitive) when ``states`` names some."""
        if not self.status.active:
            return []
        wanted = {s.lower() for s in states}
        return [g for g in self.heartbeats.groups.values() if not wanted or str(g.state).lower() in wanted]

    # -- OffsetCommit --------------------------------------------------------------------
    def commit_offsets(self, group_id: str, member_id: str, member_epoch: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata], callback: CommitCallback,
                       member_epoch_api: bool = True) -> None:
        """``member_epoch_api``: the request is OffsetCommit v9+, the versions a consumer-protocol member
        must use (an older one from a member is UNSUPPORTED_VERSION)."""
        error = self.status.validate(group_id, allow_empty_id=True) or self._commit_error(
            group_id, member_id, member_epoch, member_epoch_api)
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return
        self.manager.store_offsets(self._offsets_holder(group_id), offsets, callback)

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           member_epoch: int, offsets: dict[TopicPartition, OffsetAndMetadata],
                           callback: CommitCallback, transactional_id: str | None = None,
                           add_to_transaction: bool = False) -> None:
        """TxnOffsetCommit from a member: checked as a commit, but TxnOffsetCommit has no
        STALE_MEMBER_EPOCH, so another epoch is ILLEGAL_GENERATION (as Kafka converts it)."""
        error = self.status.validate(group_id) or self._commit_error(group_id, member_id, member_epoch)
        if error == ErrorCode.STALE_MEMBER_EPOCH:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return
        self.manager.store_transactional_offsets(self._offsets_holder(group_id), producer_id, producer_epoch, offsets,
                                                 callback, transactional_id, add_to_transaction)

    def offset_fetch_error(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetFetch: a fetch naming a member (or an epoch) must be its
        current one; None also for a group that is not a consumer group."""
        group = self.heartbeats.groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch == member.member_epoch:
            return None
        return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH

    def _commit_error(self, group_id: str, member_id: str, member_epoch: int,
                      member_epoch_api: bool = True) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetCommit (a transactional commit passes ``member_epoch_api``)."""
        group = self.heartbeats.groups[group_id]
        if member_epoch < 0 and not group.members:
            return None  # an admin client, or a consumer that assigns itself partitions, to an empty group
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is not None:
            # A classic member commits with any version, its member epoch being its generation.
            return ErrorCode.ILLEGAL_GENERATION if member_epoch != member.member_epoch else None
        if not member_epoch_api:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def _offsets_holder(self, group_id: str) -> GroupMetadata:
        """The classic group of the same id that holds the offsets (Empty, without members)."""
        holder = self.manager.get_group(group_id)
        if holder is None or holder.is_(GroupState.DEAD):
            holder = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.scheduler.now_ms()))
        return holder

    # -- OffsetDelete --------------------------------------------------------------------
    def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                       callback: Callable[[ErrorCode, dict[TopicPartition, ErrorCode]], None]) -> None:
        """Kafka's OffsetMetadataManager.deleteOffsets for a consumer group: a partition of a topic some member
        subscribes to is GROUP_SUBSCRIBED_TO_TOPIC and keeps its offset; the others' offsets go."""
        error = self.status.validate(group_id)
        if error is not None:
            callback(error, {})
            return
        group = self.heartbeats.groups[group_id]
        errors = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if group.is_subscribed_to_topic(tp[0])
                  else ErrorCode.NO_ERROR for tp in partitions}
        eligible = [tp for tp, e in errors.items() if e == ErrorCode.NO_ERROR]
        holder = self.manager.get_group(group_id)
        if holder is None or holder.is_(GroupState.DEAD) or not eligible:
            callback(ErrorCode.NO_ERROR, errors)
            return
        self.manager.cleanup_group_metadata([holder], lambda g: g.remove_offsets(eligible),
                                            lambda _removed: callback(ErrorCode.NO_ERROR, errors))

    # -- DeleteGroups --------------------------------------------------------------------
    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """The answers for the consumer groups among ``group_ids``: NON_EMPTY_GROUP while it has members;
        an empty one is removed (NO_ERROR here when no classic group holds offsets for it; otherwise
        the classic deletion of that holder answers)."""
        answers: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self.heartbeats.groups.get(group_id)
            if group is None or self.status.validate(group_id) is not None:
                continue
            if group.members:
                answers[group_id] = ErrorCode.NON_EMPTY_GROUP
                continue
            self.heartbeats.delete_group(group_id)
            holder = self.manager.get_group(group_id)
            if holder is None or holder.is_(GroupState.DEAD):
                answers[group_id] = ErrorCode.NO_ERROR
        return answers

    # -- JoinGroup -----------------------------------------------------------------------
    def refuses_classic_join(self, group_id: str) -> bool:
        """True for a consumer group with members; an empty one is dropped (the classic group takes its place)."""
        group = self.heartbeats.groups.get(group_id)
        if group is None:
            return False
        if group.members:
            return True
        self.heartbeats.delete_group(group_id)
        return False
