"""The share group requests and answers as the coordinator reads them, whatever their wire version.

As ``consumer_group_requests``: the broker's handler builds the request from
the decoded one and the connection; the coordinator answers with these results.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

from coordinator.group.consumer_group import Assignment
from coordinator.group.share_group import ShareGroup
from protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatRequest:
    """ShareGroupHeartbeat with its request context; the optional fields are None when unchanged."""

    group_id: str
    member_id: str
    member_epoch: int
    client_id: str
    #: As Kafka shows it: ``/<address>``.
    client_host: str
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatResult:
    error: ErrorCode = ErrorCode.NO_ERROR
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: The member's partitions; None when they did not change (and the member did not just join).
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    """One group of a ShareGroupDescribe: an error, or the group itself."""

    group_id: str
    error: ErrorCode = ErrorCode.NO_ERROR
    error_message: str | None = None
    group: ShareGroup | None = None
    assignor_name: str = ""


@dataclass(frozen=True)
class ShareGroupConfig:
    """The broker's ``group.share.*`` configs the group coordinator reads."""

    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 200
    assignor: str = "simple"


class ShareStatePersister(Protocol):
    """The share partitions' durable state as the group coordinator uses it: the two calls of Kafka's
    Persister (coordinator/share/persister.py) it makes, InitializeShareGroupState when a share partition is
    first subscribed to and DeleteShareGroupState when the group is deleted. Both raise on failure (the
    persister's error carries Kafka's code in ``error_code``)."""

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> None: ...

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None: ...
