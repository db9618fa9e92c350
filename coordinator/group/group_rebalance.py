"""Rebalancing: the timers and transitions the classic protocol runs on (Kafka's delayed operations).

Kafka drives a group with purgatories; here each is one timer on the
injected ``Scheduler``, and nothing blocks or needs a lock because every
call and timer runs on the coordinator's thread:

- the delayed join of a group in PreparingRebalance (Kafka's DelayedJoin):
  completes as soon as every member has rejoined, or when the rebalance
  timeout expires (members that did not rejoin are removed); a group that was
  Empty first waits ``group.initial.rebalance.delay.ms``, extended while new
  members keep arriving, up to the rebalance timeout (InitialDelayedJoin);
- one heartbeat expiry per member (DelayedHeartbeat: the session timeout; five
  minutes for a new member that never completes its first join);
- the pending sync of a group in CompletingRebalance (DelayedSync): members
  that have not sent SyncGroup within the rebalance timeout are removed.

:class:`GroupRebalance` holds these timers and runs the transitions they
drive; the :class:`~coordinator.group.group_coordinator.GroupCoordinator`
owns one and hands it to ``group_membership``, which answers the requests
that drive the same transitions. The parked requests themselves are futures
on the members (``MemberMetadata.awaiting_join`` / ``awaiting_sync``): a
transition answers them by completing those futures.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from coordinator.common.scheduler import Scheduler, Timer
from coordinator.group.group_metadata import (
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupState,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)
from coordinator.group.group_metadata_manager import GroupMetadataManager
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2**31 - 1
    group_initial_rebalance_delay_ms: int = 3000


@dataclass
class _DelayedJoin:
    timer: Timer
    initial: bool
    delay_ms: int = 0
    remaining_ms: int = 0


def join_result(group: GroupMetadata, member: MemberMetadata) -> JoinGroupResult:
    """The JoinGroup answer for one member of a group whose rebalance has completed its join phase:
    the leader gets every member's metadata, a follower none."""
    leader = group.is_leader(member.member_id)
    return JoinGroupResult(ErrorCode.NO_ERROR, member.member_id, group.generation_id, group.protocol_type,
                           group.protocol_name, group.leader_or_empty, False,
                           group.current_member_metadata() if leader else [])


class CoordinatorLogger:
    """The coordinator's log lines, prefixed as Kafka's are."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id

    def info(self, message: str, *args: object) -> None:
        # ``message`` is a %-template of ours with its own arguments: filled in only when it will be written.
        if log.isEnabledFor(logging.INFO):
            log.info("[GroupCoordinator %d]: %s", self.broker_id, message % args)

    def error(self, message: str, *args: object) -> None:
        log.error("[GroupCoordinator %d]: %s", self.broker_id, message % args)

    def warning(self, message: str, *args: object) -> None:
        log.warning("[GroupCoordinator %d]: %s", self.broker_id, message % args)


class GroupRebalance:
    """The rebalance's timers (delayed joins, pending syncs, member heartbeats), all on the one
    ``Scheduler``, and the transitions they drive. Owned by the coordinator; its state is these
    timers only (the groups themselves live in the ``GroupMetadataManager``)."""

    def __init__(self, config: GroupConfig, manager: GroupMetadataManager, scheduler: Scheduler,
                 logger: CoordinatorLogger) -> None:
        self.config = config
        self.manager = manager
        self.scheduler = scheduler
        self.logger = logger
        self._joins: dict[str, _DelayedJoin] = {}
        self._syncs: dict[str, Timer] = {}
        self._heartbeats: dict[tuple[str, str], Timer] = {}

    # -- rebalance ------------------------------------------------------------------
    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # Members parked in SyncGroup must rejoin.
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._cancel_sync_expiration(group)
        was_empty = group.is_(GroupState.EMPTY)
        self.logger.info("Preparing to rebalance group %s in state %s with old generation %d (__consumer_offsets-%d) "
                      "(reason: %s)", group.group_id, group.state, group.generation_id,
                      self.manager.partition_for(group.group_id), reason)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.scheduler.now_ms())
        self._cancel_join(group)
        if was_empty:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        else:
            self._schedule_join(group)
            self.try_complete_join(group)

    def _schedule_join(self, group: GroupMetadata) -> None:
        group_id = group.group_id
        holder: list[_DelayedJoin] = []

        def expire() -> None:
            if self._joins.get(group_id) is holder[0]:
                del self._joins[group_id]
                self._on_complete_join(group)

        holder.append(_DelayedJoin(self.scheduler.schedule(group.rebalance_timeout_ms, expire), initial=False))
        self._joins[group_id] = holder[0]

    def _schedule_initial_join(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        group_id = group.group_id
        holder: list[_DelayedJoin] = []

        def expire() -> None:
            if self._joins.get(group_id) is not holder[0]:
                return
            del self._joins[group_id]
            if group.new_member_added and remaining_ms != 0:
                # Members keep arriving: wait once more, within the rebalance timeout.
                group.new_member_added = False
                delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
                self._schedule_initial_join(group, delay, max(remaining_ms - delay, 0))
            else:
                self._on_complete_join(group)

        holder.append(_DelayedJoin(self.scheduler.schedule(delay_ms, expire), True, delay_ms, remaining_ms))
        self._joins[group_id] = holder[0]

    def _cancel_join(self, group: GroupMetadata) -> None:
        join = self._joins.pop(group.group_id, None)
        if join is not None:
            join.timer.cancel()

    def try_complete_join(self, group: GroupMetadata) -> None:
        """Complete the delayed join at once when every member has rejoined (not during the initial delay)."""
        join = self._joins.get(group.group_id)
        if join is None or join.initial or not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.has_all_members_joined():
            self._cancel_join(group)
            self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        if group.is_(GroupState.DEAD):
            return
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        gone = [m for m in group.not_yet_rejoined_members() if not m.is_static]
        if gone:
            self.logger.info("Group %s removed dynamic members who haven't joined: %s", group.group_id,
                          [m.member_id for m in gone])
        for member in gone:
            group.remove(member.member_id)
            self.remove_heartbeat(group, member.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            self.logger.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            self._schedule_join(group)
            return
        group.init_next_generation(self.scheduler.now_ms())
        if group.is_(GroupState.EMPTY):
            self.logger.info("Group %s with generation %d is now empty (__consumer_offsets-%d)", group.group_id,
                          group.generation_id, self.manager.partition_for(group.group_id))
            self.manager.store_group(group, {}, lambda error: None)
            return
        self.logger.info("Stabilized group %s generation %d (__consumer_offsets-%d) with %d members", group.group_id,
                      group.generation_id, self.manager.partition_for(group.group_id), len(group.members))
        for member in list(group.members.values()):
            group.maybe_complete_join(member, join_result(group, member))
            self.schedule_heartbeat(group, member.member_id, member.session_timeout_ms)
            member.is_new = False
        self._schedule_pending_sync(group)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self._cancel_sync_expiration(group)
        group.pending_sync_members = set(group.members)
        generation = group.generation_id

        def expire() -> None:
            self._syncs.pop(group.group_id, None)
            if generation != group.generation_id or group.state not in (
                    GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
                return
            if group.pending_sync_members:
                missing = sorted(group.pending_sync_members)
                for member_id in missing:
                    group.remove(member_id)
                    self.remove_heartbeat(group, member_id)
                self.prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

        self._syncs[group.group_id] = self.scheduler.schedule(group.rebalance_timeout_ms, expire)

    def _cancel_sync_expiration(self, group: GroupMetadata) -> None:
        timer = self._syncs.pop(group.group_id, None)
        if timer is not None:
            timer.cancel()

    def remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._cancel_sync_expiration(group)

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def set_and_propagate_assignment(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NO_ERROR)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in list(group.members.values()):
            result = SyncGroupResult(error, group.protocol_type, group.protocol_name,
                                     member.assignment if error == ErrorCode.NO_ERROR else b"")
            group.maybe_complete_sync(member, result)
            self.schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    def schedule_heartbeat(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        key = (group.group_id, member_id)
        previous = self._heartbeats.pop(key, None)
        if previous is not None:
            previous.cancel()
        holder: list[Timer] = []

        def expire() -> None:
            if self._heartbeats.get(key) is holder[0]:
                del self._heartbeats[key]
                self._on_expire_heartbeat(group, member_id)

        holder.append(self.scheduler.schedule(timeout_ms, expire))
        self._heartbeats[key] = holder[0]

    def remove_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        timer = self._heartbeats.pop((group.group_id, member_id), None)
        if timer is not None:
            timer.cancel()

    def _on_expire_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        if group.is_(GroupState.DEAD):
            return
        if member_id in group.pending_members:
            self.logger.info("Pending member %s in group %s has been removed after session timeout expiration.",
                          member_id, group.group_id)
            self.remove_pending_member_and_update_group(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return  # waiting on the group, not failing: the rebalance reschedules it
        self.logger.info("Member %s in group %s has failed, removing it from the group", member_id, group.group_id)
        self.remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration")

    # -- leaving -------------------------------------------------------------------------
    def remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A new member may time out with its JoinGroup parked: answer it so a live
        # client retries.
        group.maybe_complete_join(member, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
        group.maybe_complete_sync(member, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self.remove_heartbeat(group, member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group)

    # -- loading and shutdown ----------------------------------------------------------------
    def on_group_loaded(self, group: GroupMetadata) -> None:
        for member in group.members.values():
            self.schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    def cancel_group_timers(self, group: GroupMetadata) -> None:
        self._cancel_join(group)
        self._cancel_sync_expiration(group)
        for key in [k for k in self._heartbeats if k[0] == group.group_id]:
            self._heartbeats.pop(key).cancel()

    def shutdown(self) -> None:
        """Cancel every timer (the coordinator is shutting down)."""
        for join in self._joins.values():
            join.timer.cancel()
        for timer in list(self._syncs.values()) + list(self._heartbeats.values()):
            timer.cancel()
        self._joins.clear()
        self._syncs.clear()
        self._heartbeats.clear()
