"""Kafka's replica placement for new topics and partitions (AdminUtils.assignReplicasToBrokers).

Pure: brokers (id, rack) in, ``{partition: [replica, ...]}`` out. The results are
Kafka's for the same start index and replica shift, so an operator who knows where
Kafka would put a partition finds it in the same place here:

- Rack-unaware (no broker has a rack): the first replica of partition ``p`` is broker
  ``(p + start) % n`` of the sorted broker list, and the others follow it at a distance
  that grows by one every ``n`` partitions (the "replica shift"), so the followers of
  one leader's partitions spread over the other brokers.
- Rack-aware (every broker has a rack): the same walk over a broker list that alternates
  racks (rack1's first, rack2's first, ..., rack1's second, ...), skipping a broker whose
  rack (or itself) already holds a replica until every rack (every broker) does.

Start index and shift are random by default, as in Kafka; tests pass fixed ones.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

__all__ = [
    "AdminOperationError",
    "BrokerMetadata",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "assign_replicas_to_brokers",
    "rack_alternated_broker_list",
]


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """A broker as placement sees it: Kafka's admin.BrokerMetadata."""

    id: int
    rack: str | None = None


class AdminOperationError(Exception):
    """Kafka's AdminOperationException: a placement that cannot be made."""


class InvalidReplicationFactorError(AdminOperationError):
    """Kafka's InvalidReplicationFactorException: INVALID_REPLICATION_FACTOR (38)."""


class InvalidPartitionsError(AdminOperationError):
    """Kafka's InvalidPartitionsException: INVALID_PARTITIONS (37)."""


_rng = random.SystemRandom()


def assign_replicas_to_brokers(
    brokers: Iterable[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
) -> dict[int, list[int]]:
    """Kafka's AdminUtils.assignReplicasToBrokers.

    ``brokers`` are taken in id order (Kafka's callers sort them). ``fixed_start_index``
    >= 0 fixes both the start index and the initial replica shift, as Kafka's does;
    ``start_partition_id`` is the first new partition's id (adding partitions).
    """
    metadata = sorted(brokers, key=lambda b: b.id)
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(metadata):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(metadata)}."
        )
    if all(b.rack is None for b in metadata):
        return _assign_rack_unaware(
            n_partitions, replication_factor, [b.id for b in metadata], fixed_start_index, start_partition_id
        )
    if any(b.rack is None for b in metadata):
        raise AdminOperationError("Not all brokers have rack information for replica rack aware assignment.")
    rack_of = {b.id: b.rack for b in metadata if b.rack is not None}
    return _assign_rack_aware(n_partitions, replication_factor, rack_of, fixed_start_index, start_partition_id)


def _start(fixed_start_index: int, n_brokers: int) -> tuple[int, int]:
    """(start index, initial replica shift): both the fixed index, or two independent random draws."""
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    return _rng.randrange(n_brokers), _rng.randrange(n_brokers)


def _replica_index(first_replica_index: int, replica_shift: int, j: int, n_brokers: int) -> int:
    """Index of the ``j``-th follower: never the first replica's own index."""
    shift = 1 + (replica_shift + j) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def _assign_rack_unaware(
    n_partitions: int, replication_factor: int, broker_ids: list[int], fixed_start_index: int, start_partition_id: int
) -> dict[int, list[int]]:
    n = len(broker_ids)
    start_index, shift = _start(fixed_start_index, n)
    assignment: dict[int, list[int]] = {}
    partition = max(0, start_partition_id)
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [broker_ids[first]]
        replicas.extend(broker_ids[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1))
        assignment[partition] = replicas
        partition += 1
    return assignment


def rack_alternated_broker_list(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack in turn (racks sorted, each rack's brokers sorted).

    {0: rack1, 1: rack3, 2: rack3, 3: rack2, 4: rack2, 5: rack1} -> [0, 3, 1, 5, 4, 2].
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in rack_of.items():
        by_rack.setdefault(rack, []).append(broker)
    iterators: dict[str, Iterator[int]] = {rack: iter(sorted(ids)) for rack, ids in by_rack.items()}
    racks = sorted(iterators)
    result: list[int] = []
    rack_index = 0
    while len(result) < len(rack_of):
        next_broker = next(iterators[racks[rack_index]], None)
        if next_broker is not None:
            result.append(next_broker)
        rack_index = (rack_index + 1) % len(racks)
    return result


def _assign_rack_aware(
    n_partitions: int, replication_factor: int, rack_of: Mapping[int, str], fixed_start_index: int, start_partition_id: int
) -> dict[int, list[int]]:
    arranged = rack_alternated_broker_list(rack_of)
    n_racks = len(set(rack_of.values()))
    n = len(arranged)
    start_index, shift = _start(fixed_start_index, n)
    assignment: dict[int, list[int]] = {}
    partition = max(0, start_partition_id)
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {rack_of[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                # A new rack first (unless every rack has one), a new broker always (unless all have one).
                if (rack not in racks_with_replicas or len(racks_with_replicas) == n_racks) and (
                    broker not in brokers_with_replicas or len(brokers_with_replicas) == n
                ):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        assignment[partition] = replicas
        partition += 1
    return assignment
