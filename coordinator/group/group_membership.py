"""Group membership: the requests of the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).

Kafka's ``GroupCoordinator`` request handling, for one event loop. Each
request arrives whole (``group_requests``) and is answered with an
``asyncio.Future``: at once for an error, MEMBER_ID_REQUIRED or a member whose
answer is already known; a JoinGroup or SyncGroup that must wait for the rest
of the group parks its future on its member, and the rebalance completes it.
The timers and transitions these requests drive are the coordinator's
:class:`~coordinator.group.group_rebalance.GroupRebalance`, which this class
is handed; offsets are in ``group_offsets``; DescribeGroups, ListGroups and
DeleteGroups in ``group_admin``.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from coordinator.common.scheduler import Scheduler
from coordinator.group.group_metadata import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupState,
    JoinFuture,
    JoinGroupResult,
    MemberMetadata,
    SyncFuture,
    SyncGroupResult,
    complete,
)
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_rebalance import GroupConfig, GroupRebalance, join_result
from coordinator.group.group_requests import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveGroupResult,
    LeavingMember,
    SyncGroupRequest,
)
from coordinator.group.group_status import GroupStatus
from protocol.errors import ErrorCode

#: Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member whose first
#: JoinGroup never completes (client gone mid-rebalance) is dropped after this.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

@dataclass(frozen=True, slots=True)
class _StaticIncarnation:
    """What a static member was before a restart replaced its member id: restored if the replacement
    cannot be stored."""

    member_id: str
    leader_id: str
    protocols: list[tuple[str, bytes]]
    rebalance_timeout_ms: int
    session_timeout_ms: int


class GroupMembership:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup as Kafka answers them.

    Holds no state of its own: the groups are the manager's, the timers the rebalance's.
    """

    def __init__(self, config: GroupConfig, manager: GroupMetadataManager, scheduler: Scheduler,
                 rebalance: GroupRebalance, status: GroupStatus) -> None:
        self.config = config
        self.manager = manager
        self.scheduler = scheduler
        self.rebalance = rebalance
        self.status = status

    # -- JoinGroup ----------------------------------------------------------------
    def join_group(self, request: JoinGroupRequest) -> JoinFuture:
        future: JoinFuture = self.scheduler.create_future()
        self._join(request, future)
        return future

    def _join(self, request: JoinGroupRequest, future: JoinFuture) -> None:
        error = self._join_error(request)
        if error is not None:
            complete(future, JoinGroupResult(error, request.member_id))
            return
        group = self._group_to_join(request)
        if group is None:
            complete(future, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id))
            return
        if not self._accept_joining_member(group, request.member_id):
            member = group.members.get(request.member_id)
            if member is not None:
                self.rebalance.remove_member_and_update_group(group, member, "group is full")
                self.rebalance.remove_heartbeat(group, request.member_id)
            complete(future, JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
        elif request.is_unknown_member:
            self._new_member_join(group, request, future)
        else:
            self._current_member_join(group, request, future)
        self.rebalance.try_complete_join(group)

    def _join_error(self, request: JoinGroupRequest) -> ErrorCode | None:
        error = self.status.validate(request.group_id)
        if error is None and not (self.config.group_min_session_timeout_ms <= request.session_timeout_ms
                                  <= self.config.group_max_session_timeout_ms):
            return ErrorCode.INVALID_SESSION_TIMEOUT
        return error

    def _group_to_join(self, request: JoinGroupRequest) -> GroupMetadata | None:
        """The group, created for a new member; None for a member id the coordinator does not know."""
        group = self.manager.get_group(request.group_id)
        if group is None and request.is_unknown_member:
            group = self.manager.add_group(GroupMetadata(request.group_id, GroupState.EMPTY, self.scheduler.now_ms()))
        return group

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or group.num_members_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _new_member_join(self, group: GroupMetadata, request: JoinGroupRequest, future: JoinFuture) -> None:
        if group.is_(GroupState.DEAD):
            # Deleted under us: the member rediscovers the coordinator and retries.
            complete(future, JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(request.protocol_type, request.protocol_names):
            complete(future, JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = f"{request.client_id}-{uuid.uuid4()}"
        if request.group_instance_id is not None:
            self._static_member_join(group, new_member_id, request, future)
        elif request.require_known_member_id:
            # KIP-394: hand out the id first; the member joins with it, so a client
            # that times out and retries cannot leave orphaned members behind.
            group.pending_members.add(new_member_id)
            self.rebalance.schedule_heartbeat(group, new_member_id, request.session_timeout_ms)
            complete(future, JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, new_member_id, request, future)

    def _static_member_join(self, group: GroupMetadata, new_member_id: str, request: JoinGroupRequest,
                            future: JoinFuture) -> None:
        instance_id = request.group_instance_id
        assert instance_id is not None
        old_member_id = group.static_member_id(instance_id)
        if old_member_id is None or old_member_id not in group.members:
            self._add_member_and_rebalance(group, new_member_id, request, future)
            return
        self.rebalance.logger.info("Static member %s of group %s with unknown member id rejoins, assigning new member "
                                "id %s, while old member id %s will be removed.", instance_id, group.group_id,
                                new_member_id, old_member_id)
        old = group.get(old_member_id)
        previous = _StaticIncarnation(old_member_id, group.leader_or_empty, old.supported_protocols,
                                      old.rebalance_timeout_ms, old.session_timeout_ms)
        self.rebalance.remove_heartbeat(group, old_member_id)
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.rebalance.schedule_heartbeat(group, new_member_id, request.session_timeout_ms)
        group.update_member(member, list(request.protocols), request.rebalance_timeout_ms,
                            request.session_timeout_ms, future)
        if group.is_(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                self._persist_static_replacement(group, member, previous, request.supports_skip_assignment)
            else:
                self.rebalance.maybe_prepare_rebalance(
                    group, f"static member {new_member_id} rejoined with other protocols")
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            # The leader may already be assigning with the old member id: start over.
            self.rebalance.prepare_rebalance(group, f"updating metadata for static member {new_member_id}")

    def _persist_static_replacement(self, group: GroupMetadata, member: MemberMetadata,
                                    previous: _StaticIncarnation, supports_skip_assignment: bool) -> None:
        """A restarted static member takes its old place in a stable group without a rebalance."""
        new_member_id = member.member_id
        assignment = {m.member_id: m.assignment for m in group.members.values()}

        def stored(error: ErrorCode) -> None:
            if group.members.get(new_member_id) is not member:
                return  # replaced again (or removed) meanwhile
            if error != ErrorCode.NO_ERROR:
                self._restore_static_incarnation(group, member, previous, error)
            elif supports_skip_assignment:
                # JoinGroup v9+: the leader learns it leads but must not reassign a stable group.
                is_leader = group.is_leader(new_member_id)
                group.maybe_complete_join(member, JoinGroupResult(
                    ErrorCode.NO_ERROR, new_member_id, group.generation_id, group.protocol_type, group.protocol_name,
                    group.leader_or_empty, is_leader, group.current_member_metadata() if is_leader else []))
            else:
                # Older clients: report the old leader id so the member never thinks it leads
                # (an assignment from it would not be propagated by a stable group).
                group.maybe_complete_join(member, JoinGroupResult(
                    ErrorCode.NO_ERROR, new_member_id, group.generation_id, group.protocol_type, group.protocol_name,
                    previous.leader_id))

        self.manager.store_group(group, assignment, stored)

    def _restore_static_incarnation(self, group: GroupMetadata, member: MemberMetadata,
                                    previous: _StaticIncarnation, error: ErrorCode) -> None:
        """The replacement was not persisted: put the old incarnation back as it was, then report the error."""
        new_member_id = member.member_id
        future = member.awaiting_join
        group.update_member(member, previous.protocols, previous.rebalance_timeout_ms, previous.session_timeout_ms,
                            None)
        self.rebalance.remove_heartbeat(group, new_member_id)
        group.replace_static_member(member.group_instance_id, new_member_id, previous.member_id)  # type: ignore[arg-type]
        self.rebalance.schedule_heartbeat(group, previous.member_id, member.session_timeout_ms)
        if future is not None:
            complete(future, JoinGroupResult(error, UNKNOWN_MEMBER_ID, group.generation_id, group.protocol_type,
                                             group.protocol_name, previous.leader_id))

    def _current_member_join(self, group: GroupMetadata, request: JoinGroupRequest, future: JoinFuture) -> None:
        member_id = request.member_id
        error = self._current_member_error(group, request)
        if error is not None:
            complete(future, JoinGroupResult(error, member_id))
            return
        if member_id in group.pending_members:
            # KIP-394: the second join of a member that was handed its id.
            self._add_member_and_rebalance(group, member_id, request, future)
            return
        error = self._known_member_error(group, request)
        if error is not None:
            complete(future, JoinGroupResult(error, member_id))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, request, future, f"member {member_id} joining during "
                                                                              f"{state}")
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                # A retry of a JoinGroup whose response was lost: same answer again.
                complete(future, join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, request, future,
                                                  f"member {member_id} changed metadata")
        elif state is GroupState.STABLE:
            self._current_member_join_stable(group, member, request, future)
        else:
            complete(future, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    @staticmethod
    def _current_member_error(group: GroupMetadata, request: JoinGroupRequest) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not group.supports_protocols(request.protocol_type, request.protocol_names):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    @staticmethod
    def _known_member_error(group: GroupMetadata, request: JoinGroupRequest) -> ErrorCode | None:
        member_id, instance_id = request.member_id, request.group_instance_id
        if group.is_static_member_fenced(instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members or (instance_id is not None and not group.has_static_member(instance_id)):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _current_member_join_stable(self, group: GroupMetadata, member: MemberMetadata, request: JoinGroupRequest,
                                    future: JoinFuture) -> None:
        member_id = member.member_id
        if group.is_leader(member_id):
            # The leader's JoinGroup always rebalances: it rejoins for changes the
            # member metadata cannot show (a topic's partition count, say).
            self._update_member_and_rebalance(group, member, request, future, f"leader {member_id} re-joining")
        elif not member.matches(request.protocols):
            self._update_member_and_rebalance(group, member, request, future, f"member {member_id} changed metadata")
        else:
            complete(future, JoinGroupResult(ErrorCode.NO_ERROR, member_id, group.generation_id, group.protocol_type,
                                             group.protocol_name, group.leader_or_empty))

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, request: JoinGroupRequest,
                                  future: JoinFuture) -> None:
        member = MemberMetadata(member_id, request.group_instance_id, request.client_id, request.client_host,
                                request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                                list(request.protocols))
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # lets the initial delay extend
        group.add(member, future)
        # A new member cannot heartbeat until it has its first generation, and a
        # client that gave up on its JoinGroup would linger: expire it after a while.
        self.rebalance.schedule_heartbeat(group, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalance.maybe_prepare_rebalance(group, f"adding new member {member_id} with group instance id "
                                                      f"{request.group_instance_id}; client reason: "
                                                      f"{request.client_reason}")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata, request: JoinGroupRequest,
                                     future: JoinFuture, reason: str) -> None:
        group.update_member(member, list(request.protocols), request.rebalance_timeout_ms,
                            request.session_timeout_ms, future)
        self.rebalance.maybe_prepare_rebalance(group, f"{reason}; client reason: {request.client_reason}")

    # -- SyncGroup ------------------------------------------------------------------
    def sync_group(self, request: SyncGroupRequest) -> SyncFuture:
        future: SyncFuture = self.scheduler.create_future()
        error = self.status.validate(request.group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the load: make the member rejoin.
            error = ErrorCode.REBALANCE_IN_PROGRESS
        group = self.manager.get_group(request.group_id)
        if error is not None:
            complete(future, SyncGroupResult(error))
        elif group is None:
            complete(future, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        else:
            self._sync(group, request, future)
        return future

    @staticmethod
    def _sync_error(group: GroupMetadata, request: SyncGroupRequest) -> ErrorCode | None:
        member_id = request.member_id
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(request.group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
                request.protocol_name is not None and request.protocol_name != group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def _sync(self, group: GroupMetadata, request: SyncGroupRequest, future: SyncFuture) -> None:
        error = self._sync_error(group, request)
        if error is not None:
            complete(future, SyncGroupResult(error))
            return
        member_id = request.member_id
        member = group.get(member_id)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            previous = member.awaiting_sync
            member.awaiting_sync = future
            if previous is not None:
                complete(previous, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
            self.rebalance.remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._store_leader_assignment(group, member_id, request.generation_id, request.assignments)
        else:  # Stable: the assignment is already known
            self.rebalance.remove_pending_sync_member(group, member_id)
            complete(future, SyncGroupResult(ErrorCode.NO_ERROR, group.protocol_type, group.protocol_name,
                                             member.assignment))
            self.rebalance.schedule_heartbeat(group, member_id, member.session_timeout_ms)

    def _store_leader_assignment(self, group: GroupMetadata, leader_id: str, generation_id: int,
                                 assignment: dict[str, bytes]) -> None:
        log = self.rebalance.logger
        log.info("Assignment received from leader %s for group %s for generation %d. The group has %d members, "
                 "%d of which are static.", leader_id, group.group_id, generation_id, len(group.members),
                 len(group.static_members))
        full = {member_id: assignment.get(member_id, b"") for member_id in group.members}
        missing = [m for m in group.members if m not in assignment]
        if missing:
            log.warning("Setting empty assignments for members %s of %s for generation %d", missing, group.group_id,
                        generation_id)

        def stored(error: ErrorCode) -> None:
            # Another member may have joined while the append was in flight; then the
            # group has moved on and this assignment is stale.
            if not (group.is_(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id):
                return
            if error != ErrorCode.NO_ERROR:
                self.rebalance.reset_and_propagate_assignment_error(group, error)
                self.rebalance.maybe_prepare_rebalance(group, f"error {error.name} storing the group assignment")
            else:
                self.rebalance.set_and_propagate_assignment(group, full)
                group.transition_to(GroupState.STABLE, self.scheduler.now_ms())

        self.manager.store_group(group, full, stored)

    # -- Heartbeat --------------------------------------------------------------------
    def heartbeat(self, request: HeartbeatRequest) -> asyncio.Future[ErrorCode]:
        future: asyncio.Future[ErrorCode] = self.scheduler.create_future()
        future.set_result(self._heartbeat(request))
        return future

    def _heartbeat(self, request: HeartbeatRequest) -> ErrorCode:
        error = self.status.validate(request.group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NO_ERROR  # the member will learn what it must once the group is loaded
        if error is not None:
            return error
        group = self.manager.get_group(request.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.member_generation_error(group, request.member_id, request.group_instance_id,
                                             request.generation_id)
        if error is not None:
            return error
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.get(request.member_id)
        self.rebalance.schedule_heartbeat(group, request.member_id, member.session_timeout_ms)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NO_ERROR

    # -- LeaveGroup --------------------------------------------------------------------
    def leave_group(self, request: LeaveGroupRequest) -> asyncio.Future[LeaveGroupResult]:
        future: asyncio.Future[LeaveGroupResult] = self.scheduler.create_future()
        future.set_result(self._leave(request))
        return future

    def _leave(self, request: LeaveGroupRequest) -> LeaveGroupResult:
        """The top-level error, and one error per leaving member."""
        count = len(request.members)
        error = self.status.validate(request.group_id)
        if error is not None:
            return LeaveGroupResult(error, [error] * count)
        group = self.manager.get_group(request.group_id)
        if group is None:
            return LeaveGroupResult(ErrorCode.NO_ERROR, [ErrorCode.UNKNOWN_MEMBER_ID] * count)
        if group.is_(GroupState.DEAD):
            return LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.COORDINATOR_NOT_AVAILABLE] * count)
        return LeaveGroupResult(ErrorCode.NO_ERROR, [self._leave_one(group, member) for member in request.members])

    def _leave_one(self, group: GroupMetadata, leaving: LeavingMember) -> ErrorCode:
        member_id, group_instance_id = leaving.member_id, leaving.group_instance_id
        if member_id == UNKNOWN_MEMBER_ID:
            # Administrative removal of a static member by its instance id (KIP-345).
            current = group.static_member_id(group_instance_id)
            if current is None or current not in group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._remove_current_member(group, current, f"static member {group_instance_id} removed by admin")
            return ErrorCode.NO_ERROR
        if member_id in group.pending_members:
            self.rebalance.remove_pending_member_and_update_group(group, member_id)
            return ErrorCode.NO_ERROR
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id in group.members:
            self._remove_current_member(group, member_id, f"removing member {member_id} on LeaveGroup")
            return ErrorCode.NO_ERROR
        return ErrorCode.UNKNOWN_MEMBER_ID

    def _remove_current_member(self, group: GroupMetadata, member_id: str, reason: str) -> None:
        member = group.get(member_id)
        self.rebalance.remove_heartbeat(group, member_id)
        self.rebalance.logger.info("Member %s has left group %s through explicit `LeaveGroup`", member_id,
                                group.group_id)
        self.rebalance.remove_member_and_update_group(group, member, reason)

    @staticmethod
    def member_generation_error(group: GroupMetadata, member_id: str, group_instance_id: str | None,
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
