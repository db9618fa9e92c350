"""The ``__consumer_offsets`` records of a consumer-protocol group: what a change writes, and the group they rebuild.

Kafka's GroupCoordinatorRecordHelpers for these groups. A heartbeat (or a
fencing, a leave, a deletion) changes the group in memory; :class:`GroupChange`
takes a snapshot of what it may touch before, and after it gives the records
that describe the difference, in the order Kafka writes them:

1. for each member gone: the tombstones of its current assignment, its target
   and its metadata (a member's metadata goes last, as replay expects);
2. a member's metadata when it joined or its subscription (or client) changed,
   then the tombstone of each regular expression no member uses any more and
   the resolution of each one the group refreshed;
3. the subscribed topics' metadata when they changed, then the group epoch
   when it moved;
4. every changed target of a newly computed target assignment, then the
   assignment epoch;
5. a member's current assignment (epochs, state, partitions) when it moved.

A conversion between the protocols writes whole groups: :func:`group_records`
(an upgraded group, after :func:`classic_group_tombstone`) and
:func:`group_tombstones` (a downgraded or deleted group). A member of the
classic protocol's metadata record carries its session timeout and protocols.

:func:`rebuild_group` turns what the loader replayed (``LoadedConsumerGroup``)
back into the group, so its members go on with the epochs and partitions
they had (and a classic member with its protocols and session timeout).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import TypeVar

from coordinator.common.coordinator_log import APPEND_ERRORS, KeyValues
from coordinator.group.consumer_group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicInfo,
)
from coordinator.group.consumer_group_regex import ResolvedRegularExpression
from coordinator.group.group_metadata_loader import LoadedConsumerGroup
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.record_formats import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ClassicMemberMetadataValue,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    GroupMetadataKey,
    TopicMetadata,
    encode_consumer_group_key,
    encode_consumer_group_value,
    encode_group_metadata_key,
)
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)
_R = TypeVar("_R")

#: Kafka's MemberState bytes.
_STATE_BYTES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {b: s for s, b in _STATE_BYTES.items()}


def _record(record_type: int, group_id: str, value: ConsumerGroupValue | None,
            member_id: str | None = None) -> tuple[bytes, bytes | None]:
    key = encode_consumer_group_key(ConsumerGroupRecordKey(record_type, group_id, member_id))
    return key, None if value is None else encode_consumer_group_value(value)


def regex_record(group_id: str, regex: str, resolved: ResolvedRegularExpression | None) -> tuple[bytes, bytes | None]:
    """A ConsumerGroupRegularExpression record (a tombstone when ``resolved`` is None)."""
    key = encode_consumer_group_key(ConsumerGroupRecordKey(CONSUMER_GROUP_REGULAR_EXPRESSION, group_id, regex=regex))
    if resolved is None:
        return key, None
    return key, encode_consumer_group_value(ConsumerGroupRegularExpressionValue(
        tuple(sorted(resolved.topics)), resolved.version, resolved.timestamp_ms))


def _normalized(assignment: Assignment | None) -> dict[uuid.UUID, frozenset[int]]:
    return {} if assignment is None else {t: p for t, p in assignment.items() if p}


def _metadata(member: ConsumerGroupMember) -> ConsumerGroupMemberMetadataValue:
    classic = None if member.classic is None else ClassicMemberMetadataValue(member.classic.session_timeout_ms,
                                                                              member.classic.protocols)
    return ConsumerGroupMemberMetadataValue(
        member.instance_id, member.rack_id, member.client_id, member.client_host,
        member.subscribed_topic_names, member.subscribed_topic_regex, member.rebalance_timeout_ms,
        member.server_assignor, classic)


def _current(member: ConsumerGroupMember) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(
        member.member_epoch, member.previous_member_epoch, _STATE_BYTES[member.state],
        _normalized(member.assigned), _normalized(member.revoking))


def member_tombstones(group_id: str, member_id: str) -> KeyValues:
    """A member leaves: its current assignment, its target, then its metadata."""
    return [_record(t, group_id, None, member_id) for t in (
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        CONSUMER_GROUP_MEMBER_METADATA)]


def group_tombstones(group: ConsumerGroup) -> KeyValues:
    """The group is deleted (or becomes a classic group), in Kafka's order: every member's current assignment,
    every member's target, the assignment epoch, every member's metadata, the resolved regular expressions, the subscribed topics' metadata,
    and the group's epoch last (its tombstone removes the group on replay)."""
    gid = group.group_id
    member_ids = list(group.members) + [m for m in group.target if m not in group.members]
    records = [_record(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, None, m) for m in member_ids]
    records += [_record(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, None, m) for m in member_ids]
    records.append(_record(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid, None))
    records += [_record(CONSUMER_GROUP_MEMBER_METADATA, gid, None, m) for m in member_ids]
    records += [regex_record(gid, regex, None) for regex in sorted(group.resolved_regexes)]
    records += [_record(t, gid, None) for t in (CONSUMER_GROUP_PARTITION_METADATA, CONSUMER_GROUP_METADATA)]
    return records


def group_records(group: ConsumerGroup) -> KeyValues:
    """A group converted from a classic group, whole, in Kafka's order (its createConsumerGroupRecords): every
    member's metadata, the group epoch, every member's target, the assignment epoch (the group epoch), every
    member's current assignment."""
    gid = group.group_id
    records = [_record(CONSUMER_GROUP_MEMBER_METADATA, gid, _metadata(m), m.member_id) for m in group.members.values()]
    records.append(_record(CONSUMER_GROUP_METADATA, gid, ConsumerGroupMetadataValue(group.group_epoch)))
    records += [_record(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, ConsumerGroupTargetAssignmentMemberValue(
        _normalized(group.target.get(m))), m) for m in group.members]
    records.append(_record(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid,
                           ConsumerGroupTargetAssignmentMetadataValue(group.group_epoch)))
    records += [_record(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, _current(m), m.member_id)
                for m in group.members.values()]
    return records


def classic_group_tombstone(group_id: str) -> tuple[bytes, bytes | None]:
    """The classic group's GroupMetadata tombstone: the group is no longer classic (its offsets stay)."""
    return encode_group_metadata_key(GroupMetadataKey(group_id)), None


def _partition_metadata(metadata: dict[str, TopicInfo]) -> ConsumerGroupPartitionMetadataValue:
    return ConsumerGroupPartitionMetadataValue(tuple(
        TopicMetadata(info.topic_id, name, info.num_partitions) for name, info in sorted(metadata.items())))


class GroupChange:
    """What a change of ``group`` touching the members ``member_ids`` writes (see the module's docstring)."""

    def __init__(self, group: ConsumerGroup, member_ids: Iterable[str | None]) -> None:
        ids = [m for m in dict.fromkeys(member_ids) if m is not None]
        self.group_epoch = group.group_epoch
        self.assignment_epoch = group.assignment_epoch
        self.subscription_metadata = group.subscription_metadata
        self.members = {m: group.members.get(m) for m in ids}
        self.targets = {m: self._target_of(group.target, m) for m in ids}
        #: The target before: the assignor replaces it whole, so it still holds the other members' old targets.
        self.target = group.target
        self.resolved_regexes = dict(group.resolved_regexes)

    def records(self, group: ConsumerGroup) -> KeyValues:
        gid = group.group_id
        records: KeyValues = []
        for member_id, before in self.members.items():
            if before is not None and member_id not in group.members:
                records += member_tombstones(gid, member_id)
        # A steady heartbeat leaves its member as it was: nothing of it to compare field by field.
        changed = {m: after for m, before in self.members.items()
                   if (after := group.members.get(m)) is not None and after != before}
        for member_id, after in changed.items():
            before = self.members[member_id]
            if before is None or _metadata(before) != _metadata(after):
                records.append(_record(CONSUMER_GROUP_MEMBER_METADATA, gid, _metadata(after), member_id))
        records += self._regex_records(group)
        if group.subscription_metadata != self.subscription_metadata:
            records.append(_record(CONSUMER_GROUP_PARTITION_METADATA, gid,
                                   _partition_metadata(group.subscription_metadata)))
        if group.group_epoch != self.group_epoch:
            records.append(_record(CONSUMER_GROUP_METADATA, gid, ConsumerGroupMetadataValue(group.group_epoch)))
        records += self._target_records(group)
        for member_id, after in changed.items():
            before = self.members[member_id]
            if before is None or _current(before) != _current(after):
                records.append(_record(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, _current(after), member_id))
        return records

    def _regex_records(self, group: ConsumerGroup) -> KeyValues:
        """Tombstones of the expressions dropped, then each refreshed resolution (a new object)."""
        after = group.resolved_regexes
        if not after and not self.resolved_regexes:
            return []
        records = [regex_record(group.group_id, regex, None) for regex in self.resolved_regexes if regex not in after]
        records += [regex_record(group.group_id, regex, resolved) for regex, resolved in after.items()
                    if self.resolved_regexes.get(regex) is not resolved]
        return records

    @staticmethod
    def _target_of(target: dict[str, Assignment], member_id: str) -> dict[uuid.UUID, frozenset[int]] | None:
        """The member's target (None: it has none)."""
        assignment = target.get(member_id)
        return None if assignment is None else _normalized(assignment)

    def _target_records(self, group: ConsumerGroup) -> KeyValues:
        new_assignment = group.assignment_epoch != self.assignment_epoch
        records: KeyValues = []
        candidates = list(group.target) if new_assignment else [m for m in self.members if m in group.target]
        for member_id in candidates:
            target = _normalized(group.target[member_id])
            before = self.targets[member_id] if member_id in self.targets else self._target_of(self.target, member_id)
            if before is None or target != before:
                records.append(_record(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group.group_id,
                                       ConsumerGroupTargetAssignmentMemberValue(target), member_id))
        if new_assignment:
            records.append(_record(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id,
                                   ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch)))
        return records


def rebuild_group(group_id: str, loaded: LoadedConsumerGroup) -> ConsumerGroup:
    """The group its records describe: epochs, subscribed topics, members with their current
    assignments, and the target assignment."""
    group = ConsumerGroup(group_id)
    group.group_epoch = loaded.group_epoch
    group.assignment_epoch = loaded.assignment_epoch
    if loaded.partition_metadata is not None:
        group.subscription_metadata = {t.topic_name: TopicInfo(t.topic_id, t.num_partitions)
                                       for t in loaded.partition_metadata.topics}
    for member_id, metadata in loaded.members.items():
        current = loaded.current.get(member_id)
        member = ConsumerGroupMember(
            member_id, instance_id=metadata.instance_id, rack_id=metadata.rack_id,
            rebalance_timeout_ms=metadata.rebalance_timeout_ms, client_id=metadata.client_id,
            client_host=metadata.client_host, subscribed_topic_names=tuple(sorted(set(metadata.subscribed_topic_names))),
            subscribed_topic_regex=metadata.subscribed_topic_regex or None, server_assignor=metadata.server_assignor,
            classic=_classic(metadata.classic_member_metadata))
        if current is not None:
            member = dataclasses.replace(
                member, member_epoch=current.member_epoch, previous_member_epoch=current.previous_member_epoch,
                state=_STATES.get(current.state, MemberState.STABLE), assigned=dict(current.assigned),
                revoking=dict(current.revoking))
        group.update_member(member)
    group.target = {m: dict(t) for m, t in loaded.targets.items() if m in group.members}
    group.resolved_regexes = {regex: ResolvedRegularExpression(frozenset(r.topics), r.version, r.timestamp)
                              for regex, r in loaded.resolved_regexes.items()}
    return group



def _classic(value: ClassicMemberMetadataValue | None) -> ClassicMemberMetadata | None:
    return None if value is None else ClassicMemberMetadata(value.session_timeout_ms, value.supported_protocols)


class ConsumerGroupLog:
    """Appends a consumer group's records to its ``__consumer_offsets`` partition through the
    coordinator log (the replica manager, acks=-1): the callback runs once they are in the ISR."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager

    def write(self, group_id: str, records: KeyValues, callback: Callable[[ErrorCode], None] | None = None) -> None:
        """``callback`` gets NO_ERROR or the error a request waiting for these records answers."""
        if not records:
            if callback is not None:
                callback(ErrorCode.NO_ERROR)
            return

        def done(error: ErrorCode, _offset: int | None) -> None:
            if error != ErrorCode.NO_ERROR:
                log.warning("[GroupCoordinator %d] failed to write %d record(s) of consumer group %s: %s",
                            self.manager.broker_id, len(records), group_id, error.name)
            if callback is not None:
                callback(APPEND_ERRORS.get(error, error))

        self.manager.coordinator_log.append(self.manager.partition_for(group_id), records,
                                            self.manager.scheduler.now_ms(), done)

    def answer_once_written(self, group_id: str, records: KeyValues, result: _R,
                            failed: Callable[[ErrorCode], _R]) -> asyncio.Future[_R]:
        """A request's answer: ``result`` once ``records`` are appended (at once when there are none), or
        ``failed(error)`` with the error a request waiting for them answers."""
        future: asyncio.Future[_R] = self.manager.scheduler.create_future()
        if not records:  # nothing to wait for (most heartbeats)
            future.set_result(result)
            return future

        def appended(error: ErrorCode) -> None:
            if not future.done():
                future.set_result(result if error == ErrorCode.NO_ERROR else failed(error))

        self.write(group_id, records, appended)
        return future
