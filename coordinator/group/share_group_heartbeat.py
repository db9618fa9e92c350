"""ShareGroupHeartbeat: joining, heartbeating in and leaving a share group (KIP-932).

Kafka's ``GroupMetadataManager.shareGroupHeartbeat`` for one event loop. One heartbeat:

1. gets or creates the group (epoch 0 creates it; a group of another type with
   the same id is GROUP_ID_NOT_FOUND) and the member (the consumer chooses its
   member id; an unknown one at epoch > 0 is UNKNOWN_MEMBER_ID, an epoch other
   than the member's or, after a lost answer, its previous one FENCED_MEMBER_EPOCH);
2. bumps the group epoch when the member's subscription or the subscribed
   topics changed, and then computes every member's target with the simple
   assignor (``share_group_assignor``) over the partitions whose share state
   is initialized;
3. gives the member its target at once (a share partition may have several
   members, so nothing is revoked first);
4. starts initializing the state of subscribed share partitions that have none
   yet (``ShareStatePersister``, Kafka's InitializeShareGroupState through the
   Persister); once done they are assignable and a new target assignment is
   computed;
5. re-arms the member's session (``share.session.timeout.ms`` of the group,
   else ``group.share.session.timeout.ms``): a member whose session expires is
   fenced (removed, its partitions reassigned).

Member epoch -1 leaves the group. Every change is written to
``__consumer_offsets`` (``share_group_records``) and a heartbeat that changed
the group is answered once its records are appended; a load of the partition
rebuilds the groups from them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import replace
from typing import Any

from coordinator.common.coordinator_log import KeyValues
from coordinator.common.scheduler import Scheduler
from coordinator.group.consumer_group import Assignment, TopicInfo
from coordinator.group.consumer_group_heartbeat import ConsumerGroupError, TopicImage
from coordinator.group.consumer_group_records import ConsumerGroupLog
from coordinator.group.consumer_group_timeouts import ConsumerGroupTimeouts
from coordinator.group.group_configs import GroupConfigs
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_status import GroupStatus
from coordinator.group.share_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ShareGroup,
    ShareGroupMember,
    add_partitions,
    remove_partitions,
)
from coordinator.group.share_group_assignor import ShareAssignmentSpec, assign
from coordinator.group.share_group_record_formats import LoadedShareGroup
from coordinator.group.share_group_records import ShareGroupChange, rebuild_share_group, share_group_tombstones
from coordinator.group.share_group_requests import (
    ShareGroupConfig,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResult,
    ShareStatePersister,
)
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
#: The start offset Kafka initializes a share partition with: the partition's leader resolves it
#: from ``share.auto.offset.reset`` when it first reads the state.
UNINITIALIZED_START_OFFSET = -1


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def validate_share_heartbeat(request: ShareGroupHeartbeatRequest) -> None:
    """INVALID_REQUEST with Kafka's message for a malformed heartbeat."""
    def invalid(message: str) -> ConsumerGroupError:
        return ConsumerGroupError(ErrorCode.INVALID_REQUEST, message)

    if _blank(request.member_id) or not request.member_id:
        raise invalid("MemberId can't be empty.")
    if _blank(request.group_id):
        raise invalid("GroupId can't be empty.")
    if _blank(request.rack_id):
        raise invalid("RackId can't be empty.")
    if request.member_epoch == 0:
        if not request.subscribed_topic_names:
            raise invalid("SubscribedTopicNames must be set in first request.")
    elif request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")


def _check_member_epoch(member: ShareGroupMember, received: int) -> None:
    if received > member.member_epoch:
        raise ConsumerGroupError(ErrorCode.FENCED_MEMBER_EPOCH, (
            f"The share group member has a greater member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."))
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise ConsumerGroupError(ErrorCode.FENCED_MEMBER_EPOCH, (
            f"The share group member has a smaller member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."))


class ShareGroupHeartbeat:
    """The share groups of this coordinator and the heartbeats that drive them.

    ``other_group``: whether a group of another type (classic, consumer) has the id. ``persister``: where
    share partitions' state is initialized and deleted; None (no share coordinator wired) takes a partition as
    initialized as soon as the group subscribes to it."""

    def __init__(self, config: ShareGroupConfig, manager: GroupMetadataManager, scheduler: Scheduler,
                 status: GroupStatus, topics: TopicImage, group_configs: GroupConfigs,
                 other_group: Callable[[str], bool]) -> None:
        self.config = config
        self.manager = manager
        self.scheduler = scheduler
        self.status = status
        self.topics = topics
        self.group_configs = group_configs
        self.other_group = other_group
        self.timeouts = ConsumerGroupTimeouts(scheduler)
        self.records = ConsumerGroupLog(manager)
        self.groups: dict[str, ShareGroup] = {}
        self.persister: ShareStatePersister | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- the request ------------------------------------------------------------------
    def heartbeat(self, request: ShareGroupHeartbeatRequest) -> asyncio.Future[ShareGroupHeartbeatResult]:
        """Answered once the records of what it changed are appended (at once when it changed nothing)."""
        result, records = self._answer(request)
        return self.records.answer_once_written(request.group_id, records, result, ShareGroupHeartbeatResult)

    def _answer(self, request: ShareGroupHeartbeatRequest) -> tuple[ShareGroupHeartbeatResult, KeyValues]:
        error = self.status.validate(request.group_id, allow_empty_id=True)
        if error is not None:
            return ShareGroupHeartbeatResult(error), []
        try:
            validate_share_heartbeat(request)
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(request)
            return self._heartbeat(request)
        except ConsumerGroupError as e:
            return ShareGroupHeartbeatResult(e.error, e.message), []

    def _heartbeat(self, request: ShareGroupHeartbeatRequest) -> tuple[ShareGroupHeartbeatResult, KeyValues]:
        group = self._group_for(request.group_id, request.member_epoch == 0)
        if len(group.members) >= self.config.max_size and request.member_id not in group.members:
            raise ConsumerGroupError(ErrorCode.GROUP_MAX_SIZE_REACHED, (
                f"The share group has reached its maximum capacity of {self.config.max_size} members."))
        member = self._member(group, request)
        change = ShareGroupChange(group, [member.member_id])
        updated = replace(
            member,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            subscribed_topic_names=(tuple(sorted(set(request.subscribed_topic_names)))
                                    if request.subscribed_topic_names is not None
                                    else member.subscribed_topic_names),
            client_id=request.client_id, client_host=request.client_host)
        self.groups.setdefault(group.group_id, group)
        group.members[updated.member_id] = updated
        self._maybe_bump_group_epoch(group, member, updated)
        self._start_initializing(group)
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group)
        reconciled = self._reconcile(group, group.members[updated.member_id])
        self._schedule_session(group, reconciled)
        return ShareGroupHeartbeatResult(
            member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=(reconciled.assigned if request.member_epoch == 0
                        or dict(reconciled.assigned) != dict(member.assigned) else None)), change.records(group)

    # -- the group and the member ---------------------------------------------------------
    def _group_for(self, group_id: str, create: bool) -> ShareGroup:
        """The group (a new one is registered only once its first heartbeat succeeds)."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self.other_group(group_id):
            raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        return ShareGroup(group_id)

    @staticmethod
    def _member(group: ShareGroup, request: ShareGroupHeartbeatRequest) -> ShareGroupMember:
        member = group.members.get(request.member_id)
        if member is None:
            if request.member_epoch != 0:
                raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                         f"Member {request.member_id} is not a member of group {group.group_id}.")
            log.info("[GroupId %s] Member %s joins the share group using the share protocol.",
                     group.group_id, request.member_id)
            return ShareGroupMember(request.member_id)
        if request.member_epoch != 0:
            _check_member_epoch(member, request.member_epoch)
        return member

    # -- epochs and the target assignment ------------------------------------------------------
    def _maybe_bump_group_epoch(self, group: ShareGroup, member: ShareGroupMember,
                                updated: ShareGroupMember) -> None:
        bump = group.group_epoch == 0 or updated.subscribed_topic_names != member.subscribed_topic_names
        metadata = self._subscription_metadata(group.subscribed_topic_names())
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            self._bump(group)

    @staticmethod
    def _bump(group: ShareGroup) -> None:
        group.group_epoch += 1
        log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group.group_epoch)

    def _subscription_metadata(self, names: Iterable[str]) -> dict[str, TopicInfo]:
        metadata = {}
        for name in sorted(names):
            info = self.topics.describe_topic(name)
            if info is not None:
                metadata[name] = info
        return metadata

    def _update_target_assignment(self, group: ShareGroup) -> None:
        ids = {name: info.topic_id for name, info in group.subscription_metadata.items()}
        spec = ShareAssignmentSpec(
            subscriptions={mid: frozenset(ids[n] for n in m.subscribed_topic_names if n in ids)
                           for mid, m in group.members.items()},
            assignable={topic_id: partitions for topic_id, (_, partitions) in group.initialized.items()},
            current=dict(group.target))
        group.target = assign(spec)
        group.assignment_epoch = group.group_epoch
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
                 group.group_id, group.group_epoch, self.config.assignor)

    @staticmethod
    def _reconcile(group: ShareGroup, member: ShareGroupMember) -> ShareGroupMember:
        """A share group member takes its target at once: a partition may be shared, nothing is revoked first."""
        target = group.target.get(member.member_id, {})
        if member.member_epoch == group.assignment_epoch and dict(member.assigned) == dict(target):
            return member
        reconciled = replace(member, previous_member_epoch=member.member_epoch,
                             member_epoch=group.assignment_epoch, assigned=dict(target))
        group.members[member.member_id] = reconciled
        return reconciled

    # -- share partitions' state ----------------------------------------------------------
    def _uninitialized(self, group: ShareGroup) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
        missing = {}
        for name, info in group.subscription_metadata.items():
            partitions = frozenset(p for p in range(info.num_partitions)
                                   if not group.is_initialized(info.topic_id, p)
                                   and not group.is_initializing(info.topic_id, p))
            if partitions:
                missing[info.topic_id] = (name, partitions)
        return missing

    def _start_initializing(self, group: ShareGroup) -> None:
        """Kafka's maybeCreateInitializeShareGroupStateRequest: the subscribed share partitions without state
        get it; with no persister they count as initialized at once (and the group epoch moves on)."""
        missing = self._uninitialized(group)
        if not missing:
            return
        if self.persister is None:
            for topic_id, (name, partitions) in missing.items():
                add_partitions(group.initialized, topic_id, name, partitions)
            if group.group_epoch <= group.assignment_epoch:
                self._bump(group)
            return
        for topic_id, (name, partitions) in missing.items():
            add_partitions(group.initializing, topic_id, name, partitions)
        self.spawn(self._initialize(self.persister, group, group.group_epoch, missing))

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` on the event loop as a task this component owns (cancelled at shutdown)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _initialize(self, persister: ShareStatePersister, group: ShareGroup, state_epoch: int,
                          partitions: dict[uuid.UUID, tuple[str, frozenset[int]]]) -> None:
        group_id = group.group_id
        done: dict[uuid.UUID, set[int]] = {}
        for topic_id, (_, parts) in partitions.items():
            for partition in sorted(parts):
                try:
                    await persister.initialize_state(group_id, topic_id, partition, state_epoch,
                                                       UNINITIALIZED_START_OFFSET)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the persister's error: retried at a later heartbeat
                    log.warning("[GroupId %s] Failed to initialize the share state of %s-%d: %s", group_id,
                                topic_id, partition, exc)
                    continue
                done.setdefault(topic_id, set()).add(partition)
        self._initialized(group, partitions, done)

    def _initialized(self, group: ShareGroup, attempted: dict[uuid.UUID, tuple[str, frozenset[int]]],
                     done: dict[uuid.UUID, set[int]]) -> None:
        """Kafka's initializeShareGroupState completion: the initialized partitions become assignable
        (unless the group was deleted or unloaded meanwhile)."""
        group_id = group.group_id
        if self.groups.get(group_id) is not group:
            return
        change = ShareGroupChange(group, list(group.members))
        for topic_id, (name, partitions) in attempted.items():
            remove_partitions(group.initializing, topic_id, partitions)
            if done.get(topic_id):
                add_partitions(group.initialized, topic_id, name, frozenset(done[topic_id]))
        if done:
            self._bump(group)
            self._update_target_assignment(group)
        self.records.write(group_id, change.records(group))

    async def delete_state(self, group: ShareGroup) -> ErrorCode:
        """Kafka's deleteShareGroups: the durable state of every share partition the group initialized (or
        began to); the first failure's error, which the group's deletion answers."""
        persister = self.persister
        if persister is None:
            return ErrorCode.NO_ERROR
        partitions = [(topic_id, p) for info in (group.initialized, group.initializing)
                      for topic_id, (_, parts) in info.items() for p in sorted(parts)]
        for topic_id, partition in dict.fromkeys(partitions):
            try:
                await persister.delete_state(group.group_id, topic_id, partition)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the persister's error, with Kafka's code
                log.warning("[GroupId %s] Failed to delete the share state of %s-%d: %s", group.group_id, topic_id,
                            partition, exc)
                code = getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
                return ErrorCode(code) if code in ErrorCode._value2member_map_ else ErrorCode.UNKNOWN_SERVER_ERROR
        return ErrorCode.NO_ERROR

    # -- timers, fencing and leaving -------------------------------------------------------
    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_int(group_id, SHARE_HEARTBEAT_INTERVAL_MS, self.config.heartbeat_interval_ms)

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_int(group_id, SHARE_SESSION_TIMEOUT_MS, self.config.session_timeout_ms)

    def _group_int(self, group_id: str, name: str, default: int) -> int:
        value = self.group_configs.get(group_id).get(name)
        try:
            return default if value is None else int(value)
        except ValueError:
            return default

    def _schedule_session(self, group: ShareGroup, member: ShareGroupMember) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.timeouts.schedule_session(group_id, member_id, self.session_timeout_ms(group_id),
                                       lambda: self._session_expired(group_id, member_id))

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            log.info("[GroupId %s] Member %s fenced from the group because its session expired.", group_id, member_id)
            self.records.write(group_id, self._fence(group, member_id))

    def _fence(self, group: ShareGroup, member_id: str) -> KeyValues:
        self.timeouts.cancel_member(group.group_id, member_id)
        change = ShareGroupChange(group, [member_id])
        if group.members.pop(member_id, None) is None:
            return []
        group.target.pop(member_id, None)
        group.subscription_metadata = self._subscription_metadata(group.subscribed_topic_names())
        self._bump(group)
        return change.records(group)

    def _leave(self, request: ShareGroupHeartbeatRequest) -> tuple[ShareGroupHeartbeatResult, KeyValues]:
        group = self.groups.get(request.group_id)
        if group is None:
            message = (f"Group {request.group_id} is not a share group." if self.other_group(request.group_id)
                       else f"Share group {request.group_id} not found.")
            raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND, message)
        if request.member_id not in group.members:
            raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {request.member_id} is not a member of group {group.group_id}.")
        log.info("[GroupId %s] Member %s left the share group.", group.group_id, request.member_id)
        records = self._fence(group, request.member_id)
        return ShareGroupHeartbeatResult(member_id=request.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH), records

    # -- the coordinator's other duties towards these groups ----------------------------------
    def delete_group(self, group_id: str) -> None:
        """Forget the group and write its tombstones (DeleteGroups)."""
        group = self.groups.pop(group_id, None)
        self.timeouts.cancel_group(group_id)
        if group is not None:
            self.records.write(group_id, share_group_tombstones(group))

    def load_groups(self, loaded: dict[str, LoadedShareGroup]) -> None:
        """A ``__consumer_offsets`` partition was loaded: its share groups come back as their records left
        them; each member's session starts anew, and partitions left initializing are initialized again."""
        for group_id, records in loaded.items():
            self.timeouts.cancel_group(group_id)
            group = rebuild_share_group(group_id, records)
            group.initializing.clear()
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_session(group, member)
            log.info("[GroupId %s] Loaded share group at epoch %d with %d member(s).", group_id,
                     group.group_epoch, len(group.members))

    def unload_partition(self, partition: int) -> None:
        """Leadership of a ``__consumer_offsets`` partition left: its share groups go with it."""
        for group_id in [g for g in self.groups if self.manager.partition_for(g) == partition]:
            self.timeouts.cancel_group(group_id)
            del self.groups[group_id]

    def assignment_of(self, group_id: str, member_id: str) -> Assignment:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        return {} if member is None else member.assigned

    def shutdown(self) -> None:
        self.timeouts.shutdown()
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        self.groups.clear()
