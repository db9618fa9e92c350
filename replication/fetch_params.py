"""What a fetch asks of the replica manager (Kafka's FetchParams and a fetched partition)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class FetchParams:
    """The request-wide part of a fetch (Kafka's FetchParams)."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    #: Fetch v0-v2 (KIP-74 came with v3): no partition gets a first batch larger than its limit.
    hard_max_bytes_limit: bool = False

    #: The follower's broker epoch (Fetch v15+'s replica_state), -1 when not sent.
    replica_epoch: int = -1
    #: A consumer's ``client.rack`` (Fetch v11+'s rack_id, "" when it has none); None below v11.
    #: Kafka's client metadata: with it a consumer may read from a follower (KIP-392).
    client_rack: str | None = None

    @property
    def fetch_only_from_leader(self) -> bool:
        """Followers and consumers without client metadata read from the leader alone."""
        return self.replica_id >= 0 or self.client_rack is None

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


class FetchPartition(Protocol):
    """One partition of a fetch: what the replica manager reads of it."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def current_leader_epoch(self) -> int: ...
    @property
    def last_fetched_epoch(self) -> int: ...
