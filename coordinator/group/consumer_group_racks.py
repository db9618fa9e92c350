"""Where members and partitions are, for the rack-aware assignment of the consumer protocol.

A member sends its rack (ConsumerGroupHeartbeat's RackId, the client's
``client.rack``); a partition is in the racks of its replicas' brokers
(``broker.rack``). As Kafka's rack-aware assignment builders do, racks are used
only when they can make a difference: some member has a rack, some partition
has a replica in a member's rack, and not every partition is in the same racks
(then any member is as close to any partition as another). Then:

- a member keeps a partition of its previous target in another rack only if no
  member subscribed to its topic is in one of the partition's racks;
- a free partition goes first to a member in one of its racks (partitions with
  the fewest such members first), as long as that keeps the balance.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TopicPartition = tuple[uuid.UUID, int]
#: Topic id → the racks of each partition's replicas, by partition index.
PartitionRacks = Mapping[uuid.UUID, tuple[frozenset[str], ...]]


@dataclass(frozen=True, slots=True)
class RackInfo:
    #: Member id → its rack (members without one are absent).
    member_racks: Mapping[str, str]
    partition_racks: PartitionRacks
    #: Whether racks are used at all (see the module's rule).
    used: bool

    @classmethod
    def of(cls, member_racks: Mapping[str, str | None], partition_racks: PartitionRacks,
           topics: Mapping[uuid.UUID, int]) -> RackInfo:
        racks = {m: r for m, r in member_racks.items() if r}
        if not racks:
            return cls({}, {}, used=False)
        member_rack_set = set(racks.values())
        seen: set[frozenset[str]] = set()
        close = False
        for topic_id, count in topics.items():
            per_partition = partition_racks.get(topic_id, ())
            for partition in range(count):
                partition_rack_set = per_partition[partition] if partition < len(per_partition) else frozenset()
                seen.add(partition_rack_set)
                close = close or not member_rack_set.isdisjoint(partition_rack_set)
        return cls(racks, partition_racks, used=close and len(seen) > 1)

    def racks_of(self, tp: TopicPartition) -> frozenset[str]:
        per_partition = self.partition_racks.get(tp[0], ())
        return per_partition[tp[1]] if tp[1] < len(per_partition) else frozenset()

    def matches(self, member_id: str, tp: TopicPartition) -> bool:
        """The member is in one of the partition's racks."""
        rack = self.member_racks.get(member_id)
        return self.used and rack is not None and rack in self.racks_of(tp)

    def close_members(self, tp: TopicPartition, candidates: Iterable[str]) -> list[str]:
        """The candidates in one of the partition's racks."""
        if not self.used:
            return []
        racks = self.racks_of(tp)
        return [m for m in candidates if self.member_racks.get(m) in racks]

    def keeps(self, member_id: str, tp: TopicPartition, subscribers: Iterable[str]) -> bool:
        """Whether the member keeps a partition of its previous target: unless it is in another rack
        than the partition while a subscriber of the topic is in the partition's."""
        if not self.used or self.matches(member_id, tp):
            return True
        return not self.close_members(tp, subscribers)
