"""The classic group protocol's requests as the coordinator reads them, whatever their wire version.

The broker's handler builds one of these from the decoded request and the
connection (client id and host) and hands it to the coordinator whole. Wire
versions end here: a field a version lacks already holds what Kafka assumes
for that version (no group instance id before JoinGroup v5, the session
timeout as rebalance timeout before v1, ...), so the coordinator never sees a
version number.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.errors import ErrorCode

#: A protocol a member supports: its name (an assignor's) and its opaque metadata.
SupportedProtocol = tuple[str, bytes]


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    """JoinGroup (Kafka's JoinGroupRequestData with the request context it is read with)."""

    group_id: str
    #: Empty for a member that joins for the first time.
    member_id: str
    #: KIP-345 static membership (v5+).
    group_instance_id: str | None
    client_id: str
    #: As Kafka shows it: ``/<address>``.
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[SupportedProtocol, ...]
    #: Why the member (re)joins (v8+): written to the log with the rebalance it causes.
    reason: str | None = None
    #: KIP-394 (v4+): a member without an id is given one with MEMBER_ID_REQUIRED and joins again with it.
    require_known_member_id: bool = True
    #: KIP-814 (v9+): a static leader rejoining a stable group is told to skip the assignment.
    supports_skip_assignment: bool = True

    @property
    def is_unknown_member(self) -> bool:
        return self.member_id == ""

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    @property
    def client_reason(self) -> str:
        """As Kafka logs it (JoinGroupRequest.joinReason)."""
        return self.reason or "not provided"


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    #: Checked against the group's when given (v5+).
    protocol_type: str | None
    protocol_name: str | None
    #: The leader's assignment, by member id; empty from a follower.
    assignments: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    """One member of a LeaveGroup: an empty member id with an instance id removes a static member (KIP-345)."""

    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    """The top-level error and one error per leaving member, in the request's order."""

    error: ErrorCode
    member_errors: list[ErrorCode]
