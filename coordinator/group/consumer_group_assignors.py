"""The server-side assignors of the consumer protocol: ``uniform`` and ``range`` (KIP-848).

An assignor maps every member to its target partitions, given each member's
subscribed topics, the topics' partition counts and the previous target (to
stay sticky: a partition moves only when balance needs it). Names are
Kafka's: ``group.consumer.assignors`` lists them (short names, or Kafka's
class names), the first is the default, and a member picks one with
``group.remote.assignor`` (the heartbeat's ServerAssignor).

Both are rack-aware where the members send racks and the partitions' replicas
are in racks (``consumer_group_racks``): a member is given partitions with a
replica in its rack first, as long as the balance (uniform) or the shares
(range) allow.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from coordinator.group.consumer_group import Assignment
from coordinator.group.consumer_group_racks import PartitionRacks, RackInfo

TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    #: Member id → the ids of the topics it subscribes to (that exist).
    subscriptions: Mapping[str, frozenset[uuid.UUID]]
    #: Topic id → partition count.
    topics: Mapping[uuid.UUID, int]
    #: Member id → its previous target.
    current: Mapping[str, Assignment]
    #: Member id → its rack (the heartbeat's RackId), if it sent one.
    member_racks: Mapping[str, str | None] = field(default_factory=dict)
    #: Topic id → the racks of each partition's replicas (none known: rack-unaware).
    partition_racks: PartitionRacks = field(default_factory=dict)

    def racks(self) -> RackInfo:
        return RackInfo.of(self.member_racks, self.partition_racks, self.topics)


Assignor = Callable[[AssignmentSpec], dict[str, Assignment]]


def _as_assignment(partitions: set[TopicPartition]) -> Assignment:
    result: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in partitions:
        result.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(p) for topic_id, p in result.items()}


def _subscribers(spec: AssignmentSpec) -> dict[uuid.UUID, list[str]]:
    return {topic_id: sorted(m for m, topics in spec.subscriptions.items() if topic_id in topics)
            for topic_id in spec.topics}


def _kept(spec: AssignmentSpec, racks: RackInfo) -> dict[str, set[TopicPartition]]:
    """Each member's previous partitions that it still subscribes to and that still exist (and,
    when racks are used, that no subscriber in the partition's racks should have instead)."""
    owned: dict[str, set[TopicPartition]] = {m: set() for m in spec.subscriptions}
    taken: set[TopicPartition] = set()
    subscribers = _subscribers(spec) if racks.used else {}
    for member_id in sorted(spec.subscriptions):
        for topic_id, partitions in spec.current.get(member_id, {}).items():
            if topic_id not in spec.subscriptions[member_id] or topic_id not in spec.topics:
                continue
            for partition in partitions:
                tp = (topic_id, partition)
                if partition < spec.topics[topic_id] and tp not in taken and (
                        not racks.used or racks.keeps(member_id, tp, subscribers[topic_id])):
                    owned[member_id].add(tp)
                    taken.add(tp)
    return owned


def uniform(spec: AssignmentSpec) -> dict[str, Assignment]:
    """Every member gets as many partitions as the others (within one, among the members that
    could take them), keeping the ones it had wherever balance allows."""
    racks = spec.racks()
    owned = _kept(spec, racks)
    taken = {tp for partitions in owned.values() for tp in partitions}
    members = sorted(owned)
    # A partition a member gave up for a closer one that had no room goes back to it on a tie.
    previous = {(t, p): m for m, assignment in spec.current.items() for t, ps in assignment.items()
                for p in ps} if racks.used else {}
    if racks.used:
        taken |= _assign_close(spec, racks, owned, taken)
    for topic_id in sorted(spec.topics):
        eligible = [m for m in members if topic_id in spec.subscriptions[m]]
        if not eligible:
            continue
        for partition in range(spec.topics[topic_id]):
            tp = (topic_id, partition)
            if tp not in taken:
                least = min(eligible, key=lambda m: (len(owned[m]), previous.get(tp) != m))
                owned[least].add(tp)
    _balance(spec, owned, racks)
    return {m: _as_assignment(owned[m]) for m in members}


def _assign_close(spec: AssignmentSpec, racks: RackInfo, owned: dict[str, set[TopicPartition]],
                  taken: set[TopicPartition]) -> set[TopicPartition]:
    """Free partitions to the least loaded subscriber in one of their racks while it is under its fair
    share (those with the fewest close subscribers first); the partitions given."""
    subscribers = _subscribers(spec)
    assigned_total = sum(count for topic_id, count in spec.topics.items() if subscribers[topic_id])
    cap = math.ceil(assigned_total / max(len(owned), 1))
    candidates = []
    for topic_id in sorted(spec.topics):
        for partition in range(spec.topics[topic_id]):
            tp = (topic_id, partition)
            close = racks.close_members(tp, subscribers[topic_id])
            if tp not in taken and close:
                candidates.append((len(close), tp, close))
    given: set[TopicPartition] = set()
    for _, tp, close in sorted(candidates):
        least = min(close, key=lambda m: (len(owned[m]), m))
        if len(owned[least]) < cap:
            owned[least].add(tp)
            given.add(tp)
    return given


def _balance(spec: AssignmentSpec, owned: dict[str, set[TopicPartition]], racks: RackInfo) -> None:
    """Move partitions, one at a time, from the most loaded member to a less loaded one that
    subscribes to their topic, while two members differ by more than one."""
    limit = sum(spec.topics.values()) + 1
    for _ in range(limit):
        if not _move_one(spec, owned, racks):
            return


def _move_one(spec: AssignmentSpec, owned: dict[str, set[TopicPartition]], racks: RackInfo) -> bool:
    ordered = sorted(owned, key=lambda m: (len(owned[m]), m))
    for heavy in reversed(ordered):
        for light in ordered:
            if len(owned[heavy]) - len(owned[light]) <= 1:
                break
            movable = [tp for tp in owned[heavy] if tp[0] in spec.subscriptions[light]]
            if movable:
                # Racks used: rather one that is close to the light member, then one far from the heavy one.
                tp = max(movable, key=lambda tp: (racks.matches(light, tp), not racks.matches(heavy, tp), tp))
                owned[heavy].discard(tp)
                owned[light].add(tp)
                return True
    return False


def range_(spec: AssignmentSpec) -> dict[str, Assignment]:
    """Per topic, its subscribers (by member id) get contiguous shares as equal as possible, the
    first ones one more; a member keeps the partitions of the topic it had, up to its share."""
    result: dict[str, set[TopicPartition]] = {m: set() for m in spec.subscriptions}
    racks = spec.racks()
    for topic_id in sorted(spec.topics):
        subscribers = sorted(m for m, topics in spec.subscriptions.items() if topic_id in topics)
        if subscribers:
            for member_id, partitions in _range_topic(spec, topic_id, subscribers, racks).items():
                result[member_id].update((topic_id, p) for p in partitions)
    return {m: _as_assignment(p) for m, p in result.items()}


def _range_topic(spec: AssignmentSpec, topic_id: uuid.UUID, subscribers: list[str],
                 racks: RackInfo) -> dict[str, set[int]]:
    count = spec.topics[topic_id]
    quota, extra = divmod(count, len(subscribers))
    previous = {m: {p for p in spec.current.get(m, {}).get(topic_id, frozenset())
                    if p < count and racks.keeps(m, (topic_id, p), subscribers)}
                for m in subscribers}
    assigned: dict[str, set[int]] = {}
    taken: set[int] = set()
    for member_id in subscribers:
        assigned[member_id] = set(sorted(previous[member_id] - taken)[:quota])
        taken.update(assigned[member_id])
    # The one-more shares go first to members that had more than their share (sticky), then in order.
    had_more = [m for m in subscribers if previous[m] - taken]
    extra_members = set((had_more + [m for m in subscribers if m not in had_more])[:extra])
    for member_id in had_more:
        if member_id in extra_members and previous[member_id] - taken:
            partition = min(previous[member_id] - taken)
            assigned[member_id].add(partition)
            taken.add(partition)
    shares = {m: quota + (1 if m in extra_members else 0) for m in subscribers}
    if racks.used:
        _range_close(topic_id, count, racks, shares, assigned, taken)
    free = [p for p in range(count) if p not in taken]
    for member_id in subscribers:
        while len(assigned[member_id]) < shares[member_id] and free:
            assigned[member_id].add(free.pop(0))
    return assigned


def _range_close(topic_id: uuid.UUID, count: int, racks: RackInfo, shares: Mapping[str, int],
                 assigned: dict[str, set[int]], taken: set[int]) -> None:
    """Before the shares are filled in order: each member's free partitions in its rack, up to its share."""
    for member_id, share in shares.items():
        for partition in range(count):
            if len(assigned[member_id]) >= share:
                break
            if partition not in taken and racks.matches(member_id, (topic_id, partition)):
                assigned[member_id].add(partition)
                taken.add(partition)


#: Kafka's class names, accepted in group.consumer.assignors as the short names are.
_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}

ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}


def assignor_names(configured: list[str]) -> list[str]:
    """The short names of ``group.consumer.assignors``; ValueError for one this broker lacks."""
    names = []
    for entry in configured:
        name = _CLASS_NAMES.get(entry.strip(), entry.strip())
        if name not in ASSIGNORS:
            raise ValueError(f"group.consumer.assignors: unknown assignor {entry!r}")
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError("group.consumer.assignors must name at least one assignor")
    return names
