"""GroupCoordinator: the classic group coordinator of one broker.

It owns its parts, each a class with explicit dependencies:

- ``GroupStatus``: whether it answers at all (its running flag, Kafka's
  validateGroupStatus), read by every part;
- ``GroupMetadataManager``: the groups and their ``__consumer_offsets`` records;
- ``GroupRebalance``: the rebalance's timers on the one ``Scheduler`` (delayed
  joins, pending syncs, heartbeats) and the transitions they drive;
- ``GroupMembership``: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, each
  taking its request whole (``group_requests``) and answering with an
  ``asyncio.Future``; a parked JoinGroup or SyncGroup is a future on its member;
- ``GroupOffsets`` (committed offsets) and ``GroupAdmin`` (DescribeGroups,
  ListGroups, DeleteGroups);
- ``ConsumerGroupHeartbeat`` (the groups of the consumer protocol, KIP-848, and
  their timers) and ``ConsumerGroupAdmin`` (ConsumerGroupDescribe, their
  members' offset commits, and keeping a classic group and a consumer group
  of one id apart);
- ``ShareGroupHeartbeat`` (share groups, KIP-932: their members, the simple
  assignment, sessions, and the share partitions' state through a persister)
  and ``ShareGroupAdmin`` (ShareGroupDescribe, ListGroups, DeleteGroups); a
  share group's id is refused by the other protocols and the other way round.

Itself it runs the lifecycle: loading the groups of the ``__consumer_offsets``
partitions this broker leads (requests for them get
COORDINATOR_LOAD_IN_PROGRESS meanwhile; the load tasks are its own), the
transaction markers written to them (``on_transaction_completed``), the
periodic offset expiry (``offsets.retention.check.interval.ms``, its timer),
the load/unload calls when leadership of a partition arrives or leaves
(``on_election`` / ``on_resignation``), and cancelling every timer and load at
shutdown. Everything runs on the event loop. It stands on coordinator/common's
interfaces only; the broker wires it (``broker.coordinator_wiring``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

from coordinator.common.coordinator_log import CoordinatorLog, LogEntry
from coordinator.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from coordinator.common.scheduler import Scheduler, Timer
from coordinator.group.consumer_group import ConsumerGroup
from coordinator.group.consumer_group_admin import ConsumerGroupAdmin
from coordinator.group.consumer_group_classic_members import ClassicMembers
from coordinator.group.consumer_group_heartbeat import (
    ConsumerGroupConfig,
    ConsumerGroupHeartbeat,
    NoTopics,
    TopicImage,
)
from coordinator.group.consumer_group_migration import ConsumerGroupMigration
from coordinator.group.consumer_group_requests import (
    ConsumerGroupDescription,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResult,
)
from coordinator.group.group_admin import GroupAdmin, GroupSummary
from coordinator.group.group_membership import GroupMembership
from coordinator.group.group_metadata import (
    GroupMetadata,
    GroupState,
    JoinFuture,
    JoinGroupResult,
    OffsetAndMetadata,
    SyncFuture,
    SyncGroupResult,
    TopicPartition,
)
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_offsets import CommitCallback, GroupOffsets
from coordinator.group.group_rebalance import CoordinatorLogger, GroupConfig, GroupRebalance
from coordinator.group.group_requests import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveGroupResult,
    SyncGroupRequest,
)
from coordinator.group.group_status import GroupStatus
from coordinator.group.share_group import ShareGroup
from coordinator.group.share_group_admin import ShareGroupAdmin
from coordinator.group.share_group_heartbeat import ShareGroupHeartbeat
from coordinator.group.share_group_offsets import ShareGroupOffsetsAdmin
from coordinator.group.share_group_requests import (
    ShareGroupConfig,
    ShareGroupDescription,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResult,
)
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class GroupCoordinator:
    """The classic group coordinator: its parts, and the API the broker's handlers call."""

    def __init__(self, broker_id: int, config: GroupConfig, manager: GroupMetadataManager, scheduler: Scheduler,
                 offsets_retention_check_interval_ms: int = 600_000,
                 consumer_config: ConsumerGroupConfig | None = None, topics: TopicImage | None = None,
                 share_config: ShareGroupConfig | None = None) -> None:
        self.broker_id = broker_id
        self.config = config
        self.manager = manager
        self.scheduler = scheduler
        self.status = GroupStatus(manager)
        self.rebalance = GroupRebalance(config, manager, scheduler, CoordinatorLogger(broker_id))
        self.membership = GroupMembership(config, manager, scheduler, self.rebalance, self.status)
        self.offsets = GroupOffsets(manager, scheduler, self.rebalance, self.status)
        self.admin = GroupAdmin(manager, scheduler, self.rebalance, self.status)
        self.consumer_groups = ConsumerGroupHeartbeat(consumer_config or ConsumerGroupConfig(), manager, scheduler,
                                                      self.status, topics or NoTopics())
        self.consumer_admin = ConsumerGroupAdmin(self.consumer_groups, manager, scheduler, self.status)
        self.migration = ConsumerGroupMigration((consumer_config or ConsumerGroupConfig()).migration_policy,
                                                self.consumer_groups, manager, self.rebalance, scheduler,
                                                config.group_max_size)
        self.consumer_groups.migration = self.migration
        self.classic_members = ClassicMembers(self.consumer_groups, self.migration)
        self.share_groups = ShareGroupHeartbeat(share_config or ShareGroupConfig(), manager, scheduler, self.status,
                                                topics or NoTopics(), self.consumer_groups.group_configs,
                                                self._not_share_group)
        self.share_admin = ShareGroupAdmin(self.share_groups, self.status, self._not_share_group)
        #: DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets.
        self.share_offsets = ShareGroupOffsetsAdmin(self.share_groups)
        self.offsets_retention_check_interval_ms = offsets_retention_check_interval_ms
        self._expiry_timer: Timer | None = None
        self._load_tasks: set[asyncio.Task[None]] = set()
        #: Partition → the token of its latest load: a load whose partition resigned (or was loaded
        #: again since) must not install what it read.
        self._loads: dict[int, object] = {}
        manager.request_load = self._load_in_background
        manager.consumer_groups_loaded = self.consumer_groups.load_groups
        manager.share_groups_loaded = self.share_groups.load_groups

    @property
    def coordinator_log(self) -> CoordinatorLog:
        return self.manager.coordinator_log

    @property
    def active(self) -> bool:
        return self.status.active

    # -- the classic protocol's membership: every answer is a future the handler awaits ------------
    # A consumer group with members answers its classic members itself (``classic_members``); an empty one
    # gives way to the classic group at the next JoinGroup.
    def join_group(self, request: JoinGroupRequest) -> JoinFuture:
        group = self._mixed_group(request.group_id)
        if group is not None:
            return self.classic_members.join(group, request)
        if self.status.validate(request.group_id) is None and (
                self.share_admin.is_share_group(request.group_id)
                or self.consumer_admin.refuses_classic_join(request.group_id)):
            return self._answered(JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        return self.membership.join_group(request)

    def sync_group(self, request: SyncGroupRequest) -> SyncFuture:
        group = self._mixed_group(request.group_id)
        if group is not None:
            return self._answered(self.classic_members.sync(group, request))
        return self.membership.sync_group(request)

    def heartbeat(self, request: HeartbeatRequest) -> asyncio.Future[ErrorCode]:
        group = self._mixed_group(request.group_id)
        if group is not None:
            return self._answered(self.classic_members.heartbeat(group, request))
        return self.membership.heartbeat(request)

    def leave_group(self, request: LeaveGroupRequest) -> asyncio.Future[LeaveGroupResult]:
        group = self._mixed_group(request.group_id)
        if group is not None:
            return self.classic_members.leave(group, request)
        return self.membership.leave_group(request)

    def _mixed_group(self, group_id: str) -> ConsumerGroup | None:
        if self.status.validate(group_id) is not None:
            return None
        return self.classic_members.group(group_id)

    def _answered(self, result: _T) -> asyncio.Future[_T]:
        future: asyncio.Future[_T] = self.scheduler.create_future()
        future.set_result(result)
        return future

    # -- the consumer protocol (KIP-848) ------------------------------------------------------
    def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest
                                 ) -> asyncio.Future[ConsumerGroupHeartbeatResult]:
        if self.status.validate(request.group_id, allow_empty_id=True) is None and self.share_admin.is_share_group(
                request.group_id):
            return self._answered(ConsumerGroupHeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a consumer group."))
        return self.consumer_groups.heartbeat(request)

    def consumer_group_describe(self, group_ids: list[str]) -> list[ConsumerGroupDescription]:
        return self.consumer_admin.describe(group_ids)

    def list_consumer_groups(self, states: set[str]) -> list[ConsumerGroup]:
        """ListGroups' consumer groups; their ids are left out of ``handle_list_groups``' classic ones."""
        return self.consumer_admin.list_groups(states)

    # -- share groups (KIP-932) ----------------------------------------------------------------
    def share_group_heartbeat(self, request: ShareGroupHeartbeatRequest) -> asyncio.Future[ShareGroupHeartbeatResult]:
        return self.share_groups.heartbeat(request)

    def share_group_describe(self, group_ids: list[str]) -> list[ShareGroupDescription]:
        return self.share_admin.describe(group_ids)

    def list_share_groups(self, states: set[str]) -> list[ShareGroup]:
        return self.share_admin.list_groups(states)

    def _not_share_group(self, group_id: str) -> bool:
        """A group of another type (consumer, or classic other than Dead) has this id."""
        classic = self.manager.get_group(group_id)
        return group_id in self.consumer_groups.groups or (classic is not None and not classic.is_(GroupState.DEAD))

    # -- offsets and administration --------------------------------------------------------
    def handle_commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                              generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
                              callback: CommitCallback, member_epoch_api: bool = True) -> None:
        """``member_epoch_api``: OffsetCommit v9+ (what a consumer-protocol member must send)."""
        if self.consumer_admin.is_consumer_group(group_id):
            # Its members commit with their member epoch as the generation.
            self.consumer_admin.commit_offsets(group_id, member_id, generation_id, offsets, callback,
                                               member_epoch_api)
            return
        self.offsets.handle_commit_offsets(group_id, member_id, group_instance_id, generation_id, offsets, callback)

    def handle_txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                  group_instance_id: str | None, generation_id: int,
                                  offsets: dict[TopicPartition, OffsetAndMetadata],
                                  callback: CommitCallback, transactional_id: str | None = None,
                                  add_to_transaction: bool = False) -> None:
        if self.consumer_admin.is_consumer_group(group_id):
            self.consumer_admin.commit_txn_offsets(group_id, producer_id, producer_epoch, member_id, generation_id,
                                                   offsets, callback, transactional_id, add_to_transaction)
            return
        self.offsets.handle_txn_commit_offsets(group_id, producer_id, producer_epoch, member_id, group_instance_id,
                                               generation_id, offsets, callback, transactional_id,
                                               add_to_transaction)

    def consumer_offset_fetch_error(self, group_id: str, member_id: str | None, member_epoch: int
                                    ) -> ErrorCode | None:
        """OffsetFetch v9+ from a member of a consumer-protocol group: None when it may fetch."""
        return self.consumer_admin.offset_fetch_error(group_id, member_id, member_epoch)

    def handle_fetch_offsets(self, group_id: str, require_stable: bool, partitions: list[TopicPartition] | None
                             ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None], set[TopicPartition]]:
        return self.offsets.handle_fetch_offsets(group_id, require_stable, partitions)

    def handle_delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                              callback: Callable[[ErrorCode, dict[TopicPartition, ErrorCode]], None]) -> None:
        if self.consumer_admin.is_consumer_group(group_id):
            self.consumer_admin.delete_offsets(group_id, partitions, callback)
            return
        self.offsets.handle_delete_offsets(group_id, partitions, callback)

    def handle_deleted_topics(self, topics: set[str], callback: Callable[[int], None] | None = None) -> None:
        self.offsets.handle_deleted_topics(topics, callback)

    def handle_describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary | None]:
        """DescribeGroups describes classic groups: a consumer-protocol or share group is no classic group, so
        it is answered as one that does not exist (Dead), as Kafka's describeGroups does."""
        if self.status.validate(group_id, allow_empty_id=True) is None and (
                self.consumer_admin.is_consumer_group(group_id) or self.share_admin.is_share_group(group_id)):
            return ErrorCode.NO_ERROR, None
        return self.admin.handle_describe_group(group_id)

    def handle_list_groups(self, states: set[str]) -> tuple[ErrorCode, list[GroupMetadata]]:
        error, groups = self.admin.handle_list_groups(states)
        return error, [g for g in groups if not self.consumer_admin.is_consumer_group(g.group_id)]

    def handle_delete_groups(self, group_ids: list[str], callback: Callable[[dict[str, ErrorCode]], None]) -> None:
        consumer = self.consumer_admin.delete_groups(group_ids)

        def then_classic(share: dict[str, ErrorCode]) -> None:
            answered = {**consumer, **share}
            self.admin.handle_delete_groups([g for g in group_ids if g not in answered],
                                            lambda errors: callback({**errors, **answered}))

        self.share_admin.delete_groups(group_ids, then_classic)

    # -- loading ---------------------------------------------------------------------
    def local_partitions(self) -> list[int]:
        return [p for p in range(self.coordinator_log.num_partitions) if self.coordinator_log.is_local_leader(p)]

    def load_partition(self, partition: int) -> None:
        """Synchronous load (tests, and the tail of a background load)."""
        self.manager.begin_loading([partition])
        token = self._loads[partition] = object()
        self._apply_loaded(partition, list(self.coordinator_log.read_entries(partition)), token)

    def _apply_loaded(self, partition: int, entries: list[LogEntry], token: object | None = None) -> None:
        """Install a load's read; ``token`` (its load's) None: whatever load is running."""
        if token is None:
            token = self._loads.get(partition)
        if self._loads.get(partition) is not token or partition not in self.manager.loading_partitions:
            # Leadership left while the partition was read (or a newer load replaced this one).
            log.info("[GroupCoordinator %d]: dropping a stale load of %s-%d", self.broker_id,
                     GROUP_METADATA_TOPIC_NAME, partition)
            return
        self._loads.pop(partition, None)
        for group in self.manager.complete_loading(partition, entries):
            self.rebalance.on_group_loaded(group)

    def _read_partition(self, partition: int) -> list[LogEntry]:
        return list(self.coordinator_log.read_entries(partition))

    def _load_in_background(self, partitions: list[int]) -> None:
        """Read the partitions off the event loop, then rebuild their groups on it."""
        self.manager.begin_loading(partitions)
        tokens = {p: object() for p in partitions}
        self._loads.update(tokens)

        async def load() -> None:
            for partition in partitions:
                if self._loads.get(partition) is not tokens[partition]:
                    continue  # resigned before its turn
                records = await asyncio.to_thread(self._read_partition, partition)
                self._apply_loaded(partition, records, tokens[partition])

        task = asyncio.get_running_loop().create_task(load(), name="group-metadata-load")
        self._load_tasks.add(task)
        task.add_done_callback(self._load_done)

    def _load_done(self, task: asyncio.Task[None]) -> None:
        self._load_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("[GroupCoordinator %d]: loading %s failed", self.broker_id, GROUP_METADATA_TOPIC_NAME,
                      exc_info=task.exception())

    # -- lifecycle -------------------------------------------------------------------------
    def startup(self, load_partitions: Iterable[int] | None = None) -> None:
        """Start loading every local partition that holds data; schedule offset expiry."""
        partitions = self.local_partitions() if load_partitions is None else list(load_partitions)
        empty = [p for p in partitions if self.coordinator_log.log_end_offset(p) == 0]
        self.manager.owned_partitions.update(empty)
        to_load = [p for p in partitions if p not in empty]
        if to_load:
            self._load_in_background(to_load)
        self._schedule_expiry()
        log.info("[GroupCoordinator %d]: started (loading %d partition(s) of %s)", self.broker_id, len(to_load),
                 GROUP_METADATA_TOPIC_NAME)

    def _schedule_expiry(self) -> None:
        def run() -> None:
            removed_groups = len(self.manager.groups)

            def done(removed: int) -> None:
                gone = removed_groups - len(self.manager.groups)
                if removed or gone:
                    log.info("[GroupMetadataManager brokerId=%d] Removed %d expired offsets and %d group(s)",
                             self.broker_id, removed, gone)

            try:
                self.manager.expire_offsets(done)
                self.consumer_groups.delete_empty_groups()
            finally:
                self._schedule_expiry()

        if self.active:
            self._expiry_timer = self.scheduler.schedule(self.offsets_retention_check_interval_ms, run)

    # -- leadership of __consumer_offsets partitions (Kafka's onElection / onResignation) -----
    def on_election(self, partition: int) -> None:
        """This broker now leads ``partition``: load its groups (in the background if it holds data).
        Already owned or being loaded (adopted by a request that came first): nothing to do."""
        if (not self.active or partition in self.manager.owned_partitions
                or partition in self.manager.loading_partitions):
            return
        if self.coordinator_log.log_end_offset(partition) == 0:
            self.manager.owned_partitions.add(partition)
        else:
            self._load_in_background([partition])

    def on_transaction_completed(self, producer_id: int, partitions: set[int], committed: bool) -> None:
        """The producer's COMMIT/ABORT marker is written to these ``__consumer_offsets`` partitions
        (Kafka's onTransactionCompleted): its pending transactional offsets there become visible
        or are dropped. Event loop only."""
        if self.active:
            self.manager.handle_txn_completion(producer_id, partitions, committed)

    def on_resignation(self, partition: int) -> None:
        """Leadership of ``partition`` left (or the topic is gone): its groups are no longer ours.
        A load in progress is abandoned: what it read is dropped when it finishes."""
        self._loads.pop(partition, None)
        self.consumer_groups.unload_partition(partition)
        self.share_groups.unload_partition(partition)
        removed = self.manager.remove_groups_for_partition(partition)
        for group in removed:
            self.on_group_unloaded(group)
        if removed:
            log.info("[GroupCoordinator %d]: unloaded %d group(s) of %s-%d", self.broker_id, len(removed),
                     GROUP_METADATA_TOPIC_NAME, partition)

    def on_group_unloaded(self, group: GroupMetadata) -> None:
        """Answer the group's parked requests (its members must find the coordinator again), stop its
        timers, and mark it Dead so that a write still in flight for it changes nothing (Kafka's onGroupUnloaded)."""
        for member in list(group.members.values()):
            group.maybe_complete_join(member, JoinGroupResult(ErrorCode.NOT_COORDINATOR, member.member_id))
            group.maybe_complete_sync(member, SyncGroupResult(ErrorCode.NOT_COORDINATOR))
        self.rebalance.cancel_group_timers(group)
        if not group.is_(GroupState.DEAD):
            group.transition_to(GroupState.DEAD, self.scheduler.now_ms())

    def shutdown_timers(self) -> None:
        """Stop answering (every group request gets COORDINATOR_NOT_AVAILABLE) and cancel the rebalance's timers."""
        self.status.active = False
        self.rebalance.shutdown()
        self.consumer_groups.shutdown()
        self.share_groups.shutdown()

    async def shutdown(self) -> None:
        self.shutdown_timers()
        for group in self.manager.current_groups():
            self.on_group_unloaded(group)
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        for task in list(self._load_tasks):
            task.cancel()
        await asyncio.gather(*self._load_tasks, return_exceptions=True)
        self.scheduler.shutdown()
        log.info("[GroupCoordinator %d]: shut down", self.broker_id)
