"""Kafka's replica placement: the same assignments as Kafka's AdminUtils for the same start index and shift."""

from __future__ import annotations

from collections import Counter

import pytest

from controller.replica_assignment import (
    AdminOperationError,
    BrokerMetadata,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
)


def _racked(rack_of: dict[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(b, r) for b, r in rack_of.items()]


def test_rack_unaware_matches_kafkas_documented_layout() -> None:
    # AdminUtils' scaladoc example: 5 brokers, 10 partitions, RF 3, start index 0, shift 0.
    brokers = [BrokerMetadata(i) for i in range(5)]
    assert assign_replicas_to_brokers(brokers, 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }


def test_rack_unaware_sorts_brokers_and_continues_from_start_partition() -> None:
    brokers = [BrokerMetadata(i) for i in (4, 2, 0, 3, 1)]
    whole = assign_replicas_to_brokers(brokers, 10, 3, fixed_start_index=0)
    tail = assign_replicas_to_brokers(brokers, 5, 3, fixed_start_index=0, start_partition_id=5)
    assert tail == {p: whole[p] for p in range(5, 10)}


def test_rack_alternated_list_matches_kafka() -> None:
    rack_of = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(rack_of) == [0, 3, 1, 5, 4, 2]
    del rack_of[5]
    assert rack_alternated_broker_list(rack_of) == [0, 3, 1, 4, 2]


def test_rack_aware_matches_kafkas_test_expectation() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    rack_of = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas_to_brokers(_racked(rack_of), 7, 3, fixed_start_index=0, start_partition_id=0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2],
    }


@pytest.mark.parametrize("start", [-1, 0, 1, 2, 5])
def test_rack_aware_spreads_replicas_over_racks_and_leaders_evenly(start: int) -> None:
    rack_of = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    assignment = assign_replicas_to_brokers(_racked(rack_of), 6, 3, fixed_start_index=start)
    assert sorted(assignment) == list(range(6))
    for replicas in assignment.values():
        assert len(set(replicas)) == 3
        assert len({rack_of[b] for b in replicas}) == 3  # one replica per rack
    assert Counter(r[0] for r in assignment.values()) == Counter(range(6))  # one leader per broker
    assert Counter(b for r in assignment.values() for b in r) == Counter(dict.fromkeys(range(6), 3))


def test_more_replicas_than_racks_covers_every_rack() -> None:
    rack_of = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for replicas in assign_replicas_to_brokers(_racked(rack_of), 6, 5).values():
        assert len(set(replicas)) == 5
        assert {rack_of[b] for b in replicas} == {"rack1", "rack2", "rack3"}


def test_random_start_differs_between_calls_but_stays_valid() -> None:
    brokers = [BrokerMetadata(i) for i in range(6)]
    seen = {tuple(map(tuple, assign_replicas_to_brokers(brokers, 6, 2).values())) for _ in range(50)}
    assert len(seen) > 1
    for layout in seen:
        assert all(len(set(r)) == 2 for r in layout)


def test_validation_errors_are_kafkas() -> None:
    brokers = [BrokerMetadata(i) for i in range(3)]
    with pytest.raises(InvalidReplicationFactorError, match=r"^Replication factor: 4 larger than available brokers: 3\.$"):
        assign_replicas_to_brokers(brokers, 1, 4)
    with pytest.raises(InvalidReplicationFactorError, match="must be larger than 0"):
        assign_replicas_to_brokers(brokers, 1, 0)
    with pytest.raises(InvalidPartitionsError, match="Number of partitions must be larger than 0"):
        assign_replicas_to_brokers(brokers, 0, 1)
    with pytest.raises(AdminOperationError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers([BrokerMetadata(0, "a"), BrokerMetadata(1)], 1, 1)


@pytest.mark.parametrize("start", [-1, 0, 3, 11])
def test_large_rack_aware_assignment_is_even(start: int) -> None:
    # AdminRackAwareTest.testLargeNumberPartitionsAssignment: 12 brokers on 3 racks, 96 partitions, RF 3.
    rack_of = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
               6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}
    assignment = assign_replicas_to_brokers(_racked(rack_of), 96, 3, fixed_start_index=start)
    assert all(len({rack_of[b] for b in r}) == 3 for r in assignment.values())
    assert Counter(r[0] for r in assignment.values()) == Counter(dict.fromkeys(range(12), 8))
    assert Counter(b for r in assignment.values() for b in r) == Counter(dict.fromkeys(range(12), 24))


def test_rack_aware_expansion_continues_the_layout() -> None:
    # AdminRackAwareTest.testRackAwareExpansion: partitions 12..23 on brokers 6..11 stay rack-spread.
    rack_of = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assignment = assign_replicas_to_brokers(_racked(rack_of), 12, 2, start_partition_id=12)
    assert sorted(assignment) == list(range(12, 24))
    assert all(len({rack_of[b] for b in r}) == 2 for r in assignment.values())
    assert Counter(r[0] for r in assignment.values()) == Counter(dict.fromkeys(range(6, 12), 2))


@pytest.mark.parametrize("start", [-1, 0, 1, 2, 3, 4, 5])
def test_uneven_racks_keep_every_partition_on_every_rack(start: int) -> None:
    # Kafka's AdminRackAwareTest.testAssignmentWithRackAwareWithUnevenRacks: racks of 3, 1 and 2 brokers.
    # 12 partitions, RF 3: every partition spans the three racks and every broker leads two; the
    # replicas cannot spread evenly (Kafka checks them no further): rack2's only broker holds all 12.
    rack_of = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    assignment = assign_replicas_to_brokers(_racked(rack_of), 12, 3, fixed_start_index=start)
    assert all(len({rack_of[b] for b in replicas}) == 3 for replicas in assignment.values())
    assert Counter(r[0] for r in assignment.values()) == Counter(dict.fromkeys(range(6), 2))
    assert sum(2 in replicas for replicas in assignment.values()) == 12
