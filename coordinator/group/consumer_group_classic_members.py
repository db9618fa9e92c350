"""Classic-protocol members of a consumer group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup answered
from the consumer group (Kafka's classicGroupJoinToConsumerGroup and its siblings).

A member that speaks only the classic protocol (a group converted by an online upgrade, or a classic
consumer joining a group that has consumer-protocol members) takes part in the consumer group's
server-side assignment:

- JoinGroup updates its subscription (from its ``consumer`` embedded protocol's subscription) and moves
  it one reconciliation step, its owned partitions being those its subscription lists; the answer has
  its member epoch as the generation, no leader and no members (it assigns nothing);
- SyncGroup answers its current assignment, encoded with the consumer protocol;
- Heartbeat answers REBALANCE_IN_PROGRESS whenever it must rejoin to move on: the group epoch passed its
  member epoch, it must revoke partitions, or partitions it waits for have been released; a member that
  does not rejoin within its rebalance timeout is fenced;
- LeaveGroup removes it.

Its session is its JoinGroup's session timeout. The classic members of an empty consumer group never
reach this: JoinGroup drops the empty consumer group and the classic group forms as usual.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace

from coordinator.common.coordinator_log import KeyValues
from coordinator.group.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from coordinator.group.consumer_group_heartbeat import ConsumerGroupError, ConsumerGroupHeartbeat
from coordinator.group.consumer_group_migration import (
    ConsumerGroupMigration,
    decode_subscription,
    subscription_version,
    to_topic_ids,
)
from coordinator.group.consumer_group_records import GroupChange
from coordinator.group.group_metadata import JoinFuture, JoinGroupResult, SyncGroupResult
from coordinator.group.group_requests import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveGroupResult,
    LeavingMember,
    SyncGroupRequest,
)
from protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, ConsumerProtocolError
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class ClassicMembers:
    """The classic protocol's requests to consumer groups; owned by the coordinator."""

    def __init__(self, heartbeats: ConsumerGroupHeartbeat, migration: ConsumerGroupMigration) -> None:
        self.heartbeats = heartbeats
        self.migration = migration

    def group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group with members of that id, whose classic requests this answers."""
        group = self.heartbeats.groups.get(group_id)
        return group if group is not None and group.members else None

    # -- JoinGroup -----------------------------------------------------------------------
    def join(self, group: ConsumerGroup, request: JoinGroupRequest) -> JoinFuture:
        """Answered once the records of what it changed are appended; then the member's session and its
        sync timeout start (it must send SyncGroup within its rebalance timeout or be fenced)."""
        future: JoinFuture = self.heartbeats.scheduler.create_future()
        member_id = request.member_id or f"{request.client_id}-{uuid.uuid4()}"
        try:
            result, records = self._join(group, request, member_id)
        except ConsumerGroupError as e:
            future.set_result(JoinGroupResult(e.error, request.member_id))
            return future
        group_id = group.group_id

        def appended(error: ErrorCode) -> None:
            if future.done():
                return
            if error != ErrorCode.NO_ERROR:
                future.set_result(JoinGroupResult(error, request.member_id))
                return
            if result.error == ErrorCode.NO_ERROR:
                self._joined(group_id, result.member_id, request)
            future.set_result(result)

        self.heartbeats.records.write(group_id, records, appended)
        return future

    def _joined(self, group_id: str, member_id: str, request: JoinGroupRequest) -> None:
        self.heartbeats.timeouts.cancel_rebalance(group_id, member_id)
        group = self.heartbeats.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return  # fenced meanwhile
        self.migration.schedule_classic_session(group, member)
        self.heartbeats.timeouts.schedule_sync(group_id, member_id, request.rebalance_timeout_ms, self._fencing(
            group_id, member_id, "the member failed to sync within timeout"))

    def _join(self, group: ConsumerGroup, request: JoinGroupRequest,
              member_id: str) -> tuple[JoinGroupResult, KeyValues]:
        """The answer and the records to write first."""
        if member_id not in group.members and len(group.members) >= self.heartbeats.config.max_size:
            raise ConsumerGroupError(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not _supports_protocols(group, request):
            raise ConsumerGroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if request.is_unknown_member and request.require_known_member_id:
            log.info("[GroupId %s] Dynamic member with unknown member id joins the consumer group. Created a new "
                     "member id %s and requesting the member to rejoin with this id.", group.group_id, member_id)
            return JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id), []
        member, replaces = self._member(group, request, member_id)
        change = GroupChange(group, (replaces, member_id))
        try:
            subscription = decode_subscription(request.protocols[0][1])
        except ConsumerProtocolError as e:
            raise ConsumerGroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL) from e
        classic = ClassicMemberMetadata(request.session_timeout_ms, tuple(request.protocols))
        updated = replace(
            member, instance_id=request.group_instance_id or member.instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=None, subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            client_id=request.client_id, client_host=request.client_host, classic=classic)
        owned = to_topic_ids(subscription.owned, self.migration.topic_ids({t for t, _ in subscription.owned}))
        reconciled = self.heartbeats.update_member(group, member, updated, replaces, owned)
        return JoinGroupResult(ErrorCode.NO_ERROR, reconciled.member_id, reconciled.member_epoch,
                               CONSUMER_PROTOCOL_TYPE, classic.protocol_name), change.records(group)

    def _member(self, group: ConsumerGroup, request: JoinGroupRequest,
                member_id: str) -> tuple[ConsumerGroupMember, str | None]:
        """The member (a new one if the group lacks it) and the id of the static member it replaces."""
        instance_id = request.group_instance_id
        if instance_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id), None
        existing = group.static_member(instance_id)
        if existing is None:
            return ConsumerGroupMember(member_id, instance_id=instance_id), None
        if existing.member_id == member_id:
            return existing, None
        if not request.is_unknown_member:
            raise ConsumerGroupError(ErrorCode.FENCED_INSTANCE_ID)
        return replace(existing, member_id=member_id), existing.member_id

    # -- SyncGroup and Heartbeat ---------------------------------------------------------------
    def sync(self, group: ConsumerGroup, request: SyncGroupRequest) -> SyncGroupResult:
        try:
            member = self._classic_member(group, request.member_id, request.group_instance_id, request.generation_id)
        except ConsumerGroupError as e:
            return SyncGroupResult(e.error)
        assert member.classic is not None
        if (request.protocol_type is not None and request.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                request.protocol_name is not None and request.protocol_name != member.classic.protocol_name):
            return SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            self._expect_rejoin(group, member)
            return SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self.heartbeats.timeouts.cancel_sync(group.group_id, member.member_id)
        self.migration.schedule_classic_session(group, member)
        assignment = self.migration.encode_assignment(member.assigned, subscription_version(member.classic))
        return SyncGroupResult(ErrorCode.NO_ERROR, CONSUMER_PROTOCOL_TYPE, member.classic.protocol_name, assignment)

    def heartbeat(self, group: ConsumerGroup, request: HeartbeatRequest) -> ErrorCode:
        try:
            member = self._classic_member(group, request.member_id, request.group_instance_id, request.generation_id)
        except ConsumerGroupError as e:
            return e.error
        self.migration.schedule_classic_session(group, member)
        if (member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, member))):
            self._expect_rejoin(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NO_ERROR

    def _expect_rejoin(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A member told to rejoin that does not within its rebalance timeout is fenced."""
        group_id, member_id = group.group_id, member.member_id
        self.heartbeats.timeouts.schedule_rebalance(group_id, member_id, member.rebalance_timeout_ms, self._fencing(
            group_id, member_id, "the classic member failed to join within the rebalance timeout"))

    def _fencing(self, group_id: str, member_id: str, reason: str) -> Callable[[], None]:
        """A timer's action: fence the member, if the group still has it."""
        def expire() -> None:
            current = self.heartbeats.groups.get(group_id)
            if current is not None and member_id in current.members:
                log.info("[GroupId %s] Member %s fenced from the group because %s.", group_id, member_id, reason)
                self.heartbeats.fence_member(current, member_id)

        return expire

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                        generation_id: int) -> ConsumerGroupMember:
        member = _validated_member(group, member_id, instance_id)
        if member.classic is None:
            raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != member.member_epoch:
            raise ConsumerGroupError(ErrorCode.ILLEGAL_GENERATION)
        return member

    # -- LeaveGroup ----------------------------------------------------------------------
    def leave(self, group: ConsumerGroup, request: LeaveGroupRequest) -> asyncio.Future[LeaveGroupResult]:
        """Answered once the records of the members' removal are appended."""
        records: KeyValues = []
        result = LeaveGroupResult(ErrorCode.NO_ERROR, [self._leave_one(group, m, records) for m in request.members])
        return self.heartbeats.records.answer_once_written(
            group.group_id, records, result, lambda error: LeaveGroupResult(error, [error] * len(request.members)))

    def _leave_one(self, group: ConsumerGroup, leaving: LeavingMember, records: KeyValues) -> ErrorCode:
        try:
            if leaving.group_instance_id is None:
                member = _validated_member(group, leaving.member_id, None)
            else:
                static = group.static_member(leaving.group_instance_id)
                if static is None:
                    raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID)
                if leaving.member_id and leaving.member_id != static.member_id:
                    raise ConsumerGroupError(ErrorCode.FENCED_INSTANCE_ID)
                member = static
            if member.classic is None:
                raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        except ConsumerGroupError as e:
            return e.error
        log.info("[Group %s] Member %s has left group through explicit `LeaveGroup` request.", group.group_id,
                 member.member_id)
        records += self.heartbeats.fence_records(group, member.member_id, downgrade=False)
        return ErrorCode.NO_ERROR


def _validated_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    """Kafka's validateConsumerGroupMember: the static member of that instance (fenced if another member id
    holds it), or the member of that id."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member
    static = group.static_member(instance_id)
    if static is None:
        raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID)
    if static.member_id != member_id:
        raise ConsumerGroupError(ErrorCode.FENCED_INSTANCE_ID)
    return static


def _supports_protocols(group: ConsumerGroup, request: JoinGroupRequest) -> bool:
    """Kafka's supportsClassicProtocols: the ``consumer`` protocol type, and a protocol every classic member
    of the group supports too."""
    if request.protocol_type != CONSUMER_PROTOCOL_TYPE or not request.protocols:
        return False
    classic = [m.classic for m in group.members.values()
               if m.classic is not None and m.member_id != request.member_id]
    names = set(request.protocol_names)
    for metadata in classic:
        names &= {name for name, _ in metadata.protocols}
    return bool(names)


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a partition of its target it does not have yet is still owned by another member."""
    for topic_id, partitions in group.target.get(member.member_id, {}).items():
        assigned = member.assigned.get(topic_id, frozenset())
        for partition in partitions - assigned:
            owner = group.owner_of(topic_id, partition)
            if owner is not None and owner != member.member_id:
                return True
    return False
