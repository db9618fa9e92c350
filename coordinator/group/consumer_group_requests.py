"""The consumer protocol's requests and answers as the coordinator reads them, whatever their wire version.

As in ``group_requests``: the broker's handler builds the request from the
decoded one and the connection, wire versions end there (a field a version
lacks holds what Kafka assumes for it), and the coordinator answers with
these results, which the handler writes back in the request's version.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from coordinator.group.consumer_group import Assignment, ConsumerGroup
from coordinator.group.consumer_group_regex import TopicAuthorizer
from protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    """ConsumerGroupHeartbeat (Kafka's ConsumerGroupHeartbeatRequestData with its request context).

    The optional fields are None when the member did not send them (unchanged since its last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    client_id: str
    #: As Kafka shows it: ``/<address>``.
    client_host: str
    instance_id: str | None = None
    rack_id: str | None = None
    #: -1: unchanged.
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    #: The partitions the member owns, or None when unchanged since its last heartbeat.
    owned: Mapping[uuid.UUID, frozenset[int]] | None = None
    #: v1+: the member chooses its member id, so an empty one is invalid even when joining.
    member_id_required: bool = True
    #: The topics the member's principal may DESCRIBE, which are all its regular expression may give it
    #: (None: no authorizer, every topic).
    topic_authorizer: TopicAuthorizer | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResult:
    error: ErrorCode = ErrorCode.NO_ERROR
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: The member's partitions; None when they did not change (and the request was not a full one).
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    """One group of a ConsumerGroupDescribe: an error, or the group itself."""

    group_id: str
    error: ErrorCode = ErrorCode.NO_ERROR
    error_message: str | None = None
    group: ConsumerGroup | None = None
    assignor_name: str = ""
