"""Kafka's partition leader election algorithms (PartitionLeaderElectionAlgorithms), pure.

Each picks a leader from a partition's assignment (its replicas in preference order)
given the ISR and the live brokers, or None when no broker qualifies. The callers in
:mod:`controller.partition_state_machine` turn a pick into a new LeaderAndIsr.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

__all__ = [
    "controlled_shutdown_leader",
    "offline_partition_leader",
    "preferred_replica_leader",
    "reassign_partition_leader",
]


def offline_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int], unclean_enabled: bool
) -> tuple[int | None, bool]:
    """The first live in-sync replica in assignment order; else (unclean) the first live replica.

    Returns (leader, unclean): ``unclean`` is True when the leader came from outside the ISR.
    """
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica, False
    if unclean_enabled:
        for replica in assignment:
            if replica in live_replicas:
                return replica, True
    return None, False


def reassign_partition_leader(
    reassignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    """The first replica of the target assignment that is live and in sync."""
    return next((r for r in reassignment if r in live_replicas and r in isr), None)


def preferred_replica_leader(assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]) -> int | None:
    """The preferred (first) replica, if it is live and in sync; nobody else."""
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int], shutting_down: Collection[int]
) -> int | None:
    """The first live in-sync replica that is not shutting down."""
    return next((r for r in assignment if r in live_replicas and r in isr and r not in shutting_down), None)
