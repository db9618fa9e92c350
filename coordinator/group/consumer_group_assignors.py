"""The server-side assignors of the consumer protocol: ``uniform`` and ``range`` (KIP-848).

An assignor maps every member to its target partitions, given each member's
subscribed topics, the topics' partition counts and the previous target (to
stay sticky: a partition moves only when balance needs it). Names are
Kafka's: ``group.consumer.assignors`` lists them (short names, or Kafka's
class names), the first is the default, and a member picks one with
``group.remote.assignor`` (the heartbeat's ServerAssignor).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coordinator.group.consumer_group import Assignment

TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    #: Member id → the ids of the topics it subscribes to (that exist).
    subscriptions: Mapping[str, frozenset[uuid.UUID]]
    #: Topic id → partition count.
    topics: Mapping[uuid.UUID, int]
    #: Member id → its previous target.
    current: Mapping[str, Assignment]


Assignor = Callable[[AssignmentSpec], dict[str, Assignment]]


def _as_assignment(partitions: set[TopicPartition]) -> Assignment:
    result: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in partitions:
        result.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(p) for topic_id, p in result.items()}


def _kept(spec: AssignmentSpec) -> dict[str, set[TopicPartition]]:
    """Each member's previous partitions that it still subscribes to and that still exist."""
    owned: dict[str, set[TopicPartition]] = {m: set() for m in spec.subscriptions}
    taken: set[TopicPartition] = set()
    for member_id in sorted(spec.subscriptions):
        for topic_id, partitions in spec.current.get(member_id, {}).items():
            if topic_id not in spec.subscriptions[member_id] or topic_id not in spec.topics:
                continue
            for partition in partitions:
                tp = (topic_id, partition)
                if partition < spec.topics[topic_id] and tp not in taken:
                    owned[member_id].add(tp)
                    taken.add(tp)
    return owned


def uniform(spec: AssignmentSpec) -> dict[str, Assignment]:
    """Every member gets as many partitions as the others (within one, among the members that
    could take them), keeping the ones it had wherever balance allows."""
    owned = _kept(spec)
    taken = {tp for partitions in owned.values() for tp in partitions}
    members = sorted(owned)
    for topic_id in sorted(spec.topics):
        eligible = [m for m in members if topic_id in spec.subscriptions[m]]
        if not eligible:
            continue
        for partition in range(spec.topics[topic_id]):
            if (topic_id, partition) not in taken:
                least = min(eligible, key=lambda m: len(owned[m]))
                owned[least].add((topic_id, partition))
    _balance(spec, owned)
    return {m: _as_assignment(owned[m]) for m in members}


def _balance(spec: AssignmentSpec, owned: dict[str, set[TopicPartition]]) -> None:
    """Move partitions, one at a time, from the most loaded member to a less loaded one that
    subscribes to their topic, while two members differ by more than one."""
    limit = sum(spec.topics.values()) + 1
    for _ in range(limit):
        if not _move_one(spec, owned):
            return


def _move_one(spec: AssignmentSpec, owned: dict[str, set[TopicPartition]]) -> bool:
    ordered = sorted(owned, key=lambda m: (len(owned[m]), m))
    for heavy in reversed(ordered):
        for light in ordered:
            if len(owned[heavy]) - len(owned[light]) <= 1:
                break
            movable = [tp for tp in owned[heavy] if tp[0] in spec.subscriptions[light]]
            if movable:
                tp = max(movable)
                owned[heavy].discard(tp)
                owned[light].add(tp)
                return True
    return False


def range_(spec: AssignmentSpec) -> dict[str, Assignment]:
    """Per topic, its subscribers (by member id) get contiguous shares as equal as possible, the
    first ones one more; a member keeps the partitions of the topic it had, up to its share."""
    result: dict[str, set[TopicPartition]] = {m: set() for m in spec.subscriptions}
    for topic_id in sorted(spec.topics):
        subscribers = sorted(m for m, topics in spec.subscriptions.items() if topic_id in topics)
        if subscribers:
            for member_id, partitions in _range_topic(spec, topic_id, subscribers).items():
                result[member_id].update((topic_id, p) for p in partitions)
    return {m: _as_assignment(p) for m, p in result.items()}


def _range_topic(spec: AssignmentSpec, topic_id: uuid.UUID, subscribers: list[str]) -> dict[str, set[int]]:
    count = spec.topics[topic_id]
    quota, extra = divmod(count, len(subscribers))
    previous = {m: {p for p in spec.current.get(m, {}).get(topic_id, frozenset()) if p < count}
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
    free = [p for p in range(count) if p not in taken]
    for member_id in subscribers:
        share = quota + (1 if member_id in extra_members else 0)
        while len(assigned[member_id]) < share and free:
            assigned[member_id].add(free.pop(0))
    return assigned


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
