"""What online migration and the classic members of a consumer group write to ``__consumer_offsets``, on a
fake clock: the records Kafka writes, in its order, and a coordinator rebuilt from them that finds the group
as it was (classic members with their protocols and session timeouts; converted groups both ways)."""

from __future__ import annotations

from coordinator.common.partitioner import partition_for
from coordinator.group.consumer_group import ClassicMemberMetadata
from coordinator.group.group_metadata import GroupState, OffsetAndMetadata
from coordinator.group.group_requests import LeaveGroupRequest, LeavingMember, SyncGroupRequest
from coordinator.group.record_formats import (
    ClassicMemberMetadataValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupRecordKey,
    GroupMetadataKey,
    OffsetCommitKey,
    decode_consumer_group_value,
    decode_group_metadata_value,
    decode_key,
)
from protocol.consumer_protocol import assigned_partitions
from protocol.errors import ErrorCode
from tests.coordinator.fakes import MemoryCoordinatorLog
from tests.coordinator.test_consumer_group_heartbeat import Harness, Member
from tests.coordinator.test_consumer_group_migration import ClassicClient, classic_group_of_two, run
from tests.coordinator.test_consumer_group_records import _group_state, _reloaded

#: A record as these tests name it: its type (1 offset, 2 group metadata, 3-8 the consumer group's), the
#: member it keys (if any), and whether it is a tombstone.
Written = tuple[int, str | None, bool]


def _log(h: Harness) -> MemoryCoordinatorLog:
    log = h.coordinator.manager.coordinator_log
    assert isinstance(log, MemoryCoordinatorLog)
    return log


def _raw(h: Harness, since: int = 0) -> list[tuple[bytes, bytes | None]]:
    return [(k, v) for _, k, v in _log(h).records.get(partition_for("g", 50), [])[since:]]


def _mark(h: Harness) -> int:
    return len(_raw(h))


def _written(h: Harness, since: int = 0) -> list[Written]:
    out: list[Written] = []
    for key, value in _raw(h, since):
        decoded = decode_key(key)
        if isinstance(decoded, OffsetCommitKey):
            out.append((1, None, value is None))
        elif isinstance(decoded, GroupMetadataKey):
            out.append((2, None, value is None))
        else:
            out.append((decoded.record_type, decoded.member_id, value is None))
    return out


def _member_metadata(h: Harness, member_id: str) -> ConsumerGroupMemberMetadataValue:
    """The latest metadata record written for the member."""
    latest = None
    for key, value in _raw(h):
        decoded = decode_key(key)
        if (isinstance(decoded, ConsumerGroupRecordKey) and decoded.record_type == 5
                and decoded.member_id == member_id and value is not None):
            latest = decode_consumer_group_value(5, value)
    assert isinstance(latest, ConsumerGroupMemberMetadataValue)
    return latest


def test_the_upgrade_writes_the_classic_tombstone_then_the_whole_consumer_group() -> None:
    h = Harness()
    a, b = classic_group_of_two(h)
    classic_group = h.coordinator.manager.get_group("g")
    assert classic_group is not None
    protocols = tuple(classic_group.members[a.member_id].supported_protocols)
    mark = _mark(h)
    Member(h, "c")
    classic_ids = [m for m in h.group.members if m != "c"]
    assert set(classic_ids) == {a.member_id, b.member_id}
    written = _written(h, mark)
    # Kafka's convertToConsumerGroup: the classic group's tombstone, then createConsumerGroupRecords ...
    assert written[:9] == [(2, None, True)] + [(5, m, False) for m in classic_ids] + [(3, None, False)] + [
        (7, m, False) for m in classic_ids] + [(6, None, False)] + [(8, m, False) for m in classic_ids]
    # ... then the joining member's own heartbeat: its metadata, the topics, the new epoch, the new targets.
    assert written[9:12] == [(5, "c", False), (4, None, False), (3, None, False)]
    assert written[-2:] == [(6, None, False), (8, "c", False)]
    # The classic members' metadata carries what they joined with.
    assert _member_metadata(h, a.member_id).classic_member_metadata == ClassicMemberMetadataValue(10_000, protocols)
    assert _member_metadata(h, "c").classic_member_metadata is None


def test_a_coordinator_rebuilt_after_an_upgrade_continues_the_mixed_group() -> None:
    h = Harness()
    a, b = classic_group_of_two(h)
    committed: dict[tuple[str, int], ErrorCode] = {}
    h.coordinator.handle_commit_offsets("g", a.member_id, None, a.generation,
                                        {("t", 0): OffsetAndMetadata(7, -1, "", 1)}, committed.update)
    assert committed == {("t", 0): ErrorCode.NO_ERROR}
    c = Member(h, "c")
    a.poll()  # mid-reconciliation: a rejoined and is told to revoke
    before = _group_state(h)
    moved = _reloaded(h)
    assert _group_state(moved) == before
    member = moved.group.members[a.member_id]
    assert member.classic == ClassicMemberMetadata(10_000, (("cooperative-sticky", member.classic.protocols[0][1]),))
    # The classic group holds the offsets only: Empty, without the members it had before the upgrade.
    holder = moved.coordinator.manager.get_group("g")
    assert holder is not None and holder.is_(GroupState.EMPTY) and not holder.members
    fetched = moved.coordinator.handle_fetch_offsets("g", False, [("t", 0)])[1][("t", 0)]
    assert fetched is not None and fetched.offset == 7
    for client in (a, b):
        client.h = moved
    c.harness = moved
    run([a, b], [c])
    assert a.owned | b.owned | c.partitions == set(range(12)) and str(moved.group.state) == "Stable"


def test_a_classic_join_into_a_consumer_group_writes_its_member_and_survives_a_reload() -> None:
    h = Harness()
    c = Member(h, "c")
    d = ClassicClient(h)
    mark = _mark(h)
    assert d.join() == ErrorCode.NO_ERROR
    written = _written(h, mark)
    assert written[:2] == [(5, d.member_id, False), (3, None, False)]
    assert (8, d.member_id, False) in written
    assert _member_metadata(h, d.member_id).classic_member_metadata == ClassicMemberMetadataValue(
        10_000, (("cooperative-sticky", d.join_request().protocols[0][1]),))
    run([d], [c])
    before = _group_state(h)
    moved = _reloaded(h)
    assert _group_state(moved) == before
    assert moved.group.members[d.member_id].classic is not None
    d.h, c.harness = moved, moved
    assert d.beat() == ErrorCode.NO_ERROR and len(d.owned) == len(c.partitions) == 6
    # A classic member that leaves writes its tombstones; the reload no longer has it.
    mark = _mark(moved)
    left = moved.coordinator.leave_group(LeaveGroupRequest("g", (LeavingMember(d.member_id),)))
    assert left.result().member_errors == [ErrorCode.NO_ERROR]
    assert _written(moved, mark)[:3] == [(8, d.member_id, True), (7, d.member_id, True), (5, d.member_id, True)]
    assert set(_reloaded(moved).group.members) == {"c"}


def test_the_classic_join_is_answered_once_its_records_are_appended() -> None:
    h = Harness()
    Member(h, "c")
    d = ClassicClient(h)
    first = h.coordinator.join_group(d.join_request()).result()
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    d.member_id = first.member_id
    _log(h).hold = True
    joined = h.coordinator.join_group(d.join_request())
    assert not joined.done()
    _log(h).release()
    assert joined.result().error == ErrorCode.NO_ERROR
    _log(h).hold = False
    _log(h).fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    d.member_id = ""
    other = ClassicClient(h)
    other.member_id = h.coordinator.join_group(other.join_request()).result().member_id
    assert h.coordinator.join_group(other.join_request()).result().error == ErrorCode.NOT_COORDINATOR


def test_a_classic_member_that_does_not_sync_within_its_rebalance_timeout_is_fenced() -> None:
    h = Harness(session_timeout_ms=120_000)
    c = Member(h, "c")
    d = ClassicClient(h)
    d.member_id = h.coordinator.join_group(d.join_request()).result().member_id
    joined = h.coordinator.join_group(d.join_request()).result()  # then heartbeats, but no SyncGroup
    assert joined.error == ErrorCode.NO_ERROR and d.member_id in h.group.members
    d.generation = joined.generation_id
    for _ in range(5):
        h.clock.advance(5_000)
        c.beat()
        d.beat()
    h.clock.advance(4_999)
    assert d.member_id in h.group.members
    h.clock.advance(1)  # its rebalance timeout (30 s) since the JoinGroup answer
    assert d.member_id not in h.group.members
    # One that syncs in time stays (its own session, 10 s, then keeps it while it heartbeats).
    e = ClassicClient(h)
    assert e.join() == ErrorCode.NO_ERROR
    for _ in range(8):
        h.clock.advance(5_000)
        c.beat()
        e.poll()
    assert e.member_id in h.group.members


def test_the_downgrade_writes_the_consumer_tombstones_then_the_classic_group() -> None:
    h = Harness()
    a, b = classic_group_of_two(h)
    c = Member(h, "c")
    run([a, b], [c])
    epoch = h.group.group_epoch
    members = list(h.group.members)
    mark = _mark(h)
    assert h.heartbeat("c", -1).error == ErrorCode.NO_ERROR
    written = _written(h, mark)
    # Kafka's createGroupTombstoneRecords (the leaving member included), then the classic GroupMetadata.
    assert written == [(8, m, True) for m in members] + [(7, m, True) for m in members] + [(6, None, True)] + [
        (5, m, True) for m in members] + [(4, None, True), (3, None, True), (2, None, False)]
    value = decode_group_metadata_value(_raw(h, mark)[-1][1] or b"")
    assert (value.protocol_type, value.generation, value.protocol) == ("consumer", epoch, "cooperative-sticky")
    assert value.leader in (a.member_id, b.member_id)  # the first member added, as Kafka's ClassicGroup.add
    assert {m.member_id: m.session_timeout for m in value.members} == {a.member_id: 10_000, b.member_id: 10_000}
    assert {m.member_id: {p for _, p in assigned_partitions(m.assignment)} for m in value.members} == {
        a.member_id: a.owned, b.member_id: b.owned}
    # A coordinator loading the partition now finds the classic group, not the consumer group.
    moved = _reloaded(h)
    assert "g" not in moved.coordinator.consumer_groups.groups
    classic = moved.coordinator.manager.get_group("g")
    assert classic is not None and classic.generation_id == epoch
    assert set(classic.members) == {a.member_id, b.member_id}
    synced = moved.coordinator.sync_group(SyncGroupRequest("g", epoch, a.member_id, None, "consumer",
                                                           "cooperative-sticky", {}))
    assert {p for _, p in assigned_partitions(synced.result().assignment)} == a.owned


def test_a_consumer_group_taking_over_an_empty_classic_group_writes_its_tombstone_first() -> None:
    h = Harness()
    committed: dict[tuple[str, int], ErrorCode] = {}
    h.coordinator.handle_commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(3, -1, "", 1)},
                                        committed.update)
    assert committed == {("t", 0): ErrorCode.NO_ERROR}
    mark = _mark(h)
    Member(h, "a")
    assert _written(h, mark)[:2] == [(2, None, True), (5, "a", False)]
    moved = _reloaded(h)
    assert set(moved.group.members) == {"a"}
    fetched = moved.coordinator.handle_fetch_offsets("g", False, [("t", 0)])[1][("t", 0)]
    assert fetched is not None and fetched.offset == 3
