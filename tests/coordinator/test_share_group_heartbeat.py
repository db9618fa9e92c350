"""Share groups (KIP-932) on a fake clock: joining, the simple assignment, epochs, errors, sessions, records."""

from __future__ import annotations

import asyncio
import json
import uuid

from coordinator.common.scheduler import ManualScheduler
from coordinator.group.consumer_group import TopicInfo
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.group.group_membership import GroupConfig
from coordinator.group.group_metadata_loader import replay
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.share_group_assignor import ShareAssignmentSpec, assign
from coordinator.group.share_group_record_formats import (
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_GROUP_STATE_PARTITION_METADATA,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    decode_share_group_key,
)
from coordinator.group.share_group_requests import (
    ShareGroupConfig,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResult,
)
from protocol.errors import ErrorCode
from tests.coordinator.fakes import MemoryCoordinatorLog, join_request

TOPIC = uuid.UUID(int=0xABC)
OTHER = uuid.UUID(int=0xDEF)


class Topics:
    def __init__(self) -> None:
        self.topics = {"t": TopicInfo(TOPIC, 1), "u": TopicInfo(OTHER, 6)}

    def describe_topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.topics.items() if i.topic_id == topic_id), None)

    def topic_names(self) -> list[str]:
        return list(self.topics)

    @property
    def version(self) -> int:
        """The tests change ``topics`` in place: any change of it is a new version."""
        return hash(frozenset(self.topics.items()))


class Harness:
    def __init__(self, log: MemoryCoordinatorLog | None = None, **config: int) -> None:
        self.clock = ManualScheduler()
        self.topics = Topics()
        self.log = log or MemoryCoordinatorLog()
        manager = GroupMetadataManager(0, self.log, self.clock)
        self.coordinator = GroupCoordinator(0, GroupConfig(group_initial_rebalance_delay_ms=0), manager, self.clock,
                                            topics=self.topics, share_config=ShareGroupConfig(**config))
        if log is None:
            self.coordinator.startup(load_partitions=range(50))
        else:  # a restart: the partitions with records are loaded here, synchronously
            self.coordinator.startup(load_partitions=[p for p in range(50) if not self.log.records.get(p)])
            for partition in [p for p in range(50) if self.log.records.get(p)]:
                self.coordinator.load_partition(partition)

    def heartbeat(self, member_id: str, epoch: int, topics: tuple[str, ...] | None = None,
                  group_id: str = "g", rack_id: str | None = None) -> ShareGroupHeartbeatResult:
        answer = self.coordinator.share_group_heartbeat(ShareGroupHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch, client_id="c", client_host="/127.0.0.1",
            rack_id=rack_id, subscribed_topic_names=topics))
        assert answer.done()
        return answer.result()

    def join(self, member_id: str, topics: tuple[str, ...] = ("t",)) -> ShareGroupHeartbeatResult:
        return self.heartbeat(member_id, 0, topics)

    def record_types(self) -> list[int]:
        types = []
        for entries in self.log.records.values():
            for _, key, _ in entries:
                share = decode_share_group_key(key)
                if share is not None:
                    types.append(share.record_type)
        return types


def test_one_partition_is_shared_by_every_member() -> None:
    h = Harness()
    a = h.join("a")
    assert a.error == ErrorCode.NO_ERROR
    assert (a.member_id, a.member_epoch, a.heartbeat_interval_ms) == ("a", 1, 5000)
    assert a.assignment == {TOPIC: frozenset({0})}
    b = h.join("b")
    c = h.join("c")
    assert b.assignment == c.assignment == {TOPIC: frozenset({0})}
    # A steady heartbeat of the first member: no new assignment for it, same epoch as the group's.
    again = h.heartbeat("a", a.member_epoch)
    assert again.member_epoch == c.member_epoch and again.assignment is None


def test_partitions_are_balanced_and_sticky() -> None:
    h = Harness()
    a = h.join("a", ("u",))
    assert a.assignment == {OTHER: frozenset(range(6))}
    b = h.join("b", ("u",))
    assert b.assignment is not None
    moved = h.heartbeat("a", a.member_epoch)
    assert moved.assignment is not None
    assert len(moved.assignment[OTHER]) == len(b.assignment[OTHER]) == 3
    assert moved.assignment[OTHER] | b.assignment[OTHER] == frozenset(range(6))


def test_simple_assignor_shares_partitions_when_members_outnumber_them() -> None:
    members = {m: frozenset({TOPIC}) for m in "abcde"}
    target = assign(ShareAssignmentSpec(members, {TOPIC: frozenset({0, 1})}, {}))
    counts = {p: sum(p in t.get(TOPIC, ()) for t in target.values()) for p in (0, 1)}
    assert counts == {0: 3, 1: 3}  # ceil(5 / 2) members per partition
    assert all(1 <= len(t[TOPIC]) <= 2 for t in target.values())


def test_errors_as_kafka_answers() -> None:
    h = Harness(max_size=2)
    assert h.heartbeat("", 0, ("t",)).error_message == "MemberId can't be empty."
    assert h.heartbeat("a", 0).error_message == "SubscribedTopicNames must be set in first request."
    assert h.heartbeat("a", -2).error_message == "MemberEpoch is invalid."
    assert h.heartbeat("a", 0, ("t",), rack_id=" ").error == ErrorCode.INVALID_REQUEST
    assert h.heartbeat("a", 3).error == ErrorCode.GROUP_ID_NOT_FOUND
    a = h.join("a")
    unknown = h.heartbeat("z", 1)
    assert unknown.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert unknown.error_message == "Member z is not a member of group g."
    h.join("b")
    a = h.heartbeat("a", a.member_epoch)
    full = h.join("c")
    assert full.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert full.error_message == "The share group has reached its maximum capacity of 2 members."
    fenced = h.heartbeat("a", a.member_epoch + 5)
    assert fenced.error == ErrorCode.FENCED_MEMBER_EPOCH
    assert "greater member epoch" in (fenced.error_message or "")
    # The previous epoch (the answer that moved it was lost) is still accepted.
    member = h.coordinator.share_groups.groups["g"].members["a"]
    assert h.heartbeat("a", member.previous_member_epoch).error == ErrorCode.NO_ERROR
    h.heartbeat("b", -1)
    moved = h.heartbeat("a", member.member_epoch)
    assert moved.member_epoch == member.member_epoch + 1
    smaller = h.heartbeat("a", member.previous_member_epoch)
    assert smaller.error == ErrorCode.FENCED_MEMBER_EPOCH and "smaller member epoch" in (smaller.error_message or "")


def test_leave_and_session_expiry_fence_the_member() -> None:
    h = Harness()
    a = h.join("a", ("u",))
    h.join("b", ("u",))
    a = h.heartbeat("a", a.member_epoch)
    assert a.assignment is not None and len(a.assignment[OTHER]) == 3
    left = h.heartbeat("b", -1)
    assert (left.error, left.member_id, left.member_epoch) == (ErrorCode.NO_ERROR, "b", -1)
    assert h.heartbeat("b", -1).error == ErrorCode.UNKNOWN_MEMBER_ID
    a = h.heartbeat("a", a.member_epoch)
    assert a.assignment == {OTHER: frozenset(range(6))}
    h.clock.advance(44_999)
    assert "a" in h.coordinator.share_groups.groups["g"].members
    h.clock.advance(1)
    group = h.coordinator.share_groups.groups["g"]
    assert not group.members and str(group.state) == "Empty"
    assert h.heartbeat("a", a.member_epoch).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_group_of_another_type_is_not_a_share_group() -> None:
    h = Harness()
    from coordinator.group.consumer_group_requests import ConsumerGroupHeartbeatRequest
    h.coordinator.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group_id="cg", member_id="m", member_epoch=0, client_id="c", client_host="/h",
        rebalance_timeout_ms=1000, subscribed_topic_names=("t",), owned={}))
    answer = h.heartbeat("a", 0, ("t",), group_id="cg")
    assert (answer.error, answer.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")
    # And the other way round: the share group is neither a consumer group nor a classic one.
    h.join("a")
    consumer = h.coordinator.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, client_id="c", client_host="/h",
        rebalance_timeout_ms=1000, subscribed_topic_names=("t",), owned={})).result()
    assert (consumer.error, consumer.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
    joined = h.coordinator.join_group(join_request("g")).result()
    assert joined.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_describe_list_delete() -> None:
    h = Harness()
    h.join("a")
    [described] = h.coordinator.share_group_describe(["g"])
    assert described.group is not None and described.assignor_name == "simple"
    assert described.group.group_epoch == described.group.assignment_epoch == 1
    [missing] = h.coordinator.share_group_describe(["nope"])
    assert (missing.error, missing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert [g.group_id for g in h.coordinator.list_share_groups(set())] == ["g"]
    assert h.coordinator.list_share_groups({"empty"}) == []
    assert h.coordinator.handle_describe_group("g") == (ErrorCode.NO_ERROR, None)
    answers: dict[str, ErrorCode] = {}
    h.coordinator.handle_delete_groups(["g"], answers.update)
    assert answers == {"g": ErrorCode.NON_EMPTY_GROUP}
    h.heartbeat("a", -1)
    h.coordinator.handle_delete_groups(["g"], answers.update)
    assert answers == {"g": ErrorCode.NO_ERROR}
    assert "g" not in h.coordinator.share_groups.groups
    reloaded = Harness(h.log)
    assert "g" not in reloaded.coordinator.share_groups.groups


def test_records_are_written_and_reloaded() -> None:
    h = Harness()
    a = h.join("a", ("u",))
    b = h.join("b", ("u",))
    a2 = h.heartbeat("a", a.member_epoch)
    types = set(h.record_types())
    assert {SHARE_GROUP_METADATA, SHARE_GROUP_MEMBER_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
            SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
            SHARE_GROUP_STATE_PARTITION_METADATA} <= types
    partition = h.coordinator.manager.partition_for("g")
    loaded = replay(h.coordinator.coordinator_log.read_entries(partition), partition, 0).share_groups["g"]
    assert set(loaded.members) == {"a", "b"}
    reloaded = Harness(h.log)
    group = reloaded.coordinator.share_groups.groups["g"]
    before = h.coordinator.share_groups.groups["g"]
    assert (group.group_epoch, group.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert group.members == before.members and group.initialized == before.initialized
    assert group.target == {m: dict(t) for m, t in before.target.items()}
    # Members go on with their epochs; their sessions started anew.
    assert reloaded.heartbeat("b", b.member_epoch).error == ErrorCode.NO_ERROR
    assert reloaded.heartbeat("a", a2.member_epoch).error == ErrorCode.NO_ERROR
    reloaded.clock.advance(45_000)
    assert not reloaded.coordinator.share_groups.groups["g"].members


class PersisterError(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__("failed")
        self.error_code = error_code


class FakePersister:
    """An in-memory stand-in for the Persister's two calls the group coordinator makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, uuid.UUID, int, int, int]] = []
        self.deleted: list[tuple[str, uuid.UUID, int]] = []
        self.release = asyncio.Event()
        self.fail_delete_with: int | None = None

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> None:
        await self.release.wait()
        self.calls.append((group_id, topic_id, partition, state_epoch, start_offset))

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        if self.fail_delete_with is not None:
            raise PersisterError(self.fail_delete_with)
        self.deleted.append((group_id, topic_id, partition))


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def test_partitions_are_assigned_once_their_share_state_is_initialized() -> None:
    async def run() -> None:
        h = Harness()
        persister = FakePersister()
        h.coordinator.share_groups.persister = persister
        a = h.join("a")
        assert a.assignment == {}  # nothing initialized yet
        assert h.coordinator.share_groups.groups["g"].is_initializing(TOPIC, 0)
        persister.release.set()
        await _settle()
        assert persister.calls == [("g", TOPIC, 0, 1, -1)]
        group = h.coordinator.share_groups.groups["g"]
        assert group.is_initialized(TOPIC, 0) and not group.initializing
        moved = h.heartbeat("a", a.member_epoch)
        assert moved.assignment == {TOPIC: frozenset({0})} and moved.member_epoch > a.member_epoch
        h.coordinator.shutdown_timers()

    asyncio.run(run())


def test_deleting_a_group_deletes_its_share_state_first() -> None:
    async def run() -> None:
        h = Harness()
        persister = FakePersister()
        persister.release.set()
        h.coordinator.share_groups.persister = persister
        a = h.join("a", ("u",))
        await _settle()
        h.heartbeat("a", a.member_epoch)
        h.heartbeat("a", -1)
        persister.fail_delete_with = ErrorCode.COORDINATOR_NOT_AVAILABLE
        answers: asyncio.Future[dict[str, ErrorCode]] = asyncio.get_running_loop().create_future()
        h.coordinator.handle_delete_groups(["g"], answers.set_result)
        assert await answers == {"g": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        assert "g" in h.coordinator.share_groups.groups
        persister.fail_delete_with = None
        answers = asyncio.get_running_loop().create_future()
        h.coordinator.handle_delete_groups(["g"], answers.set_result)
        assert await answers == {"g": ErrorCode.NO_ERROR}
        assert sorted(p for _, _, p in persister.deleted) == list(range(6))
        assert "g" not in h.coordinator.share_groups.groups
        h.coordinator.shutdown_timers()

    asyncio.run(run())


def test_group_configs_set_the_session_and_heartbeat_interval() -> None:
    h = Harness()
    h.coordinator.share_groups.group_configs.replace("g", {"share.session.timeout.ms": "50000",
                                                           "share.heartbeat.interval.ms": "7000"})
    assert h.join("a").heartbeat_interval_ms == 7000
    h.clock.advance(49_999)
    assert "a" in h.coordinator.share_groups.groups["g"].members
    h.clock.advance(1)
    assert not h.coordinator.share_groups.groups["g"].members


def test_dump_log_decodes_the_share_group_records() -> None:
    from tools.offsets_decoder import decode_record
    h = Harness()
    h.join("a", ("u",))
    h.heartbeat("a", -1)
    printed = [decode_record(offset, key, value) for entries in h.log.records.values()
               for offset, key, value in entries]
    assert not [k for k, _ in printed if k.startswith(("Unknown", "Error"))]
    keys = [json.loads(k) for k, _ in printed]
    assert {k["type"] for k in keys} == {"9", "10", "11", "12", "13", "14", "15"}
    member = next(json.loads(v) for k, v in printed if v and json.loads(k)["type"] == "10")
    assert member == {"version": "0", "data": {"rackId": None, "clientId": "c", "clientHost": "/127.0.0.1",
                                               "subscribedTopicNames": ["u"]}}
    assert ("<DELETE>" in [v for _, v in printed])
