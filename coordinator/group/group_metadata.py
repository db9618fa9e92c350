"""GroupMetadata and MemberMetadata: one classic group's state, as Kafka keeps it.

The state machine (Kafka's GroupState)::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                 ▲    │                                        │ leader's SyncGroup stored
      │                 │    └──no members left──▶ Empty               ▼
      │                 └────────join / leave / member expired──── Stable
    Dead ◀── any state when the group is deleted or its offsets expire

This module holds data and the transitions' bookkeeping only; the protocol
logic that drives it is in ``group_rebalance`` (timers) and
``group_membership`` (requests), parts of ``group_coordinator``. A member's
parked JoinGroup or SyncGroup is an ``asyncio.Future`` here, completed once.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    subscribed_topics,
)
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_PROTOCOL = ""
NO_LEADER = ""


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


@dataclass(slots=True)
class JoinGroupResult:
    """What a JoinGroup waiter is told (Kafka's JoinGroupResult)."""

    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    skip_assignment: bool = False
    #: (member id, group instance id, metadata) for the leader; empty for followers.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


_R = TypeVar("_R")

#: A JoinGroup or SyncGroup parked until the rebalance gets far enough: the coordinator completes it,
#: the broker's handler awaits it.
JoinFuture = asyncio.Future[JoinGroupResult]
SyncFuture = asyncio.Future[SyncGroupResult]


def complete(future: asyncio.Future[_R], result: _R) -> None:
    """Answer a parked request; one whose handler is gone (its connection closed) has been cancelled."""
    if not future.done():
        future.set_result(result)


class MemberMetadata:
    """One member: its protocols, timeouts, assignment and the requests it has parked."""

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 supported_protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = b""
        self.awaiting_join: JoinFuture | None = None
        self.awaiting_sync: SyncFuture | None = None
        #: Set until the member's first JoinGroup completes: a new member that
        #: never completes a join is expired (Kafka's NewMemberJoinTimeoutMs).
        self.is_new = False

    def __repr__(self) -> str:
        return f"MemberMetadata({self.member_id!r}, instance={self.group_instance_id!r})"

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocols(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Iterable[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata, in the same order."""
        return self.supported_protocols == list(protocols)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(slots=True)
class CommitRecordMetadataAndOffset:
    """A committed offset and the __consumer_offsets offset of the record that holds it."""

    appended_batch_offset: int | None
    offset_and_metadata: OffsetAndMetadata


TopicPartition = tuple[str, int]


class GroupMetadata:
    """A classic group: members, generation, the selected protocol, committed offsets."""

    def __init__(self, group_id: str, state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp: int | None = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # KIP-394: ids handed out, not yet joined
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.offsets: dict[TopicPartition, CommitRecordMetadataAndOffset] = {}
        self.pending_offset_commits: dict[TopicPartition, int] = {}  # in-flight appends per partition
        #: Offsets committed inside a producer's transaction (TxnOffsetCommit), by producer id: written
        #: to the log, visible only once the transaction's COMMIT marker is (dropped by ABORT).
        self.pending_txn_offset_commits: dict[int, dict[TopicPartition, CommitRecordMetadataAndOffset]] = {}

    def __repr__(self) -> str:
        return f"GroupMetadata({self.group_id!r}, {self.state}, generation={self.generation_id})"

    # -- state ----------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalGroupStateError(
                f"Group {self.group_id} should be in one of {sorted(map(str, _VALID_PREVIOUS[state]))} "
                f"before moving to {state}, but is {self.state}")
        self.state = state
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # -- members --------------------------------------------------------------
    @property
    def is_empty(self) -> bool:
        return not self.members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def leader_or_empty(self) -> str:
        return self.leader_id or NO_LEADER

    def add(self, member: MemberMetadata, future: JoinFuture | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocols())
        if member.is_static:
            self.static_members[member.group_instance_id] = member.member_id  # type: ignore[index]
        member.awaiting_join = future
        if future is not None:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.supported_protocols.subtract(member.protocols())
        self.supported_protocols += Counter()  # drop zero counts
        if member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        if member.is_static and self.static_members.get(member.group_instance_id) == member_id:  # type: ignore[arg-type]
            del self.static_members[member.group_instance_id]  # type: ignore[arg-type]
        self.pending_sync_members.discard(member_id)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, future: JoinFuture | None) -> None:
        self.supported_protocols.subtract(member.protocols())
        self.supported_protocols += Counter()
        self.supported_protocols.update(name for name, _ in protocols)
        member.supported_protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if future is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif future is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        previous = member.awaiting_join
        member.awaiting_join = future
        if previous is not None and future is not None:
            # A second JoinGroup for the same member (a client that retried on a
            # new connection): the earlier request's reader is gone or will retry.
            complete(previous, JoinGroupResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))

    def maybe_complete_join(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        """Answer the member's parked JoinGroup, if it has one."""
        future = member.awaiting_join
        if future is not None:
            member.awaiting_join = None
            self.num_members_awaiting_join -= 1
            complete(future, result)

    def maybe_complete_sync(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        """Answer the member's parked SyncGroup, if it has one."""
        future = member.awaiting_sync
        if future is None:
            return False
        member.awaiting_sync = None
        complete(future, result)
        return True

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False when none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_static_members(self) -> list[str]:
        return list(self.static_members)

    # -- static membership (KIP-345) -------------------------------------------
    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """An instance id mapped to a different member id: the caller is a zombie."""
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        member = self.members.pop(old_member_id)
        # Fence the old incarnation at once if it has a request parked.
        self.maybe_complete_join(member, JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        self.maybe_complete_sync(member, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    # -- protocols --------------------------------------------------------------
    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = list(protocols)
        if self.is_empty:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in names)

    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == size}

    def select_protocol(self) -> str:
        """The protocol with most first-preference votes among those all members support.

        Ties go to the protocol first preferred by the earliest member, so the
        choice is deterministic.
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupStateError(f"no protocol is supported by all members of {self.group_id}")
        votes: Counter[str] = Counter()
        order: dict[str, int] = {}
        for index, member in enumerate(self.members.values()):
            choice = member.vote(candidates)
            votes[choice] += 1
            order.setdefault(choice, index)
        return max(votes, key=lambda name: (votes[name], -order[name]))

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.protocol_name is None:
            raise IllegalGroupStateError(f"no protocol selected for {self.group_id}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def _compute_subscribed_topics(self) -> set[str] | None:
        """Consumer groups' subscriptions (None when unknown: then every topic counts as subscribed)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscribed_topics(member.metadata(self.protocol_name))
        except (ConsumerProtocolError, KeyError):
            log.warning("cannot read the subscriptions of group %s", self.group_id)
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    # -- offsets ------------------------------------------------------------------
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits) or bool(self.pending_txn_offset_commits)

    def has_pending_offset_commits_for(self, tp: TopicPartition) -> bool:
        """A commit of ``tp`` not yet settled: in flight, or in an open transaction (what
        OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for)."""
        return tp in self.pending_offset_commits or any(
            tp in pending for pending in self.pending_txn_offset_commits.values())

    def prepare_offset_commit(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.pending_offset_commits[tp] = self.pending_offset_commits.get(tp, 0) + 1

    def _finish_pending(self, tp: TopicPartition) -> None:
        count = self.pending_offset_commits.get(tp, 0)
        if count <= 1:
            self.pending_offset_commits.pop(tp, None)
        else:
            self.pending_offset_commits[tp] = count - 1

    def on_offset_commit_append(self, tp: TopicPartition, committed: CommitRecordMetadataAndOffset) -> None:
        """A commit is in the log: it becomes visible unless a later record already is."""
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if (current is None or current.appended_batch_offset is None
                    or committed.appended_batch_offset is None
                    or current.appended_batch_offset < committed.appended_batch_offset):
                self.offsets[tp] = committed
        self._finish_pending(tp)

    def fail_pending_offset_write(self, tp: TopicPartition) -> None:
        self._finish_pending(tp)

    # -- transactional offsets (Kafka's pendingTransactionalOffsetCommits) -----------
    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        pending = self.pending_txn_offset_commits.setdefault(producer_id, {})
        for tp, om in offsets.items():
            # The batch offset is learnt when the append completes.
            pending[tp] = CommitRecordMetadataAndOffset(None, om)

    def on_txn_offset_commit_append(self, producer_id: int, tp: TopicPartition,
                                    committed: CommitRecordMetadataAndOffset) -> None:
        """The append of a transactional commit completed: remember where it is in the log,
        unless a later commit of the same transaction replaced it meanwhile."""
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None and tp in pending and (
                pending[tp].offset_and_metadata is committed.offset_and_metadata):
            pending[tp] = committed

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: TopicPartition) -> None:
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None:
            pending.pop(tp, None)
            if not pending:
                del self.pending_txn_offset_commits[producer_id]

    def has_pending_offset_commits_from(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn_offset_commits

    def complete_pending_txn_offset_commit(self, producer_id: int, is_commit: bool) -> None:
        """The producer's transaction ended. COMMIT makes its offsets visible, each unless a
        commit appended after it already is (the log's order decides, as a reload would);
        ABORT drops them."""
        pending = self.pending_txn_offset_commits.pop(producer_id, None)
        if not is_commit or pending is None:
            return
        for tp, committed in pending.items():
            if committed.appended_batch_offset is None:
                continue  # its append never completed: it is not in the log the marker ended
            current = self.offsets.get(tp)
            if (current is None or current.appended_batch_offset is None
                    or current.appended_batch_offset < committed.appended_batch_offset):
                self.offsets[tp] = committed

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        removed = []
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            for producer_id, pending in list(self.pending_txn_offset_commits.items()):
                pending.pop(tp, None)
                if not pending:
                    del self.pending_txn_offset_commits[producer_id]
            if self.offsets.pop(tp, None) is not None:
                removed.append(tp)
        return removed

    def remove_all_offsets(self) -> list[TopicPartition]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Kafka's expiry rules (KIP-211): an offset expires retention_ms after the group
        went Empty, or after its commit for a stable consumer group not subscribed to
        its topic, or after its commit for a group without members ever (simple consumers).
        Commits with an explicit expire timestamp (OffsetCommit v2-v4) expire at it."""
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            state_ts = self.current_state_timestamp
            return self._expire(now_ms, retention_ms, lambda o: state_ts if state_ts is not None else o.commit_timestamp)
        if self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None and self.is_(GroupState.STABLE):
            return self._expire(now_ms, retention_ms, lambda o: o.commit_timestamp, self.subscribed_topics)
        if self.protocol_type is None:
            return self._expire(now_ms, retention_ms, lambda o: o.commit_timestamp)
        return []

    def _expire(self, now_ms: int, retention_ms: int, base: Callable[[OffsetAndMetadata], int],
                subscribed: set[str] = frozenset()) -> list[TopicPartition]:  # type: ignore[assignment]
        expired = []
        for tp, entry in self.offsets.items():
            if tp[0] in subscribed or tp in self.pending_offset_commits:
                continue
            om = entry.offset_and_metadata
            if om.expire_timestamp >= 0:
                due = now_ms >= om.expire_timestamp
            else:
                due = now_ms - base(om) >= retention_ms
            if due:
                expired.append(tp)
        for tp in expired:
            del self.offsets[tp]
        return expired


class IllegalGroupStateError(RuntimeError):
    """A transition Kafka forbids: a bug in the coordinator, never a client's fault."""
