"""Where a partition's leader is, as far as this broker's metadata knows (cluster mode).

A coordinator in a cluster needs two answers it cannot give itself: which
broker leads a partition of its internal topic (FindCoordinator names it), and
where the leader of a data partition listens (the transaction markers go
there). Kafka takes both from its MetadataCache
(``getPartitionLeaderEndpoint(topic, partition, listenerName)``); here the
broker passes a :class:`PartitionLeaderLookup` callable, which its metadata
cache (fed by UpdateMetadata) implements. A lone broker never needs one.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol


class LeaderEndpoint(NamedTuple):
    """A partition leader: its broker id and its address on the listener asked for."""

    node_id: int
    host: str
    port: int


class PartitionLeaderLookup(Protocol):
    def __call__(self, topic: str, partition: int, listener_name: str) -> LeaderEndpoint | None:
        """The live leader of ``topic``-``partition`` and its endpoint on ``listener_name``; None when the
        partition is unknown, has no live leader, or the leader has no such listener."""
        ...


class TopicPartitionCount(Protocol):
    def __call__(self, topic: str) -> int | None:
        """How many partitions ``topic`` has in the cluster's metadata; None if it does not exist."""
        ...
