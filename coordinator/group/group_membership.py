"""Group membership: the requests of the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).

Kafka's ``GroupCoordinator`` request handling, for one event loop. A JoinGroup
or SyncGroup that must wait for the rest of the group hands in a callback,
called once the rebalance gets that far; the broker's handlers turn it into
an awaitable. The timers and transitions these requests drive are in
``group_rebalance``; offsets in ``group_offsets``; DescribeGroups, ListGroups
and DeleteGroups in ``group_admin``; ``group_coordinator.GroupCoordinator``
combines them and owns the lifecycle (loading, expiry, shutdown).
"""

from __future__ import annotations

import logging
import uuid

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
from coordinator.group.group_rebalance import GroupConfig, GroupRebalance
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member whose first
#: JoinGroup never completes (client gone mid-rebalance) is dropped after this.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class GroupMembership(GroupRebalance):
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup as Kafka answers them."""


    # -- validation -------------------------------------------------------------
    def validate_group_status(self, group_id: str, allow_empty_id: bool = False) -> ErrorCode | None:
        if not group_id and not allow_empty_id:
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
        new_member_id = member.member_id
        assignment = {m.member_id: m.assignment for m in group.members.values()}

        def stored(error: ErrorCode) -> None:
            if group.members.get(new_member_id) is not member:
                return  # replaced again (or removed) meanwhile
            if error != ErrorCode.NO_ERROR:
                # Not persisted: put the old incarnation back as it was, then report the error.
                callback = member.awaiting_join
                group.update_member(member, old_protocols, old_timeouts[0], old_timeouts[1], None)
                self._remove_heartbeat(group, new_member_id)
                group.replace_static_member(member.group_instance_id, new_member_id, old_member_id)  # type: ignore[arg-type]
                self._schedule_heartbeat(group, old_member_id, member.session_timeout_ms)
                if callback is not None:
                    callback(JoinGroupResult(error, UNKNOWN_MEMBER_ID, group.generation_id, group.protocol_type,
                                             group.protocol_name, current_leader))
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


__all__ = ["NEW_MEMBER_JOIN_TIMEOUT_MS", "NO_GENERATION", "GroupConfig", "GroupMembership"]
