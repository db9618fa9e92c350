"""ConsumerGroupHeartbeat: joining, heartbeating in and leaving a consumer-protocol group (KIP-848).

Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` for one event loop.
One heartbeat:

1. gets or creates the group (epoch 0 creates it; a classic group of the
   same id with members is converted when ``group.consumer.migration.policy``
   allows it and its members use the ``consumer`` embedded protocol, see
   ``consumer_group_migration``; otherwise it answers GROUP_ID_NOT_FOUND)
   and the member (a static member replaces the instance that left with
   epoch -2), checking its epoch (FENCED_MEMBER_EPOCH);
2. bumps the group epoch when the member's subscription or the subscribed
   topics changed, and then computes the target assignment of every member
   with the group's assignor (``consumer_group_assignors``);
3. moves the member one step towards its target (``consumer_group_reconciliation``):
   revoke first, then assign what nobody else owns;
4. re-arms its session (``consumer_group_timeouts``).

Member epoch -1 leaves the group, -2 is a static member leaving for a while
(it keeps its partitions until its session expires or its next instance
joins). A member whose session expires, or that does not revoke within its
rebalance timeout, is fenced: removed, the group epoch bumped, its partitions
reassigned at the next heartbeat. The groups live only in memory here: their
records are not written to ``__consumer_offsets``, so they do not survive a
restart or a move of the coordinator (their committed offsets do).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from coordinator.common.scheduler import Scheduler
from coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicInfo,
)
from coordinator.group.consumer_group_assignors import ASSIGNORS, AssignmentSpec
from coordinator.group.consumer_group_reconciliation import OwnedPartitions, reconcile
from coordinator.group.consumer_group_requests import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResult
from coordinator.group.consumer_group_timeouts import ConsumerGroupTimeouts
from coordinator.group.group_metadata import GroupMetadata, GroupState
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_status import GroupStatus
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class TopicImage(Protocol):
    """The topics as the assignment needs them (the broker's metadata, behind a narrow interface)."""

    def describe_topic(self, name: str) -> TopicInfo | None: ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...


class NoTopics:
    """A topic image without topics (a coordinator built without the broker's metadata)."""

    def describe_topic(self, name: str) -> TopicInfo | None:
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None


class GroupConversions(Protocol):
    """Online migration as the heartbeat path triggers it (``consumer_group_migration``)."""

    def upgrade(self, classic: GroupMetadata) -> ConsumerGroup | None:
        """The consumer group a classic group with members became, or None when it cannot be converted."""
        ...

    def downgrade(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        """True when the group became a classic group, the leaving member left out."""
        ...


class NoConversions:
    def upgrade(self, classic: GroupMetadata) -> ConsumerGroup | None:
        return None

    def downgrade(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        return False


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """The broker's ``group.consumer.*`` configs."""

    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 2**31 - 1
    #: Short names; the first is the default.
    assignors: tuple[str, ...] = ("uniform", "range")
    #: ``group.consumer.migration.policy`` (a ``consumer_group_migration.MigrationPolicy`` value).
    migration_policy: str = "bidirectional"


class ConsumerGroupError(Exception):
    """An error Kafka answers a consumer-protocol request with (its ApiException)."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def validate_heartbeat(request: ConsumerGroupHeartbeatRequest, assignors: tuple[str, ...]) -> None:
    """INVALID_REQUEST (or UNSUPPORTED_ASSIGNOR) with Kafka's message for a malformed heartbeat."""
    def invalid(message: str) -> ConsumerGroupError:
        return ConsumerGroupError(ErrorCode.INVALID_REQUEST, message)

    epoch = request.member_epoch
    if (request.member_id_required or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and _blank(request.member_id):
        raise invalid("MemberId can't be empty.")
    if _blank(request.group_id):
        raise invalid("GroupId can't be empty.")
    if _blank(request.instance_id):
        raise invalid("InstanceId can't be empty.")
    if _blank(request.rack_id):
        raise invalid("RackId can't be empty.")
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or any(request.owned.values()):
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise ConsumerGroupError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                 f"ServerAssignor {request.server_assignor} is not supported. "
                                 f"Supported assignors: {', '.join(assignors)}.")
    if request.subscribed_topic_regex:
        # Regular expressions are resolved on the broker (RE2/J syntax); this broker does not yet.
        raise invalid("SubscribedTopicRegex is not supported by this broker.")


def _is_subset(owned: OwnedPartitions, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(parts <= assigned.get(topic_id, frozenset()) for topic_id, parts in owned.items())


def _check_member_epoch(member: ConsumerGroupMember, received: int, owned: OwnedPartitions) -> None:
    if received > member.member_epoch:
        raise ConsumerGroupError(ErrorCode.FENCED_MEMBER_EPOCH, (
            f"The consumer group member has a greater member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."))
    # The previous epoch with a subset of its partitions: the answer that bumped it was lost.
    if received < member.member_epoch and (
            received != member.previous_member_epoch or not _is_subset(owned, member.assigned)):
        raise ConsumerGroupError(ErrorCode.FENCED_MEMBER_EPOCH, (
            f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."))


class ConsumerGroupHeartbeat:
    """The consumer-protocol groups of this coordinator and the heartbeats that drive them.

    Owned by the coordinator; reads the classic groups (``manager``) only to keep the two
    protocols apart, and holds its timers in its own ``ConsumerGroupTimeouts``."""

    def __init__(self, config: ConsumerGroupConfig, manager: GroupMetadataManager, scheduler: Scheduler,
                 status: GroupStatus, topics: TopicImage) -> None:
        self.config = config
        self.manager = manager
        self.scheduler = scheduler
        self.status = status
        self.topics = topics
        self.timeouts = ConsumerGroupTimeouts(scheduler)
        self.groups: dict[str, ConsumerGroup] = {}
        #: Online migration between the protocols; the coordinator installs its own (none: never converts).
        self.migration: GroupConversions = NoConversions()

    # -- the request ------------------------------------------------------------------
    def heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> asyncio.Future[ConsumerGroupHeartbeatResult]:
        """Answered at once: a heartbeat never waits (the future keeps the coordinator's API uniform)."""
        future: asyncio.Future[ConsumerGroupHeartbeatResult] = self.scheduler.create_future()
        future.set_result(self._answer(request))
        return future

    def _answer(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResult:
        error = self.status.validate(request.group_id, allow_empty_id=True)
        if error is not None:
            return ConsumerGroupHeartbeatResult(error)
        try:
            validate_heartbeat(request, self.config.assignors)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request)
        except ConsumerGroupError as e:
            return ConsumerGroupHeartbeatResult(e.error, e.message)

    def _heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResult:
        group = self._group_for(request.group_id, request.member_epoch == 0, request.member_id)
        if len(group.members) >= self.config.max_size and (
                not request.member_id or request.member_id not in group.members):
            raise ConsumerGroupError(ErrorCode.GROUP_MAX_SIZE_REACHED, (
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members."))
        member_id = request.member_id or str(uuid.uuid4())
        if request.instance_id is None:
            member, replaces = self._dynamic_member(group, member_id, request), None
        else:
            member, replaces = self._static_member(group, member_id, request.instance_id, request)
        reconciled = self.update_member(group, member, self._updated_member(member, request), replaces, request.owned)
        self._schedule_timeouts(group, reconciled)
        full = request.member_epoch == 0 or (request.rebalance_timeout_ms != -1
                                             and request.subscribed_topic_names is not None
                                             and request.owned is not None)
        changed = dict(reconciled.assigned) != dict(member.assigned)
        return ConsumerGroupHeartbeatResult(
            member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=reconciled.assigned if full or changed else None)

    def update_member(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                      replaces: str | None, owned: OwnedPartitions) -> ConsumerGroupMember:
        """Store ``updated`` (what the member's request changed of ``member``): a new group epoch and target
        assignment when its subscription changed, then one reconciliation step. The member as stored."""
        if replaces is not None and replaces in group.target:
            group.target[updated.member_id] = group.target.pop(replaces)  # the new instance inherits its target
        self._maybe_bump_group_epoch(group, member, updated)
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, updated, replaces)
        reconciled = reconcile(updated, group.assignment_epoch, group.target.get(updated.member_id, {}),
                               owned, group.owner_of)
        self.groups.setdefault(group.group_id, group)
        group.update_member(reconciled, replaces)
        if replaces is not None and replaces != reconciled.member_id:
            self.timeouts.cancel_member(group.group_id, replaces)
        return reconciled

    # -- the group and the member ---------------------------------------------------------
    def _group_for(self, group_id: str, create: bool, member_id: str) -> ConsumerGroup:
        """The group (a new one is registered only once its first heartbeat succeeds)."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self.manager.get_group(group_id)
        if classic is not None and not classic.is_(GroupState.DEAD):
            # An Empty classic group (offsets only) becomes a consumer group; one with members only by an
            # online upgrade, when the migration policy allows it.
            if create and not classic.is_(GroupState.EMPTY):
                upgraded = self.migration.upgrade(classic)
                if upgraded is not None:
                    return upgraded
            if not (create and classic.is_(GroupState.EMPTY)):
                raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")
        elif not create:
            # Kafka answers GROUP_ID_NOT_FOUND ("Consumer group <id> not found."), which clients take as fatal;
            # there a member's group is never missing, as its records outlive a restart or a coordinator
            # move. Here they do not yet, so a member heartbeating after one is told what a member the
            # group no longer knows is told, and joins again.
            raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group_id}.")
        return ConsumerGroup(group_id)

    def _dynamic_member(self, group: ConsumerGroup, member_id: str,
                        request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if request.member_epoch != 0:
                raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                         f"Member {member_id} is not a member of group {group.group_id}.")
            log.info("[GroupId %s] Member %s joins the consumer group using the consumer protocol.",
                     group.group_id, member_id)
            return ConsumerGroupMember(member_id)
        # A member the group still has is checked even when it joins again with epoch 0 (as in Kafka: it is
        # fenced unless it had just joined; it is removed when its session expires, then it joins anew).
        _check_member_epoch(member, request.member_epoch, request.owned)
        return member

    def _static_member(self, group: ConsumerGroup, member_id: str, instance_id: str,
                       request: ConsumerGroupHeartbeatRequest) -> tuple[ConsumerGroupMember, str | None]:
        """The static member and the id of the member it replaces (None: none)."""
        existing = group.static_member(instance_id)
        if request.member_epoch == 0:
            if existing is None:
                log.info("[GroupId %s] Static member %s with instance id %s joins the consumer group using the "
                         "consumer protocol.", group.group_id, member_id, instance_id)
                return ConsumerGroupMember(member_id, instance_id=instance_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise ConsumerGroupError(ErrorCode.UNRELEASED_INSTANCE_ID, (
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
                    f"instance id is owned by {existing.member_id} member."))
            log.info("[GroupId %s] Static member with instance id %s re-joins the consumer group using the "
                     "consumer protocol. Created a new member %s to replace the existing member %s.",
                     group.group_id, instance_id, member_id, existing.member_id)
            return replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0), existing.member_id
        if existing is None:
            raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise ConsumerGroupError(ErrorCode.FENCED_INSTANCE_ID, (
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{existing.member_id}."))
        _check_member_epoch(existing, request.member_epoch, request.owned)
        return existing, None

    @staticmethod
    def _updated_member(member: ConsumerGroupMember, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupMember:
        """The member with what this heartbeat changed (a field it did not send stays as it was)."""
        names = request.subscribed_topic_names
        return replace(
            member,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=request.server_assignor if request.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=tuple(sorted(set(names))) if names is not None else member.subscribed_topic_names,
            client_id=request.client_id, client_host=request.client_host)

    # -- epochs and the target assignment ------------------------------------------------------
    def _maybe_bump_group_epoch(self, group: ConsumerGroup, member: ConsumerGroupMember,
                                updated: ConsumerGroupMember) -> None:
        """A new group, a changed subscription or changed subscribed topics: a new group epoch."""
        bump = group.group_epoch == 0 or updated.subscribed_topic_names != member.subscribed_topic_names
        metadata = self._subscription_metadata(group.subscribed_topic_names(updated))
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group.group_epoch)

    def _subscription_metadata(self, names: set[str]) -> dict[str, TopicInfo]:
        metadata = {}
        for name in sorted(names):
            info = self.topics.describe_topic(name)
            if info is not None:
                metadata[name] = info
        return metadata

    def _update_target_assignment(self, group: ConsumerGroup, updated: ConsumerGroupMember,
                                  replaces: str | None) -> None:
        members = {m.member_id: m for m in group.members.values() if m.member_id != replaces}
        members[updated.member_id] = updated
        current = dict(group.target)
        ids = {name: info.topic_id for name, info in group.subscription_metadata.items()}
        spec = AssignmentSpec(
            subscriptions={mid: frozenset(ids[n] for n in m.subscribed_topic_names if n in ids)
                           for mid, m in members.items()},
            topics={info.topic_id: info.num_partitions for info in group.subscription_metadata.values()},
            current=current)
        name = self.assignor_for(members.values())
        group.target = ASSIGNORS[name](spec)
        group.assignment_epoch = group.group_epoch
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
                 group.group_id, group.group_epoch, name)

    def assignor_for(self, members: Iterable[ConsumerGroupMember]) -> str:
        """The server assignor most members ask for (Kafka's computePreferredServerAssignor), else the default."""
        counts: dict[str, int] = {}
        for member in members:
            if member.server_assignor is not None:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return self.config.assignors[0]
        return max(sorted(counts), key=lambda n: counts[n])

    # -- timers and fencing -------------------------------------------------------------
    def _schedule_timeouts(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.timeouts.schedule_session(group_id, member_id, self.config.session_timeout_ms,
                                       lambda: self._session_expired(group_id, member_id))
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            epoch, timeout = member.member_epoch, member.rebalance_timeout_ms
            self.timeouts.schedule_rebalance(group_id, member_id, timeout,
                                             lambda: self._rebalance_expired(group_id, member_id, epoch, timeout))
        else:
            self.timeouts.cancel_rebalance(group_id, member_id)

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            log.info("[GroupId %s] Member %s fenced from the group because its session expired.", group_id, member_id)
            self.fence_member(group, member_id)

    def _rebalance_expired(self, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is not None and member is not None and member.member_epoch == epoch \
                and member.state == MemberState.UNREVOKED_PARTITIONS:
            log.info("[GroupId %s] Member %s fenced from the group because it failed to transition from epoch %d "
                     "within %dms.", group_id, member_id, epoch, timeout_ms)
            self.fence_member(group, member_id)

    def fence_member(self, group: ConsumerGroup, member_id: str, downgrade: bool = True) -> None:
        """Remove the member: its partitions are free, the group epoch moves on, the next heartbeat reassigns.
        With ``downgrade``, a group left with classic members only may become a classic group instead."""
        self.timeouts.cancel_member(group.group_id, member_id)
        if downgrade and self.migration.downgrade(group, member_id):
            return
        if group.remove_member(member_id) is None:
            return
        group.subscription_metadata = self._subscription_metadata(group.subscribed_topic_names())
        group.group_epoch += 1
        log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group.group_epoch)

    # -- leaving ------------------------------------------------------------------------
    def _leave(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResult:
        group = self.groups.get(request.group_id)
        if group is None:
            classic = self.manager.get_group(request.group_id)
            message = (f"Group {request.group_id} is not a consumer group"
                       if classic is not None and not classic.is_(GroupState.DEAD)
                       else f"Group {request.group_id} not found.")
            raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND, message)
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                         f"Member {request.member_id} is not a member of group {group.group_id}.")
            log.info("[GroupId %s] Member %s left the consumer group.", group.group_id, member.member_id)
            self.fence_member(group, member.member_id)
        else:
            self._static_leave(group, request, request.instance_id)
        return ConsumerGroupHeartbeatResult(member_id=request.member_id, member_epoch=request.member_epoch)

    def _static_leave(self, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest, instance_id: str) -> None:
        member = group.static_member(instance_id)
        if member is None:
            raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if member.member_id != request.member_id:
            raise ConsumerGroupError(ErrorCode.FENCED_INSTANCE_ID, (
                f"Static member {request.member_id} with instance id {instance_id} was fenced by member "
                f"{member.member_id}."))
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # It keeps its place and partitions (no rebalance) until its session expires or it comes back.
            log.info("[GroupId %s] Static member %s with instance id %s temporarily left the consumer group.",
                     group.group_id, member.member_id, instance_id)
            group.update_member(replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, revoking={}))
            self.timeouts.cancel_rebalance(group.group_id, member.member_id)
        else:
            log.info("[GroupId %s] Static member %s with instance id %s left the consumer group.",
                     group.group_id, member.member_id, instance_id)
            self.fence_member(group, member.member_id)

    # -- the coordinator's other duties towards these groups ----------------------------------
    def unload_partition(self, partition: int) -> None:
        """Leadership of a ``__consumer_offsets`` partition left: its consumer groups go with it."""
        for group_id in [g for g in self.groups if self.manager.partition_for(g) == partition]:
            self.timeouts.cancel_group(group_id)
            del self.groups[group_id]

    def shutdown(self) -> None:
        self.timeouts.shutdown()
        self.groups.clear()
