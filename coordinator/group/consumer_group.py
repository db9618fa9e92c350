"""A group of the consumer rebalance protocol (KIP-848): its members, epochs and assignments.

Kafka's ``ConsumerGroup`` and ``ConsumerGroupMember``, as plain data the
:class:`~coordinator.group.consumer_group_heartbeat.ConsumerGroupHeartbeat`
component changes. The coordinator computes every member's *target*
assignment (``target``, at ``assignment_epoch``); each member then moves
towards it one heartbeat at a time (``current_assignment``), revoking before
it is given anything, so a partition is never owned by two members at once.
Which member owns a partition right now (assigned, or still being revoked) is
``partition_owners``: a partition is given to a member only while nobody else
owns it.

The committed offsets of such a group stay in the classic
``GroupMetadata`` of the same id (an Empty group without members, as for a
consumer that only commits): ``GroupOffsets`` and the ``__consumer_offsets``
records of offsets are shared by both protocols.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from coordinator.group.consumer_group_regex import ResolvedRegularExpression

#: A member's partitions: topic id → partition indexes.
Assignment = Mapping[uuid.UUID, frozenset[int]]

#: The member epoch of a member leaving the group for good.
LEAVE_GROUP_MEMBER_EPOCH = -1
#: The member epoch of a static member leaving for a while: it keeps its place and partitions
#: until its session times out or a new instance with its instance id replaces it.
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(StrEnum):
    """Where a member is on its way to its target assignment (Kafka's MemberState)."""

    STABLE = "stable"
    #: It must first give up partitions (``revoking``) that its target no longer holds.
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    #: Part of its target is still owned by other members that have not revoked it yet.
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(StrEnum):
    """As ListGroups and ConsumerGroupDescribe spell it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A subscribed topic as the assignment sees it."""

    topic_id: uuid.UUID
    num_partitions: int
    #: The racks of each partition's replicas, by partition index (empty: no broker has a rack).
    partition_racks: tuple[frozenset[str], ...] = ()


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) in a consumer group
    joined with (Kafka's ClassicMemberMetadata): its session timeout and its protocols (name, metadata)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol its JoinGroup and SyncGroup answers name: its first (the most preferred)."""
        return self.protocols[0][0]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    #: A regular expression subscribed to besides the names (RE2 syntax, resolved by the coordinator).
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    #: What the member owns (as the coordinator told it).
    assigned: Assignment = field(default_factory=dict)
    #: What it still owns but must give up before it gets anything new.
    revoking: Assignment = field(default_factory=dict)
    #: Set for a member of the classic protocol (a consumer group converted from a classic one, or joined
    #: through JoinGroup while the group had consumer-protocol members); None for a consumer-protocol member.
    classic: ClassicMemberMetadata | None = None

    def owned_partitions(self) -> Iterable[tuple[uuid.UUID, int]]:
        for assignment in (self.assigned, self.revoking):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    yield topic_id, partition


def assignment_size(assignment: Assignment) -> int:
    return sum(len(p) for p in assignment.values())


class ConsumerGroup:
    """One consumer-protocol group: members, group epoch, target assignment and who owns what."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        #: Bumped whenever the members or their subscriptions (or the subscribed topics) change.
        self.group_epoch = 0
        #: The group epoch the target assignment was computed for.
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        #: Instance id → member id, for the static members.
        self.static_members: dict[str, str] = {}
        #: Member id → its target assignment at ``assignment_epoch``.
        self.target: dict[str, Assignment] = {}
        #: (topic id, partition) → the member owning it now.
        self.partition_owners: dict[tuple[uuid.UUID, int], str] = {}
        #: Topic name → its id and partition count, for every topic some member subscribes to.
        self.subscription_metadata: dict[str, TopicInfo] = {}
        #: The topic image's version ``subscription_metadata`` was computed at, while the members'
        #: subscriptions stay as they are (None: unknown, compute it again).
        self.subscription_metadata_version: int | None = None
        #: Topic name → how many members subscribe to it (kept as members change: a heartbeat reads it).
        self._subscribers: dict[str, int] = {}
        #: Regular expression → how many members subscribe with it.
        self._regex_subscribers: dict[str, int] = {}
        #: Regular expression → the topics it matched when the group last refreshed it (what the
        #: target assignment reads); an expression still being resolved has none yet.
        self.resolved_regexes: dict[str, ResolvedRegularExpression] = {}

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.state != MemberState.STABLE or m.member_epoch != self.assignment_epoch
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def keep_member(self, member_id: str) -> None:
        """A heartbeat that left its member as it was: the member moves last, as storing it again does (the
        members' order is the order of the group's tombstones and of ConsumerGroupDescribe)."""
        self.members[member_id] = self.members.pop(member_id)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.partition_owners.get((topic_id, partition))

    def update_member(self, member: ConsumerGroupMember, replaces: str | None = None) -> None:
        """Store ``member`` (replacing the member of id ``replaces`` too, for a static member's new
        instance) and move the partitions it owns to it."""
        for old_id in {member.member_id, replaces} - {None}:
            old = self.members.pop(old_id, None)  # type: ignore[arg-type]
            if old is not None:
                self._release(old)
            if old is None or not _same_subscription(old, member):
                self.subscription_metadata_version = None
        if replaces is not None and replaces in self.target:
            self.target[member.member_id] = self.target.pop(replaces)
        self.members[member.member_id] = member
        self._count(member, 1)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for tp in member.owned_partitions():
            self.partition_owners[tp] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        self.subscription_metadata_version = None
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    def _release(self, member: ConsumerGroupMember) -> None:
        self._count(member, -1)
        for tp in member.owned_partitions():
            if self.partition_owners.get(tp) == member.member_id:
                del self.partition_owners[tp]

    def subscribed_topic_names(self, extra: ConsumerGroupMember | None = None) -> set[str]:
        """Every topic some member subscribes to, with ``extra`` in place of the member of its id."""
        counts = dict(self._subscribers)
        if extra is not None:
            previous = self.members.get(extra.member_id)
            for name in () if previous is None else previous.subscribed_topic_names:
                counts[name] -= 1
            for name in extra.subscribed_topic_names:
                counts[name] = counts.get(name, 0) + 1
        return {name for name, count in counts.items() if count > 0}

    def subscribed_regexes(self, extra: ConsumerGroupMember | None = None) -> set[str]:
        """Every regular expression some member subscribes with, with ``extra`` in place of the member of its id."""
        counts = dict(self._regex_subscribers)
        if extra is not None:
            previous = self.members.get(extra.member_id)
            if previous is not None and previous.subscribed_topic_regex is not None:
                counts[previous.subscribed_topic_regex] -= 1
            if extra.subscribed_topic_regex is not None:
                counts[extra.subscribed_topic_regex] = counts.get(extra.subscribed_topic_regex, 0) + 1
        return {regex for regex, count in counts.items() if count > 0}

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Some member subscribes to ``topic`` by name or through what its expression resolved to."""
        return topic in self._subscribers or any(topic in resolved.topics for resolved in self.resolved_regexes.values())

    def member_topic_names(self, member: ConsumerGroupMember) -> Iterable[str]:
        """The member's subscription: its names and what its regular expression resolved to."""
        yield from member.subscribed_topic_names
        if member.subscribed_topic_regex is not None:
            resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                yield from resolved.topics

    def _count(self, member: ConsumerGroupMember, delta: int) -> None:
        _add(self._subscribers, member.subscribed_topic_names, delta)
        if member.subscribed_topic_regex is not None:
            _add(self._regex_subscribers, (member.subscribed_topic_regex,), delta)


def _same_subscription(a: ConsumerGroupMember, b: ConsumerGroupMember) -> bool:
    return a.subscribed_topic_names == b.subscribed_topic_names and a.subscribed_topic_regex == b.subscribed_topic_regex


def _add(counts: dict[str, int], keys: Iterable[str], delta: int) -> None:
    for key in keys:
        count = counts.get(key, 0) + delta
        if count > 0:
            counts[key] = count
        else:
            counts.pop(key, None)
