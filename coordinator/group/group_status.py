"""Whether the coordinator answers for a group at all: the check before every group request."""

from __future__ import annotations

from coordinator.group.group_metadata_manager import GroupMetadataManager
from protocol.errors import ErrorCode


class GroupStatus:
    """The coordinator's running flag and Kafka's validateGroupStatus over the groups it owns.
    Owned by the coordinator (which clears ``active`` at shutdown); its components read it."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager
        self.active = True

    def validate(self, group_id: str, allow_empty_id: bool = False) -> ErrorCode | None:
        """None, or the error every request on ``group_id`` gets now."""
        if not group_id and not allow_empty_id:
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not self.manager.is_group_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        if self.manager.is_group_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None
