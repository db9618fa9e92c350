"""Replica: what a partition's leader knows of one follower (Kafka's kafka.cluster.Replica).

The leader learns a follower's log end offset from the fetch offset of each of
its fetches. ``last_caught_up_time_ms`` is the last time the follower was known
to have everything the leader had: when a fetch reaches the leader's log end,
that fetch's time; when a fetch reaches the log end offset the leader had at
the follower's *previous* fetch, that previous fetch's time (it had then caught
up to what existed then). A follower whose last catch-up is older than
``replica.lag.time.max.ms`` is out of sync and leaves the ISR.

Event loop only: the leader's follower-fetch path and leadership changes run there.
"""

from __future__ import annotations

from dataclasses import dataclass

#: An offset not known yet (Kafka's UnifiedLog.UnknownOffset).
UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class Replica:
    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    #: The leader's log end offset when this follower last fetched.
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    #: The follower's broker epoch as its fetches carry it (Fetch v15+), -1 when unknown.
    broker_epoch: int = -1

    def update_fetch_state(self, follower_fetch_offset: int, follower_start_offset: int,
                           follower_fetch_time_ms: int, leader_end_offset: int, broker_epoch: int = -1) -> None:
        """Record one fetch of this follower (Kafka's updateFetchStateOrThrow)."""
        if follower_fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, follower_fetch_time_ms)
        elif follower_fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = follower_start_offset
        self.log_end_offset = follower_fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = follower_fetch_time_ms
        if broker_epoch >= 0:
            self.broker_epoch = broker_epoch

    def reset_replica_state(self, current_time_ms: int, leader_end_offset: int, is_new_leader: bool,
                            is_follower_in_sync: bool) -> None:
        """On (re)election of the local leader (Kafka's resetReplicaState): a new leader knows
        nothing of its followers' logs, and counts the in-sync ones as caught up now, so they
        get a full ``replica.lag.time.max.ms`` to fetch before they can be dropped."""
        if is_new_leader:
            self.last_caught_up_time_ms = current_time_ms if is_follower_in_sync else 0
            self.log_start_offset = UNKNOWN_OFFSET
            self.log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0
            self.broker_epoch = -1
        else:
            if is_follower_in_sync:
                self.last_caught_up_time_ms = current_time_ms
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = current_time_ms

    def is_caught_up(self, leader_end_offset: int, current_time_ms: int, replica_max_lag_ms: int) -> bool:
        """At the leader's log end, or caught up within the allowed lag (Kafka's isCaughtUp)."""
        return (leader_end_offset == self.log_end_offset
                or current_time_ms - self.last_caught_up_time_ms <= replica_max_lag_ms)
