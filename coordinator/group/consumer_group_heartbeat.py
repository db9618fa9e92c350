"""ConsumerGroupHeartbeat: joining, heartbeating in and leaving a consumer-protocol group (KIP-848).

Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` for one event loop.
One heartbeat:

1. gets or creates the group (epoch 0 creates it; a classic group of the
   same id with members is converted when ``group.consumer.migration.policy``
   allows it and its members use the ``consumer`` embedded protocol, see
   ``consumer_group_migration``; otherwise it answers GROUP_ID_NOT_FOUND)
   and the member (a static member replaces the instance that left with
   epoch -2), checking its epoch (FENCED_MEMBER_EPOCH);
2. bumps the group epoch when the member's subscription, the subscribed
   topics or what a subscribed regular expression resolves to changed
   (``consumer_group_regex``), and then computes the target assignment of every member
   with the group's assignor (``consumer_group_assignors``);
3. moves the member one step towards its target (``consumer_group_reconciliation``):
   revoke first, then assign what nobody else owns;
4. re-arms its session (``consumer_group_timeouts``).

Most heartbeats are steady: a stable member sends its id and epoch and
nothing else. When its group has nothing to recompute either (the subscribed
topics' metadata was computed at the topic image's current ``version`` and no
regular expression is due a refresh), steps 2 and 3 would leave everything as
it is, so such a heartbeat only re-arms the session and is answered at once.

Member epoch -1 leaves the group, -2 is a static member leaving for a while
(it keeps its partitions until its session expires or its next instance
joins). A member whose session expires, or that does not revoke within its
rebalance timeout, is fenced: removed, the group epoch bumped, its partitions
reassigned at the next heartbeat.

Every change is written to ``__consumer_offsets`` as Kafka's records
(``consumer_group_records``) and a heartbeat is answered only once its records
are appended (acks=-1); a load of the partition (start-up, or leadership of it
gained) rebuilds the groups from them, so their members go on with the same
epochs and partitions. A failed append is answered with its error; the change
stays in memory, as the partition is then usually moving away and is unloaded.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from coordinator.common.coordinator_log import KeyValues
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
from coordinator.group.consumer_group_records import (
    ConsumerGroupLog,
    GroupChange,
    classic_group_tombstone,
    group_tombstones,
    rebuild_group,
)
from coordinator.group.consumer_group_regex import (
    DEFAULT_REFRESH_MAX_INTERVAL_MS,
    InvalidRegularExpression,
    RefreshContext,
    RegexResolver,
    compile_regex,
    drop_unused,
)
from coordinator.group.consumer_group_requests import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResult
from coordinator.group.consumer_group_timeouts import ConsumerGroupTimeouts
from coordinator.group.group_configs import GroupConfigs
from coordinator.group.group_metadata import GroupMetadata, GroupState
from coordinator.group.group_metadata_loader import LoadedConsumerGroup
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_status import GroupStatus
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class TopicImage(Protocol):
    """The topics as the assignment needs them (the broker's metadata, behind a narrow interface)."""

    def describe_topic(self, name: str) -> TopicInfo | None: ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...

    def topic_names(self) -> Iterable[str]: ...

    @property
    def version(self) -> int:
        """Moves on whenever ``describe_topic`` may describe some topic otherwise (created, deleted, partitions
        added, replicas or brokers' racks changed): a group's subscribed-topic metadata computed at the same
        version is still what the image says."""
        ...


class NoTopics:
    """A topic image without topics (a coordinator built without the broker's metadata)."""

    version = 0

    def describe_topic(self, name: str) -> TopicInfo | None:
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None

    def topic_names(self) -> Iterable[str]:
        return ()


class GroupConversions(Protocol):
    """Online migration as the heartbeat path triggers it (``consumer_group_migration``)."""

    def upgrade(self, classic: GroupMetadata, records: KeyValues) -> ConsumerGroup | None:
        """The consumer group a classic group with members became (the records of the conversion added to
        ``records``), or None when it cannot be converted."""
        ...

    def downgrade(self, group: ConsumerGroup, leaving_member_id: str, records: KeyValues) -> bool:
        """True when the group became a classic group, the leaving member left out (the records of the
        conversion added to ``records``)."""
        ...


class NoConversions:
    def upgrade(self, classic: GroupMetadata, records: KeyValues) -> ConsumerGroup | None:
        return None

    def downgrade(self, group: ConsumerGroup, leaving_member_id: str, records: KeyValues) -> bool:
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
    #: ``group.consumer.regex.refresh.interval.ms``: a group's expressions are refreshed at least this often.
    regex_refresh_max_interval_ms: int = DEFAULT_REFRESH_MAX_INTERVAL_MS


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


def _check_regex(member: ConsumerGroupMember, updated: ConsumerGroupMember) -> None:
    """INVALID_REGULAR_EXPRESSION (Kafka's message) for a newly subscribed expression that does not compile."""
    regex = updated.subscribed_topic_regex
    if regex is not None and regex != member.subscribed_topic_regex:
        try:
            compile_regex(regex)
        except InvalidRegularExpression as e:
            raise ConsumerGroupError(ErrorCode.INVALID_REGULAR_EXPRESSION, e.message) from None


def _is_subset(owned: OwnedPartitions, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(parts <= assigned.get(topic_id, frozenset()) for topic_id, parts in owned.items())


def _sends_nothing_new(request: ConsumerGroupHeartbeatRequest, member: ConsumerGroupMember,
                       group: ConsumerGroup) -> bool:
    """A steady heartbeat: the member's epoch, and no field (or the same value) it had sent before."""
    instance_id = request.instance_id
    return (request.member_epoch == member.member_epoch and request.owned is None
            and request.subscribed_topic_names is None and request.subscribed_topic_regex is None
            and request.client_id == member.client_id and request.client_host == member.client_host
            and request.rack_id in (None, member.rack_id)
            and request.rebalance_timeout_ms in (-1, member.rebalance_timeout_ms)
            and request.server_assignor in (None, member.server_assignor)
            and (instance_id is None or (instance_id == member.instance_id
                                         and group.static_members.get(instance_id) == member.member_id)))


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
        self.regexes = RegexResolver(topics.topic_names, scheduler)
        self.records = ConsumerGroupLog(manager)
        self.groups: dict[str, ConsumerGroup] = {}
        #: Each group's configs over the broker's timeouts, changed by the config APIs (broker.group_config_store).
        self.group_configs = GroupConfigs(config.session_timeout_ms, config.heartbeat_interval_ms)
        #: Online migration between the protocols; the coordinator installs its own (none: never converts).
        self.migration: GroupConversions = NoConversions()
        #: Answer a stable member's steady heartbeat without the full path's copies and diff (off: every
        #: heartbeat takes the full path, which answers and writes the same).
        self.steady_fast_path = True

    # -- the request ------------------------------------------------------------------
    def heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> asyncio.Future[ConsumerGroupHeartbeatResult]:
        """Answered once the records of what it changed are appended (at once when it changed nothing)."""
        result, records = self._answer(request)
        return self.records.answer_once_written(request.group_id, records, result, ConsumerGroupHeartbeatResult)

    def _answer(self, request: ConsumerGroupHeartbeatRequest) -> tuple[ConsumerGroupHeartbeatResult, KeyValues]:
        error = self.status.validate(request.group_id, allow_empty_id=True)
        if error is not None:
            return ConsumerGroupHeartbeatResult(error), []
        try:
            validate_heartbeat(request, self.config.assignors)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            steady = self._steady_answer(request) if self.steady_fast_path else None
            if steady is not None:
                return steady, []
            return self._heartbeat(request)
        except ConsumerGroupError as e:
            return ConsumerGroupHeartbeatResult(e.error, e.message), []

    def _steady_answer(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResult | None:
        """The answer to a steady heartbeat (the member sent nothing it had not sent before) of a stable member
        whose group has nothing to recompute; None for any other heartbeat, which takes the full path.

        What the full path answers and does for it, without its work: the member stays as it is, the group's
        epoch, subscribed topics' metadata, regular expressions and target too, so there is nothing to write."""
        group = self.groups.get(request.group_id)
        member = None if group is None else group.members.get(request.member_id)
        if group is None or member is None or not _sends_nothing_new(request, member, group):
            return None
        if (member.state != MemberState.STABLE or member.revoking or member.classic is not None
                or not 0 < member.member_epoch == group.assignment_epoch == group.group_epoch
                or group.subscription_metadata_version != self.topics.version
                or self.regexes.refresh_due(group.resolved_regexes, group.subscribed_regexes(),
                                            self.config.regex_refresh_max_interval_ms)):
            return None
        group.keep_member(member.member_id)
        self._schedule_timeouts(group, member)
        return ConsumerGroupHeartbeatResult(
            member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.group_configs.consumer_heartbeat_interval_ms(group.group_id))

    def _heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> tuple[ConsumerGroupHeartbeatResult, KeyValues]:
        records: KeyValues = []  # a conversion's records come before the heartbeat's
        group = self._group_for(request.group_id, request.member_epoch == 0, records)
        if len(group.members) >= self.config.max_size and (
                not request.member_id or request.member_id not in group.members):
            raise ConsumerGroupError(ErrorCode.GROUP_MAX_SIZE_REACHED, (
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members."))
        member_id = request.member_id or str(uuid.uuid4())
        if request.instance_id is None:
            member, replaces = self._dynamic_member(group, member_id, request), None
        else:
            member, replaces = self._static_member(group, member_id, request.instance_id, request)
        change = GroupChange(group, (replaces, member_id))
        updated = self._updated_member(member, request)
        _check_regex(member, updated)
        reconciled = self.update_member(group, member, updated, replaces, request.owned,
                                        RefreshContext(request.topic_authorizer))
        self._schedule_timeouts(group, reconciled)
        full = request.member_epoch == 0 or (request.rebalance_timeout_ms != -1
                                             and request.subscribed_topic_names is not None
                                             and request.owned is not None)
        changed = dict(reconciled.assigned) != dict(member.assigned)
        return ConsumerGroupHeartbeatResult(
            member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.group_configs.consumer_heartbeat_interval_ms(group.group_id),
            assignment=reconciled.assigned if full or changed else None), records + change.records(group)

    def update_member(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                      replaces: str | None, owned: OwnedPartitions,
                      regex_context: RefreshContext | None = None) -> ConsumerGroupMember:
        """Store ``updated`` (what the member's request changed of ``member``): a new group epoch and target
        assignment when its subscription changed, then one reconciliation step. The member as stored.
        ``regex_context`` (a consumer-protocol heartbeat's) may refresh the group's regular expressions."""
        if replaces is not None and replaces in group.target:
            group.target[updated.member_id] = group.target.pop(replaces)  # the new instance inherits its target
        self._maybe_bump_group_epoch(group, member, updated, regex_context)
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
    def _group_for(self, group_id: str, create: bool, records: KeyValues) -> ConsumerGroup:
        """The group (a new one is registered only once its first heartbeat succeeds); the classic group it
        replaces writes its tombstone to ``records``."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self.manager.get_group(group_id)
        if classic is not None and not classic.is_(GroupState.DEAD):
            # An Empty classic group (offsets only) becomes a consumer group; one with members only by an
            # online upgrade, when the migration policy allows it.
            if create and not classic.is_(GroupState.EMPTY):
                upgraded = self.migration.upgrade(classic, records)
                if upgraded is not None:
                    return upgraded
            if not (create and classic.is_(GroupState.EMPTY)):
                raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")
            records.append(classic_group_tombstone(group_id))
        elif not create:
            # As Kafka: the group's records outlive a restart or a move of the coordinator, so a group
            # missing here was deleted.
            raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
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
        names, regex = request.subscribed_topic_names, request.subscribed_topic_regex
        return replace(
            member,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=request.server_assignor if request.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=tuple(sorted(set(names))) if names is not None else member.subscribed_topic_names,
            # An empty expression unsubscribes from the member's expression.
            subscribed_topic_regex=(regex or None) if regex is not None else member.subscribed_topic_regex,
            client_id=request.client_id, client_host=request.client_host)

    # -- epochs and the target assignment ------------------------------------------------------
    def _maybe_bump_group_epoch(self, group: ConsumerGroup, member: ConsumerGroupMember,
                                updated: ConsumerGroupMember, regex_context: RefreshContext | None) -> None:
        """A new group, a changed subscription, changed subscribed topics or a regular expression that resolves
        to other topics now (as the member may see them): a new group epoch."""
        regex_changed = updated.subscribed_topic_regex != member.subscribed_topic_regex
        bump = (group.group_epoch == 0 or updated.subscribed_topic_names != member.subscribed_topic_names
                or regex_changed)
        # Kafka resolves an expression new to the group off its event thread, after this heartbeat is
        # answered: the member's names are assigned now, the expression's topics from a later heartbeat on.
        new_regex = updated.subscribed_topic_regex if regex_changed else None
        bump |= self.regexes.refresh(group.resolved_regexes, group.subscribed_regexes(updated), regex_context,
                                     self.config.regex_refresh_max_interval_ms, later=new_regex)
        group.subscription_metadata_version = self.topics.version  # read first: the metadata is as new
        metadata = self._subscription_metadata(self._group_topic_names(group, updated))
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group.group_epoch)

    @staticmethod
    def _group_topic_names(group: ConsumerGroup, extra: ConsumerGroupMember | None = None) -> set[str]:
        """The group's subscribed topics: the members' names and what their expressions resolved to."""
        return group.subscribed_topic_names(extra).union(*(r.topics for r in group.resolved_regexes.values()))

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
            subscriptions={mid: frozenset(ids[n] for n in group.member_topic_names(m) if n in ids)
                           for mid, m in members.items()},
            topics={info.topic_id: info.num_partitions for info in group.subscription_metadata.values()},
            current=current,
            member_racks={mid: m.rack_id for mid, m in members.items()},
            partition_racks={info.topic_id: info.partition_racks for info in group.subscription_metadata.values()
                             if info.partition_racks})
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
        self.timeouts.schedule_session(group_id, member_id, self.group_configs.consumer_session_timeout_ms(group_id),
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
        self.records.write(group.group_id, self.fence_records(group, member_id, downgrade))

    def fence_records(self, group: ConsumerGroup, member_id: str, downgrade: bool = True) -> KeyValues:
        """``fence_member``, returning the records to write."""
        self.timeouts.cancel_member(group.group_id, member_id)
        records: KeyValues = []
        if downgrade and self.migration.downgrade(group, member_id, records):
            return records
        change = GroupChange(group, (member_id,))
        if group.remove_member(member_id) is None:
            return []
        # As Kafka: a member leaving only drops the expressions nobody uses any more; the others are
        # refreshed at a heartbeat, with its member's ACLs.
        drop_unused(group.resolved_regexes, group.subscribed_regexes())
        group.subscription_metadata_version = self.topics.version
        group.subscription_metadata = self._subscription_metadata(self._group_topic_names(group))
        group.group_epoch += 1
        log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group.group_epoch)
        return change.records(group)

    # -- leaving ------------------------------------------------------------------------
    def _leave(self, request: ConsumerGroupHeartbeatRequest) -> tuple[ConsumerGroupHeartbeatResult, KeyValues]:
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
            records = self.fence_records(group, member.member_id)
        else:
            records = self._static_leave(group, request, request.instance_id)
        return ConsumerGroupHeartbeatResult(member_id=request.member_id, member_epoch=request.member_epoch), records

    def _static_leave(self, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest,
                      instance_id: str) -> KeyValues:
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
            change = GroupChange(group, (member.member_id,))
            group.update_member(replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, revoking={}))
            self.timeouts.cancel_rebalance(group.group_id, member.member_id)
            return change.records(group)
        log.info("[GroupId %s] Static member %s with instance id %s left the consumer group.",
                 group.group_id, member.member_id, instance_id)
        return self.fence_records(group, member.member_id)

    # -- the coordinator's other duties towards these groups ----------------------------------
    def delete_group(self, group_id: str) -> None:
        """Forget the group and write its tombstones (DeleteGroups, or a classic group taking its place)."""
        group = self.groups.pop(group_id, None)
        self.timeouts.cancel_group(group_id)
        if group is not None:
            self.records.write(group_id, group_tombstones(group))

    def delete_empty_groups(self) -> None:
        """At each offset-retention check (Kafka's cleanupGroupMetadata): a group without members
        whose committed offsets are all gone is deleted, tombstones and all."""
        for group_id, group in list(self.groups.items()):
            holder = self.manager.get_group(group_id)
            if not group.members and (holder is None or not holder.has_offsets()):
                log.info("[GroupId %s] Deleting the empty consumer group: it has no committed offsets left.",
                         group_id)
                self.delete_group(group_id)

    def load_groups(self, loaded: dict[str, LoadedConsumerGroup]) -> None:
        """A ``__consumer_offsets`` partition was loaded: its consumer groups come back as their records
        left them, and each member's session starts anew (its rebalance timeout too while it revokes)."""
        for group_id, records in loaded.items():
            self.timeouts.cancel_group(group_id)
            group = rebuild_group(group_id, records)
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_timeouts(group, member)
            log.info("[GroupId %s] Loaded consumer group at epoch %d with %d member(s).", group_id,
                     group.group_epoch, len(group.members))

    def unload_partition(self, partition: int) -> None:
        """Leadership of a ``__consumer_offsets`` partition left: its consumer groups go with it."""
        for group_id in [g for g in self.groups if self.manager.partition_for(g) == partition]:
            self.timeouts.cancel_group(group_id)
            del self.groups[group_id]

    def shutdown(self) -> None:
        self.timeouts.shutdown()
        self.regexes.shutdown()
        self.groups.clear()
