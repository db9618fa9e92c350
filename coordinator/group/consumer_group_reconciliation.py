"""One member's step towards its target assignment (Kafka's CurrentAssignmentBuilder).

Revoke before assign: a member whose target drops partitions it owns is first
told to give them up (``UNREVOKED_PARTITIONS``, its epoch unchanged); only
once its heartbeat no longer lists them does it move to the target's epoch
and get new partitions, and only those nobody else owns any more. A
partition still owned by another member stays out of its assignment
(``UNRELEASED_PARTITIONS``) until that member's heartbeat releases it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace

from coordinator.group.consumer_group import Assignment, ConsumerGroupMember, MemberState

#: (topic id, partition) → the member owning it now, or None.
OwnerOf = Callable[[uuid.UUID, int], str | None]
#: What the member says it owns (topic id → partitions), or None when its heartbeat did not say.
OwnedPartitions = Mapping[uuid.UUID, frozenset[int]] | None


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              owned: OwnedPartitions, owner_of: OwnerOf) -> ConsumerGroupMember:
    """The member after this heartbeat: unchanged, still revoking, or one step closer to ``target``."""
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _owns_any(owned, member.revoking):
            return member  # it has not given them up yet
        return _next(replace(member, revoking={}), target_epoch, target, owner_of)
    if member.state == MemberState.UNRELEASED_PARTITIONS or member.member_epoch != target_epoch:
        return _next(member, target_epoch, target, owner_of)
    return member


def _owns_any(owned: Mapping[uuid.UUID, frozenset[int]], partitions: Assignment) -> bool:
    return any(owned.get(topic_id, frozenset()) & parts for topic_id, parts in partitions.items())


def _next(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
          owner_of: OwnerOf) -> ConsumerGroupMember:
    kept: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    assignable: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        if current & wanted:
            kept[topic_id] = current & wanted
        if current - wanted:
            revoking[topic_id] = current - wanted
        new = wanted - current
        free = frozenset(p for p in new if owner_of(topic_id, p) in (None, member.member_id))
        unreleased = unreleased or len(free) < len(new)
        if free:
            assignable[topic_id] = free
    if revoking:
        return replace(member, state=MemberState.UNREVOKED_PARTITIONS, assigned=kept, revoking=revoking)
    assigned = {t: kept.get(t, frozenset()) | assignable.get(t, frozenset()) for t in set(kept) | set(assignable)}
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    previous = member.member_epoch if member.member_epoch != target_epoch else member.previous_member_epoch
    return replace(member, state=state, member_epoch=target_epoch, previous_member_epoch=previous,
                   assigned=assigned, revoking={})
