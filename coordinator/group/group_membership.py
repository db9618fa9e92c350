"""Group membership: the classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).

Kafka's ``GroupCoordinator`` rewritten for one event loop: nothing here blocks
and nothing needs a lock, because every call and every timer runs on the
coordinator's thread. A JoinGroup or SyncGroup that must wait for the rest of
the group hands in a callback, called once the rebalance gets that far; the
broker's handlers turn it into an awaitable.

Timers (all on the injected ``Scheduler``):

- the delayed join of a group in PreparingRebalance: completes as soon as
  every member has rejoined, or when the rebalance timeout expires (members
  that did not rejoin are removed); a group that was Empty first waits
  ``group.initial.rebalance.delay.ms``, extended while new members keep
  arriving, up to the rebalance timeout (Kafka's InitialDelayedJoin);
- one heartbeat expiry per member (session timeout; five minutes for a new
  member that never completes its first join);
- the pending sync of a group in CompletingRebalance: members that have not
  sent SyncGroup within the rebalance timeout are removed.

Offsets are in ``group_offsets``, DescribeGroups/ListGroups/DeleteGroups in
``group_admin``; ``group_coordinator.GroupCoordinator`` combines the three
over the state kept here and owns the lifecycle (loading, expiry, shutdown).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Callable

from coordinator.group.group_metadata import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupState,
    JoinCallback,
    JoinGroupResult,
    MemberMetadata,
    SyncCallback,
    SyncGroupResult,
)
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.scheduler import Scheduler, Timer
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member whose first
#: JoinGroup never completes (client gone mid-rebalance) is dropped after this.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


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


class GroupMembership:
    """Join/sync/heartbeat/leave: the rebalance state machine driven by requests and timers."""

    def __init__(self, broker_id: int, config: GroupConfig, manager: GroupMetadataManager,
                 scheduler: Scheduler) -> None:
        self.broker_id = broker_id
        self.config = config
        self.manager = manager
        self.scheduler = scheduler
        self.active = True
        self._joins: dict[str, _DelayedJoin] = {}
        self._syncs: dict[str, Timer] = {}
        self._heartbeats: dict[tuple[str, str], Timer] = {}

    def _log(self, message: str, *args: object) -> None:
        log.info("[GroupCoordinator %d]: " + message, self.broker_id, *args)

    # -- validation -------------------------------------------------------------
    def validate_group_status(self, group_id: str, allow_empty_id: bool = False) -> ErrorCode | None:
        if group_id is None or (not group_id and not allow_empty_id):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not self.manager.is_group_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        if self.manager.is_group_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    # -- JoinGroup ----------------------------------------------------------------
    def handle_join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                          require_known_member_id: bool, support_skip_assignment: bool, client_id: str,
                          client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                          protocol_type: str, protocols: list[tuple[str, bytes]], callback: JoinCallback) -> None:
        error = self.validate_group_status(group_id)
        if error is not None:
            callback(JoinGroupResult(error, member_id))
            return
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            callback(JoinGroupResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id))
            return
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_group(group_id)
        if group is None:
            if not is_unknown:
                callback(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.scheduler.now_ms()))
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member_and_update_group(group, member, "group is full")
                self._remove_heartbeat(group, member_id)
            callback(JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
        elif is_unknown:
            self._do_new_member_join(group, group_instance_id, require_known_member_id, support_skip_assignment,
                                     client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                                     protocol_type, protocols, callback)
        else:
            self._do_current_member_join(group, member_id, group_instance_id, client_id, client_host,
                                         rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                         callback)
        self._try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or group.num_members_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _do_new_member_join(self, group: GroupMetadata, group_instance_id: str | None, require_known_member_id: bool,
                            support_skip_assignment: bool, client_id: str, client_host: str,
                            rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                            protocols: list[tuple[str, bytes]], callback: JoinCallback) -> None:
        if group.is_(GroupState.DEAD):
            # Deleted under us: the member rediscovers the coordinator and retries.
            callback(JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, (name for name, _ in protocols)):
            callback(JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = f"{client_id}-{uuid.uuid4()}"
        if group_instance_id is not None:
            self._do_static_member_join(group, new_member_id, group_instance_id, support_skip_assignment, client_id,
                                        client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                        protocols, callback)
        elif require_known_member_id:
            # KIP-394: hand out the id first; the member joins with it, so a client
            # that times out and retries cannot leave orphaned members behind.
            group.pending_members.add(new_member_id)
            self._schedule_heartbeat(group, new_member_id, session_timeout_ms)
            callback(JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, new_member_id, None, client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, callback)

    def _do_static_member_join(self, group: GroupMetadata, new_member_id: str, group_instance_id: str,
                               support_skip_assignment: bool, client_id: str, client_host: str,
                               rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                               protocols: list[tuple[str, bytes]], callback: JoinCallback) -> None:
        old_member_id = group.static_member_id(group_instance_id)
        if old_member_id is None or old_member_id not in group.members:
            self._add_member_and_rebalance(group, new_member_id, group_instance_id, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                           callback)
            return
        self._log("Static member %s of group %s with unknown member id rejoins, assigning new member id %s, "
                  "while old member id %s will be removed.", group_instance_id, group.group_id, new_member_id,
                  old_member_id)
        current_leader = group.leader_or_empty
        old_protocols = group.get(old_member_id).supported_protocols
        old_timeouts = (group.get(old_member_id).rebalance_timeout_ms, group.get(old_member_id).session_timeout_ms)
        self._remove_heartbeat(group, old_member_id)
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, new_member_id, session_timeout_ms)
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        if group.is_(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                self._persist_static_replacement(group, member, old_member_id, current_leader, old_protocols,
                                                 old_timeouts, support_skip_assignment)
            else:
                self._maybe_prepare_rebalance(group, f"static member {new_member_id} rejoined with other protocols")
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            # The leader may already be assigning with the old member id: start over.
            self._prepare_rebalance(group, f"updating metadata for static member {new_member_id}")

    def _persist_static_replacement(self, group: GroupMetadata, member: MemberMetadata, old_member_id: str,
                                    current_leader: str, old_protocols: list[tuple[str, bytes]],
                                    old_timeouts: tuple[int, int], support_skip_assignment: bool) -> None:
        """A restarted static member takes its old place in a stable group without a rebalance."""
        generation = group.generation_id
        new_member_id = member.member_id
        assignment = {m.member_id: m.assignment for m in group.members.values()}

        def stored(error: ErrorCode) -> None:
            if group.members.get(new_member_id) is not member:
                return
            if error != ErrorCode.NO_ERROR or group.generation_id != generation:
                if error != ErrorCode.NO_ERROR and group.is_(GroupState.STABLE):
                    # Put the old member id back so the old incarnation's state is consistent.
                    self._remove_heartbeat(group, new_member_id)
                    group.replace_static_member(member.group_instance_id, new_member_id, old_member_id)  # type: ignore[arg-type]
                    group.update_member(member, old_protocols, old_timeouts[0], old_timeouts[1], None)
                    self._schedule_heartbeat(group, old_member_id, member.session_timeout_ms)
                group.maybe_invoke_join_callback(member, JoinGroupResult(
                    error if error != ErrorCode.NO_ERROR else ErrorCode.REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID))
                return
            if support_skip_assignment:
                # JoinGroup v9+: the leader learns it leads but must not reassign a stable group.
                is_leader = group.is_leader(new_member_id)
                group.maybe_invoke_join_callback(member, JoinGroupResult(
                    ErrorCode.NO_ERROR, new_member_id, group.generation_id, group.protocol_type, group.protocol_name,
                    group.leader_or_empty, is_leader, group.current_member_metadata() if is_leader else []))
            else:
                # Older clients: report the old leader id so the member never thinks it leads
                # (an assignment from it would not be propagated by a stable group).
                group.maybe_invoke_join_callback(member, JoinGroupResult(
                    ErrorCode.NO_ERROR, new_member_id, group.generation_id, group.protocol_type, group.protocol_name,
                    current_leader))

        self.manager.store_group(group, assignment, stored)

    def _do_current_member_join(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                client_id: str, client_host: str, rebalance_timeout_ms: int,
                                session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                                callback: JoinCallback) -> None:
        if group.is_(GroupState.DEAD):
            callback(JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(protocol_type, (name for name, _ in protocols)):
            callback(JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            # KIP-394: the second join of a member that was handed its id.
            self._add_member_and_rebalance(group, member_id, group_instance_id, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                           callback)
            return
        if group.is_static_member_fenced(group_instance_id, member_id):
            callback(JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id))
            return
        if member_id not in group.members or (group_instance_id is not None
                                             and not group.has_static_member(group_instance_id)):
            callback(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              callback, f"member {member_id} joining during {state}")
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # A retry of a JoinGroup whose response was lost: same answer again.
                callback(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, callback, f"member {member_id} changed metadata")
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader's JoinGroup always rebalances: it rejoins for changes the
                # member metadata cannot show (a topic's partition count, say).
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, callback,
                                                  f"leader {member_id} re-joining" if group.is_leader(member_id)
                                                  else f"member {member_id} changed metadata")
            else:
                callback(JoinGroupResult(ErrorCode.NO_ERROR, member_id, group.generation_id, group.protocol_type,
                                         group.protocol_name, group.leader_or_empty))
        else:
            callback(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _join_result(self, group: GroupMetadata, member: MemberMetadata) -> JoinGroupResult:
        leader = group.is_leader(member.member_id)
        return JoinGroupResult(ErrorCode.NO_ERROR, member.member_id, group.generation_id, group.protocol_type,
                               group.protocol_name, group.leader_or_empty, False,
                               group.current_member_metadata() if leader else [])

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                  client_id: str, client_host: str, rebalance_timeout_ms: int,
                                  session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                                  callback: JoinCallback) -> None:
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, protocols)
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # lets the initial delay extend
        group.add(member, callback)
        # A new member cannot heartbeat until it has its first generation, and a
        # client that gave up on its JoinGroup would linger: expire it after a while.
        self._schedule_heartbeat(group, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id} with group instance id "
                                             f"{group_instance_id}")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, callback: JoinCallback, reason: str) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, reason)

    # -- rebalance ------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # Members parked in SyncGroup must rejoin.
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._cancel_sync_expiration(group)
        was_empty = group.is_(GroupState.EMPTY)
        self._log("Preparing to rebalance group %s in state %s with old generation %d (__consumer_offsets-%d) "
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
            self._try_complete_join(group)

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

    def _try_complete_join(self, group: GroupMetadata) -> None:
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
            self._log("Group %s removed dynamic members who haven't joined: %s", group.group_id,
                      [m.member_id for m in gone])
        for member in gone:
            group.remove(member.member_id)
            self._remove_heartbeat(group, member.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("[GroupCoordinator %d]: Group %s could not complete rebalance because no members rejoined",
                      self.broker_id, group.group_id)
            self._schedule_join(group)
            return
        group.init_next_generation(self.scheduler.now_ms())
        if group.is_(GroupState.EMPTY):
            self._log("Group %s with generation %d is now empty (__consumer_offsets-%d)", group.group_id,
                      group.generation_id, self.manager.partition_for(group.group_id))
            self.manager.store_group(group, {}, lambda error: None)
            return
        self._log("Stabilized group %s generation %d (__consumer_offsets-%d) with %d members", group.group_id,
                  group.generation_id, self.manager.partition_for(group.group_id), len(group.members))
        for member in list(group.members.values()):
            group.maybe_invoke_join_callback(member, self._join_result(group, member))
            self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)
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
                    self._remove_heartbeat(group, member_id)
                self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

        self._syncs[group.group_id] = self.scheduler.schedule(group.rebalance_timeout_ms, expire)

    def _cancel_sync_expiration(self, group: GroupMetadata) -> None:
        timer = self._syncs.pop(group.group_id, None)
        if timer is not None:
            timer.cancel()

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._cancel_sync_expiration(group)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NO_ERROR)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in list(group.members.values()):
            result = SyncGroupResult(error, group.protocol_type, group.protocol_name,
                                     member.assignment if error == ErrorCode.NO_ERROR else b"")
            group.maybe_invoke_sync_callback(member, result)
            self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    # -- SyncGroup ------------------------------------------------------------------
    def handle_sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
                          protocol_name: str | None, group_instance_id: str | None, assignment: dict[str, bytes],
                          callback: SyncCallback) -> None:
        error = self.validate_group_status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the load: make the member rejoin.
            callback(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncGroupResult(error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        self._do_sync_group(group, generation_id, member_id, protocol_type, protocol_name, group_instance_id,
                            assignment, callback)

    def _do_sync_group(self, group: GroupMetadata, generation_id: int, member_id: str, protocol_type: str | None,
                       protocol_name: str | None, group_instance_id: str | None, assignment: dict[str, bytes],
                       callback: SyncCallback) -> None:
        if group.is_(GroupState.DEAD):
            callback(SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif group.is_static_member_fenced(group_instance_id, member_id):
            callback(SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        elif member_id not in group.members:
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif generation_id != group.generation_id:
            callback(SyncGroupResult(ErrorCode.ILLEGAL_GENERATION))
        elif (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            callback(SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_(GroupState.EMPTY):
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_(GroupState.PREPARING_REBALANCE):
            callback(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            member = group.get(member_id)
            previous = member.awaiting_sync
            member.awaiting_sync = callback
            if previous is not None:
                previous(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._store_leader_assignment(group, member_id, generation_id, assignment)
        else:  # Stable: the assignment is already known
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            callback(SyncGroupResult(ErrorCode.NO_ERROR, group.protocol_type, group.protocol_name, member.assignment))
            self._schedule_heartbeat(group, member_id, member.session_timeout_ms)

    def _store_leader_assignment(self, group: GroupMetadata, leader_id: str, generation_id: int,
                                 assignment: dict[str, bytes]) -> None:
        self._log("Assignment received from leader %s for group %s for generation %d. The group has %d members, "
                  "%d of which are static.", leader_id, group.group_id, generation_id, len(group.members),
                  len(group.static_members))
        full = {member_id: assignment.get(member_id, b"") for member_id in group.members}
        missing = [m for m in group.members if m not in assignment]
        if missing:
            log.warning("[GroupCoordinator %d]: Setting empty assignments for members %s of %s for generation %d",
                        self.broker_id, missing, group.group_id, generation_id)

        def stored(error: ErrorCode) -> None:
            # Another member may have joined while the append was in flight; then the
            # group has moved on and this assignment is stale.
            if not (group.is_(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id):
                return
            if error != ErrorCode.NO_ERROR:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(group, f"error {error.name} storing the group assignment")
            else:
                self._set_and_propagate_assignment(group, full)
                group.transition_to(GroupState.STABLE, self.scheduler.now_ms())

        self.manager.store_group(group, full, stored)

    # -- Heartbeat --------------------------------------------------------------------
    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                         generation_id: int) -> ErrorCode:
        error = self.validate_group_status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NO_ERROR  # the member will learn what it must once the group is loaded
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.get(member_id)
        self._schedule_heartbeat(group, member_id, member.session_timeout_ms)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NO_ERROR

    def _schedule_heartbeat(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
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

    def _remove_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        timer = self._heartbeats.pop((group.group_id, member_id), None)
        if timer is not None:
            timer.cancel()

    def _on_expire_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        if group.is_(GroupState.DEAD):
            return
        if member_id in group.pending_members:
            self._log("Pending member %s in group %s has been removed after session timeout expiration.",
                      member_id, group.group_id)
            self._remove_pending_member_and_update_group(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return  # waiting on the group, not failing: the rebalance reschedules it
        self._log("Member %s in group %s has failed, removing it from the group", member_id, group.group_id)
        self._remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration")

    # -- leaving -------------------------------------------------------------------------
    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A new member may time out with its JoinGroup parked: answer it so a live
        # client retries.
        group.maybe_invoke_join_callback(member, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
        group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self._remove_heartbeat(group, member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def handle_leave_group(self, group_id: str, members: list[tuple[str, str | None]]
                           ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup: (top-level error, one error per leaving member)."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return error, [error] * len(members)
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NO_ERROR, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(members)
        return ErrorCode.NO_ERROR, [self._leave_one(group, member_id, instance_id)
                                    for member_id, instance_id in members]

    def _leave_one(self, group: GroupMetadata, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if member_id == UNKNOWN_MEMBER_ID:
            # Administrative removal of a static member by its instance id (KIP-345).
            current = group.static_member_id(group_instance_id)
            if current is None or current not in group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._remove_current_member(group, current, f"static member {group_instance_id} removed by admin")
            return ErrorCode.NO_ERROR
        if member_id in group.pending_members:
            self._remove_pending_member_and_update_group(group, member_id)
            return ErrorCode.NO_ERROR
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id in group.members:
            self._remove_current_member(group, member_id, f"removing member {member_id} on LeaveGroup")
            return ErrorCode.NO_ERROR
        return ErrorCode.UNKNOWN_MEMBER_ID

    def _remove_current_member(self, group: GroupMetadata, member_id: str, reason: str) -> None:
        member = group.get(member_id)
        self._remove_heartbeat(group, member_id)
        self._log("Member %s has left group %s through explicit `LeaveGroup`", member_id, group.group_id)
        self._remove_member_and_update_group(group, member, reason)

    # -- loading and shutdown ----------------------------------------------------------------
    def on_group_loaded(self, group: GroupMetadata) -> None:
        for member in group.members.values():
            self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    def cancel_group_timers(self, group: GroupMetadata) -> None:
        self._cancel_join(group)
        self._cancel_sync_expiration(group)
        for key in [k for k in self._heartbeats if k[0] == group.group_id]:
            self._heartbeats.pop(key).cancel()

    def shutdown_timers(self) -> None:
        self.active = False
        for join in self._joins.values():
            join.timer.cancel()
        for timer in list(self._syncs.values()) + list(self._heartbeats.values()):
            timer.cancel()
        self._joins.clear()
        self._syncs.clear()
        self._heartbeats.clear()

    def member_generation_error(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                generation_id: int) -> ErrorCode | None:
        """Kafka's validateCurrentMember: static fencing, membership, generation."""
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

