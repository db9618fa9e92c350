"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and expiry (the coordinator's side).

Kafka's rules, kept as they are:

- a commit from a member is checked like a heartbeat (static fencing,
  membership, generation); during CompletingRebalance it gets
  REBALANCE_IN_PROGRESS, during PreparingRebalance it is accepted (the member
  learns of the rebalance from its next heartbeat);
- a commit with a negative generation (a "simple" consumer that only stores
  offsets, with or without a member id) is accepted for an unknown or Empty
  group; without a member id it is refused by a group that has members;
- a commit for an unknown group with a generation is from a member of a
  group that no longer exists: ILLEGAL_GENERATION.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.common.scheduler import Scheduler
from coordinator.group.group_membership import GroupMembership
from coordinator.group.group_metadata import (
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupState,
    OffsetAndMetadata,
    TopicPartition,
)
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_rebalance import GroupRebalance
from coordinator.group.group_status import GroupStatus
from protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from protocol.errors import ErrorCode

CommitCallback = Callable[[dict[TopicPartition, ErrorCode]], None]


class GroupOffsets:
    """OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete; owned by the coordinator. A commit
    from a member counts as its heartbeat, so it reaches the rebalance's timers."""

    def __init__(self, manager: GroupMetadataManager, scheduler: Scheduler, rebalance: GroupRebalance,
                 status: GroupStatus) -> None:
        self.manager = manager
        self.scheduler = scheduler
        self.rebalance = rebalance
        self.status = status

    def handle_commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                              generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
                              callback: CommitCallback) -> None:
        error = self.status.validate(group_id, allow_empty_id=True)
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                callback(dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION))
                return
            # Not using Kafka for group management: offsets storage only.
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.scheduler.now_ms()))
        error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id)
        if error is None and group.is_(GroupState.COMPLETING_REBALANCE):
            # The member has its new generation but not its assignment yet.
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return
        member = group.members.get(member_id)
        if member is not None:
            self.rebalance.schedule_heartbeat(group, member_id, member.session_timeout_ms)
        self.manager.store_offsets(group, offsets, callback)

    def handle_txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                  group_instance_id: str | None, generation_id: int,
                                  offsets: dict[TopicPartition, OffsetAndMetadata],
                                  callback: CommitCallback, transactional_id: str | None = None,
                                  add_to_transaction: bool = False) -> None:
        """TxnOffsetCommit's coordinator side (Kafka's handleTxnCommitOffsets): the offsets are
        written in the producer's transaction and stay pending until its marker. Member and
        generation are checked only when given (TxnOffsetCommit before v3 carries neither),
        and a non-empty group takes them from anyone, as Kafka does."""
        error = self.status.validate(group_id)
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.scheduler.now_ms()))
        error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id, transactional=True)
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return
        self.manager.store_transactional_offsets(group, producer_id, producer_epoch, offsets, callback,
                                                 transactional_id, add_to_transaction)

    def _validate_offset_commit(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                generation_id: int, transactional: bool = False) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            # No generation: the admin client, or a consumer that assigns its own partitions (whatever
            # member id it sends); such commits are taken while the group is empty, as Kafka's do.
            return None
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            return GroupMembership.member_generation_error(group, member_id, group_instance_id, generation_id)
        if not transactional and not group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit to a group that has some
        return None

    def handle_fetch_offsets(self, group_id: str, require_stable: bool, partitions: list[TopicPartition] | None
                             ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None], set[TopicPartition]]:
        """(error, committed offsets, partitions to answer UNSTABLE_OFFSET_COMMIT for).

        Offsets of open transactions are never among the committed ones. With
        ``require_stable`` (OffsetFetch v7+, KIP-447), a named partition with a commit not yet
        settled (in flight, or pending in a transaction) is unstable instead: the consumer
        retries until the transaction ends. A fetch of every offset names no partition and
        gets none unstable, as in Kafka.
        """
        error = self.status.validate(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}, set()
        unstable: set[TopicPartition] = set()
        if require_stable and partitions is not None:
            unstable = self.manager.unstable_offsets(group_id, partitions)
        offsets = self.manager.get_offsets(group_id, partitions)
        for tp in unstable:
            offsets[tp] = None
        return ErrorCode.NO_ERROR, offsets, unstable

    def handle_delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                              callback: Callable[[ErrorCode, dict[TopicPartition, ErrorCode]], None]) -> None:
        error = self.status.validate(group_id)
        if error is not None:
            callback(error, {})
            return
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            callback(ErrorCode.GROUP_ID_NOT_FOUND, {})
            return
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors.update((tp, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for tp in partitions
                          if group.is_subscribed_to_topic(tp[0]))
        else:
            callback(ErrorCode.NON_EMPTY_GROUP, {})
            return
        errors.update((tp, ErrorCode.NO_ERROR) for tp in eligible)
        self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible),
                                            lambda _removed: callback(ErrorCode.NO_ERROR, errors))

    def handle_deleted_topics(self, topics: set[str], callback: Callable[[int], None] | None = None) -> None:
        """A deleted topic's committed offsets go too (Kafka's handleDeletedPartitions), with tombstones,
        so a topic re-created under the same name starts without stale positions."""
        groups = [g for g in self.manager.current_groups()
                  if any(tp[0] in topics for tp in list(g.offsets) + list(g.pending_offset_commits))
                  or any(tp[0] in topics for pending in g.pending_txn_offset_commits.values() for tp in pending)]
        self.manager.cleanup_group_metadata(
            groups, lambda g: g.remove_offsets([tp for tp in list(g.offsets) if tp[0] in topics]), callback)
