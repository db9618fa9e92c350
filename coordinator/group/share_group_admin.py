"""What the coordinator answers about share groups besides their heartbeats.

- ShareGroupDescribe: a group that is absent is GROUP_ID_NOT_FOUND (``Group x
  not found.``), one of another type ``Group x is not a share group.``, as Kafka;
- the share groups ListGroups lists (type ``share``), filtered by state;
- DeleteGroups: NON_EMPTY_GROUP for a share group with members, else its
  records are tombstoned.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.group.group_status import GroupStatus
from coordinator.group.share_group import ShareGroup
from coordinator.group.share_group_heartbeat import ShareGroupHeartbeat
from coordinator.group.share_group_requests import ShareGroupDescription
from protocol.errors import ErrorCode


class ShareGroupAdmin:
    def __init__(self, heartbeats: ShareGroupHeartbeat, status: GroupStatus, other_group: Callable[[str], bool]
                 ) -> None:
        self.heartbeats = heartbeats
        self.status = status
        self.other_group = other_group

    def is_share_group(self, group_id: str) -> bool:
        return group_id in self.heartbeats.groups

    def describe(self, group_ids: list[str]) -> list[ShareGroupDescription]:
        out = []
        for group_id in group_ids:
            error = self.status.validate(group_id, allow_empty_id=True)
            group = self.heartbeats.groups.get(group_id)
            if error is not None:
                out.append(ShareGroupDescription(group_id, error))
            elif group is None:
                message = (f"Group {group_id} is not a share group." if self.other_group(group_id)
                           else f"Group {group_id} not found.")
                out.append(ShareGroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message))
            else:
                out.append(ShareGroupDescription(group_id, group=group,
                                                 assignor_name=self.heartbeats.config.assignor))
        return out

    def list_groups(self, states: set[str]) -> list[ShareGroup]:
        """The share groups, filtered by state (case-insensitive) when ``states`` names some."""
        wanted = {s.lower() for s in states}
        return [g for g in self.heartbeats.groups.values()
                if not wanted or str(g.state).lower() in wanted]

    def delete_groups(self, group_ids: list[str], done: Callable[[dict[str, ErrorCode]], None]) -> None:
        """``done`` gets the answers for the share groups among ``group_ids`` (at once unless some empty group
        has share-partition state to delete first, as Kafka deletes it through the persister before the group)."""
        answers: dict[str, ErrorCode] = {}
        with_state: list[ShareGroup] = []
        for group_id in group_ids:
            group = self.heartbeats.groups.get(group_id)
            if group is None or self.status.validate(group_id) is not None:
                continue
            if group.members:
                answers[group_id] = ErrorCode.NON_EMPTY_GROUP
            elif self.heartbeats.persister is not None and (group.initialized or group.initializing):
                with_state.append(group)
            else:
                self.heartbeats.delete_group(group_id)
                answers[group_id] = ErrorCode.NO_ERROR
        if not with_state:
            done(answers)
            return
        self.heartbeats.spawn(self._delete_with_state(with_state, answers, done))

    async def _delete_with_state(self, groups: list[ShareGroup], answers: dict[str, ErrorCode],
                                 done: Callable[[dict[str, ErrorCode]], None]) -> None:
        for group in groups:
            error = await self.heartbeats.delete_state(group)
            if self.heartbeats.groups.get(group.group_id) is not group:
                error = ErrorCode.NOT_COORDINATOR  # unloaded (or deleted) meanwhile
            elif group.members:
                error = ErrorCode.NON_EMPTY_GROUP  # a member joined meanwhile
            elif error == ErrorCode.NO_ERROR:
                self.heartbeats.delete_group(group.group_id)
            answers[group.group_id] = error
        done(answers)
