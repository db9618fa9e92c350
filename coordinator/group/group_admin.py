"""DescribeGroups, ListGroups and DeleteGroups: the coordinator's administrative side."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from coordinator.common.scheduler import Scheduler
from coordinator.group.group_metadata import NO_PROTOCOL, GroupMetadata, GroupState
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_rebalance import GroupRebalance
from coordinator.group.group_status import GroupStatus
from protocol.errors import ErrorCode


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    """Kafka's GroupSummary: members' metadata and assignments only for a Stable group."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary] = field(default_factory=list)


def summarize(group_id: str, group: GroupMetadata | None) -> GroupSummary:
    if group is None or group.is_(GroupState.DEAD):
        return GroupSummary(group_id, str(GroupState.DEAD), "", NO_PROTOCOL)
    stable = group.is_(GroupState.STABLE) and group.protocol_name is not None
    members = [
        MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                      m.metadata(group.protocol_name) if stable else b"",  # type: ignore[arg-type]
                      m.assignment if stable else b"")
        for m in group.members.values()]
    return GroupSummary(group.group_id, str(group.state), group.protocol_type or "",
                        group.protocol_name if stable else NO_PROTOCOL, members)  # type: ignore[arg-type]


class GroupAdmin:
    """DescribeGroups, ListGroups and DeleteGroups; owned by the coordinator. A deleted group's
    timers are the rebalance's to cancel."""

    def __init__(self, manager: GroupMetadataManager, scheduler: Scheduler, rebalance: GroupRebalance,
                 status: GroupStatus) -> None:
        self.manager = manager
        self.scheduler = scheduler
        self.rebalance = rebalance
        self.status = status

    def handle_describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary | None]:
        error = self.status.validate(group_id, allow_empty_id=True)
        if error is not None:
            return error, None
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.NO_ERROR, None
        return ErrorCode.NO_ERROR, summarize(group_id, group)

    def handle_list_groups(self, states: set[str]) -> tuple[ErrorCode, list[GroupMetadata]]:
        """Every group this coordinator owns, optionally filtered by state (case-insensitive, KIP-518)."""
        if not self.status.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        wanted = {s.lower() for s in states}
        groups = [g for g in self.manager.current_groups()
                  if not g.is_(GroupState.DEAD) and (not wanted or str(g.state).lower() in wanted)]
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading() else ErrorCode.NO_ERROR
        return error, groups

    def handle_delete_groups(self, group_ids: list[str], callback: Callable[[dict[str, ErrorCode]], None]) -> None:
        errors: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self.status.validate(group_id, allow_empty_id=True)
            if error is not None:
                errors[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_(GroupState.DEAD):
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self.scheduler.now_ms())
                self.rebalance.cancel_group_timers(group)
                eligible.append(group)
                errors[group_id] = ErrorCode.NO_ERROR
            else:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
        if not eligible:
            callback(errors)
            return
        self.rebalance.logger.info("Deleting groups %s", [g.group_id for g in eligible])
        self.manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets(), lambda _n: callback(errors))
