"""Which replica a consumer should fetch from (KIP-392, Kafka's ReplicaSelector plugins).

The leader asks its selector on each consumer fetch that carries client metadata
(Fetch v11+). Kafka's two selectors:

* ``LeaderSelector``: always the leader, so no preferred read replica is ever sent;
* ``RackAwareReplicaSelector``: for a client with a rack, a replica in that rack:
  the leader if it is there, else the most caught-up one (largest log end offset,
  then the most recently caught up); the leader when none is, or the client has no rack.

The candidates are the leader and the in-sync followers whose logs hold the fetch
offset (Kafka's findPreferredReadReplica): a lagging follower would make the
consumer fall behind the producers for as long as it lags. The answer is a broker
id to send, or None when it is the leader (never sent) or no broker is known for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica (Kafka's ReplicaView): its broker, log end and time since caught up."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


class RackAwareReplicaSelector:
    """Kafka's RackAwareReplicaSelector over the racks of live brokers.

    ``rack_of`` answers a live broker's ``broker.rack`` (None when it has none or is
    not live: Kafka's replica without an endpoint, which can never be chosen).
    """

    def __init__(self, rack_of: Callable[[int], str | None]) -> None:
        self.rack_of = rack_of

    def select(self, client_rack: str, leader: ReplicaView, followers: Iterable[ReplicaView]) -> ReplicaView:
        """The replica the client should read from (the leader when the rack has none)."""
        if not client_rack:
            return leader
        if leader.rack == client_rack:
            return leader
        same_rack = [view for view in followers if view.rack == client_rack]
        if not same_rack:
            return leader
        return max(same_rack, key=lambda view: (view.log_end_offset, -view.time_since_last_caught_up_ms))


def replica_selector(class_name: str | None, rack_of: Callable[[int], str | None]
                     ) -> RackAwareReplicaSelector | None:
    """The selector ``replica.selector.class`` names; None for the leader selector or none, as
    both always answer the leader (the config has checked the name)."""
    if class_name == RACK_AWARE_REPLICA_SELECTOR:
        return RackAwareReplicaSelector(rack_of)
    return None
