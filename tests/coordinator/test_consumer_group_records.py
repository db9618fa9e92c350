"""The consumer group's __consumer_offsets records: Kafka's byte layout (built by hand from the schemas),
their replay, and a coordinator rebuilt from them that carries the group on."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from coordinator.common.coordinator_log import RecordEntry
from coordinator.common.partitioner import partition_for
from coordinator.common.scheduler import ManualScheduler
from coordinator.group.consumer_group import MemberState
from coordinator.group.consumer_group_requests import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResult
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.group.group_membership import GroupConfig
from coordinator.group.group_metadata import OffsetAndMetadata
from coordinator.group.group_metadata_loader import replay
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.record_formats import (
    ClassicMemberMetadataValue,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    OffsetCommitKey,
    TopicMetadata,
    decode_consumer_group_value,
    decode_key,
    encode_consumer_group_key,
    encode_consumer_group_value,
)
from protocol.errors import CorruptRecordError, ErrorCode
from pytest_pafka.waiting import wait_until_async
from tests.coordinator.fakes import MemoryCoordinatorLog
from tests.coordinator.test_consumer_group_heartbeat import TOPIC, Harness, Member, Topics, settle
from tests.coordinator.test_coordinator_leadership import WAIT_S, LedLog

T1 = uuid.UUID("00000000-0000-0001-0000-000000000002")
T2 = uuid.UUID(int=0xFF)


def compact(s: str | None) -> bytes:
    """A compact string: its length + 1 as an unsigned varint (all below 127 here), then UTF-8."""
    return b"\x00" if s is None else bytes([len(s.encode()) + 1]) + s.encode()


def i32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


NO_TAGS = b"\x00"


@pytest.mark.parametrize(("key", "data"), [
    (ConsumerGroupRecordKey(3, "grp"), b"\x00\x03\x00\x03grp"),
    (ConsumerGroupRecordKey(4, "grp"), b"\x00\x04\x00\x03grp"),
    (ConsumerGroupRecordKey(5, "grp", "m-1"), b"\x00\x05\x00\x03grp\x00\x03m-1"),
    (ConsumerGroupRecordKey(6, "grp"), b"\x00\x06\x00\x03grp"),
    (ConsumerGroupRecordKey(7, "grp", "m-1"), b"\x00\x07\x00\x03grp\x00\x03m-1"),
    (ConsumerGroupRecordKey(8, "grp", "m-1"), b"\x00\x08\x00\x03grp\x00\x03m-1"),
])
def test_keys_are_the_record_type_then_plain_strings(key: ConsumerGroupRecordKey, data: bytes) -> None:
    assert encode_consumer_group_key(key) == data
    assert decode_key(data) == key


def _topic_partitions(*topics: tuple[uuid.UUID, list[int]]) -> bytes:
    out = bytes([len(topics) + 1])
    for topic_id, partitions in topics:
        out += topic_id.bytes + bytes([len(partitions) + 1]) + i32(*partitions) + NO_TAGS
    return out


VALUES: list[tuple[int, ConsumerGroupValue, bytes]] = [
    (3, ConsumerGroupMetadataValue(7), b"\x00\x00" + i32(7) + NO_TAGS),
    (4, ConsumerGroupPartitionMetadataValue((TopicMetadata(T1, "orders", 12), TopicMetadata(T2, "b", 3, (
        (0, ("r1", "r2")),)))),
     b"\x00\x00" + b"\x03"
     + T1.bytes + compact("orders") + i32(12) + b"\x01" + NO_TAGS
     + T2.bytes + compact("b") + i32(3) + b"\x02" + i32(0) + b"\x03" + compact("r1") + compact("r2") + NO_TAGS
     + NO_TAGS
     + NO_TAGS),
    (5, ConsumerGroupMemberMetadataValue("inst", None, "client", "/10.0.0.1", ("a", "b"), None, 30000, "uniform"),
     b"\x00\x00" + compact("inst") + compact(None) + compact("client") + compact("/10.0.0.1")
     + b"\x03" + compact("a") + compact("b") + compact(None) + i32(30000) + compact("uniform") + NO_TAGS),
    # A classic member: ClassicMemberMetadata is tagged field 0, a nullable struct (its presence marker 1 is
    # counted in its size): session timeout, then each protocol's name and metadata (compact bytes).
    (5, ConsumerGroupMemberMetadataValue(None, None, "c", "/h", ("a",), None, 300, None, ClassicMemberMetadataValue(
        45000, (("range", b"\x00\x03"), ("roundrobin", b"")))),
     b"\x00\x00" + compact(None) + compact(None) + compact("c") + compact("/h") + b"\x02" + compact("a")
     + compact(None) + i32(300) + compact(None)
     + b"\x01" + b"\x00" + bytes([1 + 4 + 1 + 6 + 3 + 1 + 11 + 1 + 1 + 1]) + b"\x01"
     + i32(45000) + b"\x03" + compact("range") + b"\x03\x00\x03" + NO_TAGS + compact("roundrobin") + b"\x01"
     + NO_TAGS + NO_TAGS),
    (6, ConsumerGroupTargetAssignmentMetadataValue(4), b"\x00\x00" + i32(4) + NO_TAGS),
    (7, ConsumerGroupTargetAssignmentMemberValue({T1: frozenset({2, 0, 1})}),
     b"\x00\x00" + _topic_partitions((T1, [0, 1, 2])) + NO_TAGS),
    (8, ConsumerGroupCurrentMemberAssignmentValue(5, 4, 1, {T2: frozenset({3}), T1: frozenset({0})}, {T1: frozenset({1})}),
     b"\x00\x00" + i32(5, 4) + b"\x01" + _topic_partitions((T2, [3]), (T1, [0])) + _topic_partitions((T1, [1]))
     + NO_TAGS),
]


@pytest.mark.parametrize(("record_type", "value", "data"), VALUES)
def test_values_are_version_0_in_the_flexible_encoding(record_type: int, value: ConsumerGroupValue,
                                                       data: bytes) -> None:
    assert encode_consumer_group_value(value) == data
    assert decode_consumer_group_value(record_type, data) == value


def test_a_later_kafkas_tagged_fields_are_skipped_and_an_unknown_version_is_corrupt() -> None:
    # ConsumerGroupMetadataValue with MetadataHash (tag 0, an int64), as Kafka 4.1 writes it.
    tagged = b"\x00\x00" + i32(9) + b"\x01" + b"\x00\x08" + struct.pack(">q", 1234)
    assert decode_consumer_group_value(3, tagged) == ConsumerGroupMetadataValue(9)
    with pytest.raises(CorruptRecordError):
        decode_consumer_group_value(3, b"\x00\x01" + i32(9) + NO_TAGS)


def _entries(records: list[tuple[bytes, bytes | None]]) -> list[RecordEntry]:
    return [RecordEntry(i, k, v) for i, (k, v) in enumerate(records)]


def _key(record_type: int, member: str | None = None) -> bytes:
    return encode_consumer_group_key(ConsumerGroupRecordKey(record_type, "g", member))


def test_replay_keeps_the_latest_value_of_each_key_and_tombstones_remove() -> None:
    records: list[tuple[bytes, bytes | None]] = [
        (_key(5, "m"), encode_consumer_group_value(VALUES[2][1])),
        (_key(5, "n"), encode_consumer_group_value(VALUES[2][1])),
        (_key(3), encode_consumer_group_value(ConsumerGroupMetadataValue(1))),
        (_key(7, "m"), encode_consumer_group_value(ConsumerGroupTargetAssignmentMemberValue({T1: frozenset({0})}))),
        (_key(6), encode_consumer_group_value(ConsumerGroupTargetAssignmentMetadataValue(1))),
        (_key(8, "m"), encode_consumer_group_value(ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, {}, {}))),
        (_key(3), encode_consumer_group_value(ConsumerGroupMetadataValue(2))),
        (_key(8, "n"), None), (_key(7, "n"), None), (_key(5, "n"), None),
    ]
    loaded = replay(_entries(records), 0, 0).consumer_groups["g"]
    assert (loaded.group_epoch, loaded.assignment_epoch) == (2, 1)
    assert set(loaded.members) == {"m"} and loaded.targets == {"m": {T1: frozenset({0})}}
    assert loaded.current["m"].member_epoch == 1
    # The group's metadata tombstone deletes it; an offset of the same group stays.
    records += [(_key(8, "m"), None), (_key(7, "m"), None), (_key(5, "m"), None), (_key(6), None), (_key(4), None),
                (_key(3), None)]
    gone = replay(_entries(records), 0, 0)
    assert "g" not in gone.consumer_groups and decode_key(_key(3)) == ConsumerGroupRecordKey(3, "g")
    assert not isinstance(decode_key(_key(3)), OffsetCommitKey)


def _reloaded(h: Harness) -> Harness:
    """A new coordinator on the same log and clock, loading every partition as at start-up; the old
    one stops (its timers no longer fire)."""
    h.coordinator.shutdown_timers()
    log = h.coordinator.manager.coordinator_log
    assert isinstance(log, MemoryCoordinatorLog)
    fresh = Harness.__new__(Harness)
    fresh.clock, fresh.topics = h.clock, h.topics
    manager = GroupMetadataManager(0, log, h.clock)
    fresh.coordinator = GroupCoordinator(0, GroupConfig(group_initial_rebalance_delay_ms=0), manager, h.clock,
                                         consumer_config=h.coordinator.consumer_groups.config, topics=h.topics)
    empty = [p for p in range(log.num_partitions) if not log.log_end_offset(p)]
    fresh.coordinator.startup(load_partitions=empty)
    for partition in range(log.num_partitions):
        if log.log_end_offset(partition):
            fresh.coordinator.load_partition(partition)
    return fresh


def _group_state(h: Harness) -> tuple[object, ...]:
    g = h.group
    return (g.group_epoch, g.assignment_epoch, dict(g.subscription_metadata), dict(g.members),
            {m: dict(t) for m, t in g.target.items()}, dict(g.partition_owners), dict(g.static_members))


def test_a_coordinator_rebuilt_from_the_records_continues_the_group() -> None:
    h = Harness()
    a, b = Member(h, "a"), Member(h, "b", instance_id="i-b")
    settle([a, b])
    c = Member(h, "c")
    a.beat()  # a is told to revoke: the group is mid-reconciliation when the coordinator moves
    before = _group_state(h)
    moved = _reloaded(h)
    assert _group_state(moved) == before
    assert moved.group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    # The members go on with their epochs: no FENCED_MEMBER_EPOCH, no rejoin, no partition owned twice.
    for member in (a, b, c):
        member.harness = moved
    settle([a, b, c])
    assert str(moved.group.state) == "Stable"
    assert sorted(p for m in (a, b, c) for p in m.partitions) == list(range(12))
    assert {a.epoch, b.epoch, c.epoch} == {moved.group.group_epoch}
    # A session started anew on load expires as any: the members that stop heartbeating are fenced.
    moved.clock.advance(moved.coordinator.consumer_groups.config.session_timeout_ms + 1)
    assert moved.group.members == {}


def test_leaves_fencing_and_deletion_write_tombstones_that_replay_away() -> None:
    h = Harness()
    a, b, s = Member(h, "a"), Member(h, "b"), Member(h, "s1", instance_id="i1")
    settle([a, b, s])
    assert h.heartbeat("b", -1).error == ErrorCode.NO_ERROR
    assert h.heartbeat("s1", -2, instance_id="i1").member_epoch == -2
    settle([a])
    before = _group_state(h)
    moved = _reloaded(h)
    assert set(moved.group.members) == {"a", "s1"} and moved.group.members["s1"].member_epoch == -2
    assert _group_state(moved) == before
    # The static member's next instance replaces it across the move; a's session then expires.
    s2 = Member(moved, "s2", instance_id="i1")
    assert s2.partitions == set(range(12)) - a.partitions
    moved.clock.advance(moved.coordinator.consumer_groups.config.session_timeout_ms + 1)
    again = _reloaded(moved)
    assert again.coordinator.consumer_groups.groups["g"].members == {}
    # An empty group deleted: nothing of it comes back.
    deleted: dict[str, ErrorCode] = {}
    again.coordinator.handle_delete_groups(["g"], deleted.update)
    assert deleted == {"g": ErrorCode.NO_ERROR}
    assert "g" not in _reloaded(again).coordinator.consumer_groups.groups


def test_the_heartbeat_is_answered_once_its_records_are_appended() -> None:
    h = Harness()
    log = h.coordinator.manager.coordinator_log
    assert isinstance(log, MemoryCoordinatorLog)
    log.hold = True
    request_answer = h.coordinator.consumer_group_heartbeat(_join_request("a"))
    assert not request_answer.done()
    log.release()
    result = request_answer.result()
    assert (result.error, result.member_epoch, result.assignment) == (ErrorCode.NO_ERROR, 1, {TOPIC: frozenset(range(12))})
    # An unchanged heartbeat writes nothing and is answered at once; a failed append answers its error.
    assert h.heartbeat("a", 1, None).error == ErrorCode.NO_ERROR
    log.hold = False
    log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.heartbeat("a", 1, None, subscribed_topic_names=("t", "u")).error == ErrorCode.NOT_COORDINATOR


def _join_request(member_id: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(group_id="g", member_id=member_id, member_epoch=0, client_id="c",
                                         client_host="/127.0.0.1", owned={}, subscribed_topic_names=("t",),
                                         rebalance_timeout_ms=30000)


def test_leadership_leaving_and_coming_back_loads_the_group_again() -> None:
    """The coordinator's move in a cluster, on one coordinator: resignation unloads the group (NOT_COORDINATOR),
    a new election loads it from the log in the background (COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
    async def scenario() -> None:
        log, clock = LedLog(), ManualScheduler()
        partition = partition_for("g", log.num_partitions)
        log.led.add(partition)
        manager = GroupMetadataManager(0, log, clock)
        coordinator = GroupCoordinator(0, GroupConfig(group_initial_rebalance_delay_ms=0), manager, clock,
                                       topics=Topics())

        async def beat(epoch: int, **fields: object) -> ConsumerGroupHeartbeatResult:
            request = ConsumerGroupHeartbeatRequest(group_id="g", member_id="a", member_epoch=epoch, client_id="c",
                                                    client_host="/h", **fields)  # type: ignore[arg-type]
            return await coordinator.consumer_group_heartbeat(request)

        coordinator.startup()
        joined = await beat(0, owned={}, subscribed_topic_names=("t",), rebalance_timeout_ms=30000)
        assert (joined.error, joined.member_epoch) == (ErrorCode.NO_ERROR, 1)
        coordinator.on_resignation(partition)
        log.led.discard(partition)
        assert (await beat(1)).error == ErrorCode.NOT_COORDINATOR
        log.led.add(partition)
        log.gate.clear()  # the load's read waits
        coordinator.on_election(partition)
        assert (await beat(1)).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        log.gate.set()
        await wait_until_async(lambda: partition in manager.owned_partitions, WAIT_S, "the load")
        again = await beat(1, owned={TOPIC: frozenset(range(12))})
        assert (again.error, again.member_epoch) == (ErrorCode.NO_ERROR, 1)
        await coordinator.shutdown()

    asyncio.run(scenario())


def test_an_empty_group_without_offsets_is_deleted_at_the_retention_check() -> None:
    h = Harness()
    Member(h, "a")
    committed: dict[tuple[str, int], ErrorCode] = {}
    h.coordinator.handle_commit_offsets("g", "a", None, 1, {("t", 0): OffsetAndMetadata(3, -1, "", 1)},
                                        committed.update)
    assert committed == {("t", 0): ErrorCode.NO_ERROR}
    assert h.heartbeat("a", -1).error == ErrorCode.NO_ERROR
    interval = h.coordinator.offsets_retention_check_interval_ms
    h.clock.advance(interval)
    assert "g" in h.coordinator.consumer_groups.groups  # its offsets keep it
    h.clock.advance(h.coordinator.manager.offsets_retention_ms)
    assert "g" not in h.coordinator.consumer_groups.groups
    assert "g" not in _reloaded(h).coordinator.consumer_groups.groups
