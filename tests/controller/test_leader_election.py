"""Kafka's partition leader election algorithms (PartitionLeaderElectionAlgorithms)."""

from __future__ import annotations

from controller.leader_election import (
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
    reassign_partition_leader,
)


def test_offline_election_takes_first_live_isr_member_in_assignment_order() -> None:
    assert offline_partition_leader([1, 2, 3], isr=[3, 2], live_replicas=[2, 3], unclean_enabled=False) == (2, False)
    assert offline_partition_leader([1, 2, 3], isr=[1, 3], live_replicas=[2, 3], unclean_enabled=False) == (3, False)


def test_offline_election_without_live_isr_needs_unclean() -> None:
    assert offline_partition_leader([1, 2, 3], isr=[1], live_replicas=[2, 3], unclean_enabled=False) == (None, False)
    assert offline_partition_leader([1, 2, 3], isr=[1], live_replicas=[3, 2], unclean_enabled=True) == (2, True)
    assert offline_partition_leader([1, 2, 3], isr=[1], live_replicas=[], unclean_enabled=True) == (None, False)


def test_clean_leader_preferred_even_when_unclean_is_enabled() -> None:
    assert offline_partition_leader([1, 2, 3], isr=[3], live_replicas=[2, 3], unclean_enabled=True) == (3, False)


def test_preferred_election_only_the_first_replica() -> None:
    assert preferred_replica_leader([1, 2, 3], isr=[1, 2, 3], live_replicas=[1, 2, 3]) == 1
    assert preferred_replica_leader([1, 2, 3], isr=[2, 3], live_replicas=[1, 2, 3]) is None  # not in sync
    assert preferred_replica_leader([1, 2, 3], isr=[1, 2, 3], live_replicas=[2, 3]) is None  # not alive
    assert preferred_replica_leader([], isr=[], live_replicas=[]) is None


def test_controlled_shutdown_election_skips_shutting_down_brokers() -> None:
    assert controlled_shutdown_leader([1, 2, 3], isr=[1, 2, 3], live_replicas=[1, 2, 3], shutting_down={1}) == 2
    assert controlled_shutdown_leader([1, 2, 3], isr=[1, 3], live_replicas=[1, 2, 3], shutting_down={1}) == 3
    assert controlled_shutdown_leader([1, 2], isr=[1], live_replicas=[1, 2], shutting_down={1}) is None


def test_reassignment_election_uses_the_target_replicas() -> None:
    assert reassign_partition_leader([4, 2], isr=[1, 2, 4], live_replicas=[1, 2, 4]) == 4
    assert reassign_partition_leader([4, 2], isr=[1, 2], live_replicas=[1, 2, 4]) == 2
    assert reassign_partition_leader([4], isr=[1, 2], live_replicas=[1, 2, 4]) is None
