"""The share groups' assignor (Kafka's SimpleAssignor): every assignable partition to some member.

The principles of Kafka's simple assignor, which are what a client can see:

- every assignable partition of the subscribed topics is assigned while there
  is a member subscribed to its topic;
- when there are more members than partitions, a partition goes to several
  members: each partition to about ``ceil(members / partitions)`` of them
  (Kafka's *desired sharing*), so every member gets at least one partition;
- balance first (the members' partition counts differ by one at most when they
  share a subscription), then stickiness: a member keeps what it had as far as
  balance allows.

A member subscribed to topics other members are not (a heterogeneous group) gets
the partitions of its own topics only, shared out among the members subscribed to
each topic the same way.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from coordinator.group.consumer_group import Assignment

SIMPLE_ASSIGNOR = "simple"

_Partition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class ShareAssignmentSpec:
    #: Member id → the topic ids it subscribes to.
    subscriptions: Mapping[str, frozenset[uuid.UUID]]
    #: Topic id → the partitions that may be assigned (those with initialized share state).
    assignable: Mapping[uuid.UUID, frozenset[int]]
    #: Member id → its current target (stickiness).
    current: Mapping[str, Assignment]


def assign(spec: ShareAssignmentSpec) -> dict[str, Assignment]:
    """Member id → its target assignment (every member of ``spec`` has one, maybe empty)."""
    groups: dict[frozenset[uuid.UUID], list[str]] = {}
    for member_id in sorted(spec.subscriptions):
        groups.setdefault(spec.subscriptions[member_id], []).append(member_id)
    # Members sharing a subscription split its partitions; a partition of a topic several subscriptions
    # hold is shared between them.
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in spec.subscriptions}
    for topics, members in groups.items():
        partitions = sorted((t, p) for t in topics for p in spec.assignable.get(t, ()))
        for member_id, owned in _assign_homogeneous(members, partitions, spec.current).items():
            for topic_id, partition in owned:
                result[member_id].setdefault(topic_id, set()).add(partition)
    return {m: {t: frozenset(p) for t, p in a.items()} for m, a in result.items()}


def _assign_homogeneous(members: list[str], partitions: list[_Partition],
                        current: Mapping[str, Assignment]) -> dict[str, set[_Partition]]:
    """Kafka's homogeneous simple assignment for members with one subscription."""
    out: dict[str, set[_Partition]] = {m: set() for m in members}
    if not partitions or not members:
        return out
    sharing = -(-len(members) // len(partitions))  # ceil(members / partitions)
    quota = _quotas(len(members), len(partitions) * sharing)
    holders: dict[_Partition, list[str]] = {p: [] for p in partitions}
    # Stickiness: keep what each member had, within its quota and the partition's sharing.
    for member_id, limit in zip(members, quota, strict=True):
        for tp in sorted(_pairs(current.get(member_id, {}))):
            if tp in holders and len(out[member_id]) < limit and len(holders[tp]) < sharing:
                out[member_id].add(tp)
                holders[tp].append(member_id)
    # Then every partition short of its sharing goes to the members short of their quota, least loaded first.
    for tp in partitions:
        while len(holders[tp]) < sharing:
            candidates = [m for m, limit in zip(members, quota, strict=True)
                          if len(out[m]) < limit and tp not in out[m]]
            if not candidates:
                break
            chosen = min(candidates, key=lambda m: len(out[m]))
            out[chosen].add(tp)
            holders[tp].append(chosen)
    return out


def _quotas(members: int, slots: int) -> list[int]:
    """How many partitions each member takes: ``slots`` spread so that no two differ by more than one."""
    base, extra = divmod(slots, members)
    return [base + (1 if i < extra else 0) for i in range(members)]


def _pairs(assignment: Assignment) -> set[_Partition]:
    return {(t, p) for t, parts in assignment.items() for p in parts}
