"""A share group (KIP-932): its members, epochs, target assignment and initialized share partitions.

Kafka's ``ShareGroup`` and ``ShareGroupMember``, as plain data the
:class:`~coordinator.group.share_group_heartbeat.ShareGroupHeartbeat` component
changes. Unlike a consumer group, a partition may be assigned to several
members at once (each record is acquired by one consumer at a time on the
partition's leader), so a member takes its target assignment in one step:
there is nothing to revoke first.

The coordinator also remembers which share partitions have their state
initialized with the share coordinator (Kafka's ShareGroupStatePartitionMetadata):
only those are assigned, as Kafka's assignor is given only initialized
partitions; the others are initialized when the group first subscribes to them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum

from coordinator.group.consumer_group import Assignment, TopicInfo

#: The member epoch of a member leaving the group.
LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroupState(StrEnum):
    """As ListGroups and ShareGroupDescribe spell it."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Assignment = field(default_factory=dict)


#: Topic id → (topic name, partitions), as ShareGroupStatePartitionMetadata keeps them.
TopicPartitionsInfo = dict[uuid.UUID, tuple[str, frozenset[int]]]


class ShareGroup:
    """One share group: members, group epoch, target assignment and its share partitions' state."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        #: Bumped whenever the members or their subscriptions (or the subscribed topics) change.
        self.group_epoch = 0
        #: The group epoch the target assignment was computed for.
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        #: Member id → its target assignment at ``assignment_epoch``.
        self.target: dict[str, Assignment] = {}
        #: Topic name → its id and partition count, for every topic some member subscribes to.
        self.subscription_metadata: dict[str, TopicInfo] = {}
        #: The share partitions whose state the share coordinator has (assignable).
        self.initialized: TopicPartitionsInfo = {}
        #: The share partitions whose state is being initialized.
        self.initializing: TopicPartitionsInfo = {}
        #: Topics whose share state is being deleted (their id → name).
        self.deleting: dict[uuid.UUID, str] = {}

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> set[str]:
        return {name for member in self.members.values() for name in member.subscribed_topic_names}

    def is_initialized(self, topic_id: uuid.UUID, partition: int) -> bool:
        entry = self.initialized.get(topic_id)
        return entry is not None and partition in entry[1]

    def is_initializing(self, topic_id: uuid.UUID, partition: int) -> bool:
        entry = self.initializing.get(topic_id)
        return entry is not None and partition in entry[1]


def add_partitions(info: TopicPartitionsInfo, topic_id: uuid.UUID, name: str, partitions: frozenset[int]) -> None:
    _, present = info.get(topic_id, (name, frozenset()))
    info[topic_id] = (name, present | partitions)


def remove_partitions(info: TopicPartitionsInfo, topic_id: uuid.UUID, partitions: frozenset[int]) -> None:
    entry = info.get(topic_id)
    if entry is None:
        return
    left = entry[1] - partitions
    if left:
        info[topic_id] = (entry[0], left)
    else:
        del info[topic_id]
