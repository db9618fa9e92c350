"""Online migration between the classic and the consumer protocol (Kafka's convertToConsumerGroup and
convertToClassicGroup, ``group.consumer.migration.policy``).

- **Upgrade**: a consumer-protocol member joins (ConsumerGroupHeartbeat, epoch 0) a classic group with
  members that all use the ``consumer`` embedded protocol: the group becomes a consumer group at the
  classic generation; each classic member keeps its assignment and subscription, at that generation as its
  member epoch, and stays a classic member (``ConsumerGroupMember.classic``, served by
  ``consumer_group_classic_members``). The joining member bumps the group epoch, so the classic members
  are told to rejoin (REBALANCE_IN_PROGRESS) and reconcile towards the new target assignment. Parked
  JoinGroup and SyncGroup requests are answered REBALANCE_IN_PROGRESS.
- **Downgrade**: the last consumer-protocol member leaves (or is fenced) a group whose other members all
  speak the classic protocol: the group becomes a classic group at the group epoch, its members with their
  current assignments, and a rebalance starts so they rejoin through the classic path.

An empty group converts either way whatever the policy (the heartbeat path and JoinGroup drop the empty
group of the other protocol). The committed offsets stay in the classic ``GroupMetadata`` of the same id,
which both protocols share.

Each conversion writes what Kafka writes, in one append with the request's own records, so a coordinator
loading the partition afterwards finds the group as it was converted: an upgrade writes the classic
group's ``GroupMetadata`` tombstone then the whole consumer group (each member's metadata, with its
classic protocols and session timeout, the group epoch, the targets, the assignment epoch, each member's
current assignment); a downgrade writes the consumer group's tombstones then the classic group's
``GroupMetadata`` record, each member with its target assignment.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from coordinator.common.coordinator_log import KeyValues
from coordinator.common.scheduler import Scheduler
from coordinator.group.consumer_group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from coordinator.group.consumer_group_heartbeat import ConsumerGroupHeartbeat
from coordinator.group.consumer_group_records import classic_group_tombstone, group_records, group_tombstones
from coordinator.group.group_metadata import (
    GroupMetadata,
    GroupState,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_rebalance import GroupRebalance
from coordinator.group.record_formats import GroupMetadataKey, encode_group_metadata_key, encode_group_metadata_value
from protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    assigned_partitions,
    encode_assignment,
)
from protocol.errors import ErrorCode
from protocol.readable import Readable

log = logging.getLogger(__name__)


class MigrationPolicy(StrEnum):
    """``group.consumer.migration.policy``: which non-empty conversions are allowed."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    """A ConsumerProtocolSubscription (v0-v3) as the coordinator reads it."""

    version: int
    topics: tuple[str, ...]
    #: v1+: the partitions the member owns (a cooperative member sends them when it rejoins).
    owned: tuple[tuple[str, int], ...] = ()
    #: v3+.
    rack_id: str | None = None


def decode_subscription(data: bytes) -> ConsumerSubscription:
    """ConsumerProtocolError for malformed data."""
    r = Readable(data, ConsumerProtocolError, "consumer protocol subscription")
    version = r.int16()
    topics = tuple(r.string() for _ in range(r.array_length()))
    r.take(max(r.int32(), 0))  # user data (nullable)
    owned: list[tuple[str, int]] = []
    rack_id = None
    if version >= 1:
        for _ in range(max(r.array_length(), 0)):
            topic = r.string()
            owned.extend((topic, r.int32()) for _ in range(max(r.array_length(), 0)))
    if version >= 2:
        r.int32()  # generation id
    if version >= 3:
        rack_id = r.nullable_string()
    return ConsumerSubscription(version, topics, tuple(owned), rack_id)


def to_topic_ids(partitions: Iterable[tuple[str, int]], topic_id_of: dict[str, uuid.UUID]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for topic, partition in partitions:
        topic_id = topic_id_of.get(topic)
        if topic_id is not None:
            out.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(parts) for topic_id, parts in out.items()}


class ConsumerGroupMigration:
    """Converts groups between the protocols; owned by the coordinator, installed in its heartbeat path."""

    def __init__(self, policy: str, heartbeats: ConsumerGroupHeartbeat, manager: GroupMetadataManager,
                 rebalance: GroupRebalance, scheduler: Scheduler, classic_max_size: int) -> None:
        self.policy = MigrationPolicy(policy)
        self.heartbeats = heartbeats
        self.manager = manager
        self.rebalance = rebalance
        self.scheduler = scheduler
        self.classic_max_size = classic_max_size

    # -- the topics, by name and id ------------------------------------------------------------
    def topic_ids(self, names: Iterable[str]) -> dict[str, uuid.UUID]:
        ids = {}
        for name in names:
            info = self.heartbeats.topics.describe_topic(name)
            if info is not None:
                ids[name] = info.topic_id
        return ids

    def encode_assignment(self, assignment: Assignment, version: int) -> bytes:
        partitions: dict[str, list[int]] = {}
        for topic_id, parts in assignment.items():
            name = self.heartbeats.topics.topic_name(topic_id)
            if name is not None and parts:
                partitions[name] = sorted(parts)
        return encode_assignment(dict(sorted(partitions.items())), max(version, 0))

    # -- upgrade -------------------------------------------------------------------------
    def upgrade(self, classic: GroupMetadata, records: KeyValues) -> ConsumerGroup | None:
        if not self.policy.upgrade_enabled:
            log.info("Cannot upgrade classic group %s to consumer group because the online upgrade is disabled.",
                     classic.group_id)
            return None
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            log.info("Cannot upgrade classic group %s to consumer group because the group does not use the "
                     "consumer embedded protocol.", classic.group_id)
            return None
        if len(classic.members) > self.heartbeats.config.max_size:
            log.info("Cannot upgrade classic group %s to consumer group because the group size exceeds the "
                     "consumer group maximum size.", classic.group_id)
            return None
        try:
            members = [self._from_classic_member(classic, m) for m in classic.members.values()]
        except ConsumerProtocolError as e:
            log.warning("Cannot upgrade the classic group %s to consumer group because the embedded consumer "
                        "protocol is malformed: %s.", classic.group_id, e)
            return None
        group = ConsumerGroup(classic.group_id)
        group.group_epoch = group.assignment_epoch = classic.generation_id
        for member in members:
            group.target[member.member_id] = member.assigned
            group.update_member(member)
        self._empty_classic_group(classic)
        self.heartbeats.groups[group.group_id] = group
        records.append(classic_group_tombstone(group.group_id))
        records += group_records(group)
        for member in members:
            self.schedule_classic_session(group, member)
        log.info("[GroupId %s] Converted the classic group to a consumer group at epoch %d.", group.group_id,
                 group.group_epoch)
        return group

    def _from_classic_member(self, classic: GroupMetadata, member: MemberMetadata) -> ConsumerGroupMember:
        protocol = classic.protocol_name or member.supported_protocols[0][0]
        subscription = decode_subscription(member.metadata(protocol))
        owned = assigned_partitions(member.assignment)
        generation = classic.generation_id
        return ConsumerGroupMember(
            member.member_id, instance_id=member.group_instance_id, rack_id=subscription.rack_id,
            member_epoch=generation, previous_member_epoch=generation, state=MemberState.STABLE,
            rebalance_timeout_ms=member.rebalance_timeout_ms, client_id=member.client_id,
            client_host=member.client_host, subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            assigned=to_topic_ids(owned, self.topic_ids({t for t, _ in owned})),
            classic=ClassicMemberMetadata(member.session_timeout_ms, tuple(member.supported_protocols)))

    def _empty_classic_group(self, classic: GroupMetadata) -> None:
        """Answer its parked requests (the members rejoin the consumer group), stop its timers and leave it
        as the Empty holder of the group's offsets."""
        for member in list(classic.members.values()):
            classic.maybe_complete_join(member, JoinGroupResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            classic.maybe_complete_sync(member, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self.rebalance.cancel_group_timers(classic)
        for member_id in list(classic.members):
            classic.remove(member_id)
        classic.pending_members.clear()
        classic.pending_sync_members.clear()
        classic.protocol_name = None
        classic.leader_id = None
        classic.state = GroupState.EMPTY
        classic.current_state_timestamp = self.scheduler.now_ms()

    def schedule_classic_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A classic member's session is its own JoinGroup's session timeout."""
        assert member.classic is not None
        group_id, member_id = group.group_id, member.member_id
        self.heartbeats.timeouts.schedule_session(group_id, member_id, member.classic.session_timeout_ms,
                                                  lambda: self._session_expired(group_id, member_id))

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.heartbeats.groups.get(group_id)
        if group is not None and member_id in group.members:
            log.info("[GroupId %s] Member %s fenced from the group because its session expired.", group_id, member_id)
            self.heartbeats.fence_member(group, member_id)

    # -- downgrade -----------------------------------------------------------------------
    def downgrade(self, group: ConsumerGroup, leaving_member_id: str, records: KeyValues) -> bool:
        leaving = group.members.get(leaving_member_id)
        others = [m for m in group.members.values() if m.member_id != leaving_member_id]
        if leaving is None or leaving.classic is not None or not others or any(m.classic is None for m in others):
            return False
        if not self.policy.downgrade_enabled:
            log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is disabled.",
                     group.group_id)
            return False
        if len(others) > self.classic_max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group size is greater than "
                     "classic group max size.", group.group_id)
            return False
        self.heartbeats.timeouts.cancel_group(group.group_id)
        del self.heartbeats.groups[group.group_id]
        # The consumer group's tombstones (the leaving member's too), then the classic group that replaces it.
        records += group_tombstones(group)
        classic = self._classic_group(group, others)
        records.append(self._classic_group_record(classic))
        for member in classic.members.values():
            self.rebalance.schedule_heartbeat(classic, member.member_id, member.session_timeout_ms)
        log.info("[GroupId %s] Converted the consumer group to a classic group at generation %d.", group.group_id,
                 classic.generation_id)
        self.rebalance.prepare_rebalance(classic, f"Downgrade group {group.group_id} from consumer to classic.")
        return True

    def _classic_group(self, group: ConsumerGroup, members: list[ConsumerGroupMember]) -> GroupMetadata:
        """The classic group (the holder of its offsets) as Kafka's ClassicGroup.fromConsumerGroup builds it:
        Stable at the group epoch, each member with its current assignment."""
        classic = self.manager.get_group(group.group_id)
        if classic is None or classic.is_(GroupState.DEAD):
            classic = self.manager.add_group(GroupMetadata(group.group_id, GroupState.EMPTY, self.scheduler.now_ms()))
        for member in members:
            assert member.classic is not None
            metadata = MemberMetadata(member.member_id, member.instance_id, member.client_id, member.client_host,
                                      member.rebalance_timeout_ms, member.classic.session_timeout_ms,
                                      CONSUMER_PROTOCOL_TYPE, list(member.classic.protocols))
            # Its target assignment, as Kafka's ClassicGroup.fromConsumerGroup.
            metadata.assignment = self.encode_assignment(group.target.get(member.member_id, {}),
                                                         _version(member.classic))
            classic.add(metadata, None)
        classic.protocol_type = CONSUMER_PROTOCOL_TYPE
        classic.generation_id = group.group_epoch
        classic.protocol_name = classic.select_protocol()
        classic.state = GroupState.STABLE
        classic.current_state_timestamp = self.scheduler.now_ms()
        return classic

    def _classic_group_record(self, classic: GroupMetadata) -> tuple[bytes, bytes | None]:
        """The classic group's GroupMetadata record, with its members' assignments."""
        assignments = {member_id: m.assignment for member_id, m in classic.members.items()}
        return (encode_group_metadata_key(GroupMetadataKey(classic.group_id)),
                encode_group_metadata_value(self.manager.group_metadata_value(classic, assignments)))


def _version(classic: ClassicMemberMetadata) -> int:
    """The embedded protocol's version the member speaks (that of its subscription)."""
    metadata = classic.protocols[0][1]
    return int.from_bytes(metadata[:2], "big", signed=True) if len(metadata) >= 2 else 0


def subscription_version(classic: ClassicMemberMetadata) -> int:
    return _version(classic)
