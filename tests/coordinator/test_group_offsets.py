"""Committed offsets: generation checks, metadata, persistence in __consumer_offsets, deletion, expiry."""

from __future__ import annotations

from coordinator.common.scheduler import ManualScheduler
from coordinator.group.group_metadata import GroupState, OffsetAndMetadata
from coordinator.group.record_formats import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from protocol.errors import ErrorCode
from tests.coordinator.fakes import (
    MemoryCoordinatorLog,
    Outcome,
    heartbeat,
    join,
    join_new,
    leave,
    make_coordinator,
    sync,
)

DAY_MS = 24 * 3600 * 1000


def commit(coordinator, offsets: dict, member_id: str = "", generation: int = -1, group: str = "g",  # type: ignore[no-untyped-def]
           metadata: str = "", instance_id: str | None = None) -> dict:
    now = coordinator.scheduler.now_ms()
    outcome = Outcome()
    coordinator.handle_commit_offsets(group, member_id, instance_id, generation,
                                      {tp: OffsetAndMetadata(o, -1, metadata, now) for tp, o in offsets.items()},
                                      outcome)
    return outcome.result


def fetch(coordinator, group: str = "g", partitions=None):  # type: ignore[no-untyped-def]
    error, offsets, unstable = coordinator.handle_fetch_offsets(group, False, partitions)
    assert not unstable
    assert error == ErrorCode.NO_ERROR
    return offsets


def one_member_group(coordinator, **kwargs):  # type: ignore[no-untyped-def]
    member_id, joined = join_new(coordinator, **kwargs)
    coordinator.scheduler.advance(0)
    generation = joined.result.generation_id
    sync(coordinator, member_id, generation, {member_id: b"assignment"})
    return member_id, generation


def test_simple_commit_without_a_group_and_fetch_with_metadata() -> None:
    coordinator = make_coordinator()
    assert commit(coordinator, {("t", 0): 5, ("t", 1): 7}, metadata="where I was") == {
        ("t", 0): ErrorCode.NO_ERROR, ("t", 1): ErrorCode.NO_ERROR}
    offsets = fetch(coordinator, partitions=[("t", 0), ("t", 1), ("t", 2)])
    assert offsets[("t", 0)].offset == 5 and offsets[("t", 0)].metadata == "where I was"
    assert offsets[("t", 1)].offset == 7 and offsets[("t", 2)] is None
    assert set(fetch(coordinator)) == {("t", 0), ("t", 1)}
    assert fetch(coordinator, group="other", partitions=[("t", 0)]) == {("t", 0): None}


def test_member_commits_are_checked_like_heartbeats() -> None:
    coordinator = make_coordinator()
    member_id, generation = one_member_group(coordinator)
    assert commit(coordinator, {("t", 0): 1}, member_id, generation) == {("t", 0): ErrorCode.NO_ERROR}
    assert commit(coordinator, {("t", 0): 2}, member_id, generation - 1) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert commit(coordinator, {("t", 0): 2}, "stranger", generation) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # Only members commit to a group that has members.
    assert commit(coordinator, {("t", 0): 2}) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert commit(coordinator, {("t", 0): 2}, group="gone", generation=3) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert fetch(coordinator, partitions=[("t", 0)])[("t", 0)].offset == 1


def test_commit_with_a_member_id_and_no_generation_goes_to_an_empty_group() -> None:
    """An assign-only consumer commits with its own member id and generation -1: an empty (or unknown)
    group takes it, as Kafka's ClassicGroup.validateOffsetCommit does; a group with members does not."""
    coordinator = make_coordinator()
    assert commit(coordinator, {("t", 0): 4}, "rdkafka-assign-only", -1) == {("t", 0): ErrorCode.NO_ERROR}
    assert commit(coordinator, {("t", 0): 6}, "rdkafka-assign-only", -1, instance_id="i") == {
        ("t", 0): ErrorCode.NO_ERROR}
    assert fetch(coordinator, partitions=[("t", 0)])[("t", 0)].offset == 6
    member_id, _generation = one_member_group(coordinator)
    assert commit(coordinator, {("t", 0): 8}, "rdkafka-assign-only", -1) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert commit(coordinator, {("t", 0): 8}, member_id, -1) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert fetch(coordinator, partitions=[("t", 0)])[("t", 0)].offset == 6
    leave(coordinator, "g", [(member_id, None)])
    assert commit(coordinator, {("t", 0): 9}, member_id, -1) == {("t", 0): ErrorCode.NO_ERROR}
    assert fetch(coordinator, partitions=[("t", 0)])[("t", 0)].offset == 9


def test_commit_during_completing_rebalance_and_preparing_rebalance() -> None:
    coordinator = make_coordinator()
    member_id, generation = one_member_group(coordinator)
    join_new(coordinator)  # PreparingRebalance: commits of the current generation still go in
    assert commit(coordinator, {("t", 0): 3}, member_id, generation) == {("t", 0): ErrorCode.NO_ERROR}
    rejoined = join(coordinator, member_id=member_id).result
    assert coordinator.manager.get_group("g").state is GroupState.COMPLETING_REBALANCE
    assert commit(coordinator, {("t", 0): 4}, member_id, rejoined.generation_id) == {
        ("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}


def test_metadata_larger_than_offset_metadata_max_bytes_is_refused() -> None:
    coordinator = make_coordinator(offset_metadata_max_bytes=10)
    assert commit(coordinator, {("t", 0): 1}, metadata="x" * 11) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert commit(coordinator, {("t", 0): 1}, metadata="x" * 10) == {("t", 0): ErrorCode.NO_ERROR}


def test_commit_is_visible_only_once_appended() -> None:
    log = MemoryCoordinatorLog()
    coordinator = make_coordinator(log)
    log.hold = True
    outcome = Outcome()
    coordinator.handle_commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(9, -1, "", 0)}, outcome)
    assert not outcome.done and fetch(coordinator, partitions=[("t", 0)]) == {("t", 0): None}
    log.release()
    assert outcome.result == {("t", 0): ErrorCode.NO_ERROR}
    assert fetch(coordinator, partitions=[("t", 0)])[("t", 0)].offset == 9


def test_failed_append_maps_errors_like_kafka() -> None:
    log = MemoryCoordinatorLog()
    coordinator = make_coordinator(log)
    log.fail_with = ErrorCode.RECORD_LIST_TOO_LARGE
    assert commit(coordinator, {("t", 0): 1}) == {("t", 0): ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
    log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert commit(coordinator, {("t", 0): 1}) == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert fetch(coordinator, partitions=[("t", 0)]) == {("t", 0): None}


def test_records_in_the_log_use_kafkas_formats() -> None:
    log = MemoryCoordinatorLog()
    coordinator = make_coordinator(log)
    member_id, generation = one_member_group(coordinator)
    commit(coordinator, {("t", 3): 11}, member_id, generation, metadata="m")
    records = log.records[coordinator.manager.partition_for("g")]
    keys = [decode_key(k) for _, k, _ in records]
    assert keys[0] == GroupMetadataKey("g") and keys[-1] == OffsetCommitKey("g", "t", 3)
    group_value = decode_group_metadata_value(records[0][2])
    assert group_value.generation == generation and group_value.protocol == "range"
    assert [(m.member_id, m.assignment) for m in group_value.members] == [(member_id, b"assignment")]
    offset_value = decode_offset_commit_value(records[-1][2])
    assert (offset_value.offset, offset_value.metadata) == (11, "m")


def test_state_is_rebuilt_from_the_log() -> None:
    log = MemoryCoordinatorLog()
    clock = ManualScheduler()
    coordinator = make_coordinator(log, clock)
    member_id, generation = one_member_group(coordinator)
    commit(coordinator, {("t", 0): 5, ("t", 1): 6}, member_id, generation, metadata="meta")
    commit(coordinator, {("t", 0): 8}, member_id, generation)
    commit(coordinator, {("u", 0): 1}, group="simple")
    restarted = make_coordinator(log, ManualScheduler(clock.now_ms()))
    group = restarted.manager.get_group("g")
    assert group.state is GroupState.STABLE and group.generation_id == generation
    assert group.has(member_id) and group.get(member_id).assignment == b"assignment"
    offsets = fetch(restarted, partitions=[("t", 0), ("t", 1)])
    assert offsets[("t", 0)].offset == 8 and offsets[("t", 1)].metadata == "meta"
    assert fetch(restarted, group="simple")[("u", 0)].offset == 1
    # The loaded member keeps its generation: its heartbeat is accepted.
    assert heartbeat(restarted, "g", member_id, None, generation) == ErrorCode.NO_ERROR


def test_loaded_member_that_never_comes_back_is_evicted() -> None:
    log = MemoryCoordinatorLog()
    coordinator = make_coordinator(log)
    member_id, _ = one_member_group(coordinator)
    clock = ManualScheduler()
    restarted = make_coordinator(log, clock)
    clock.advance(10_000)
    group = restarted.manager.get_group("g")
    assert not group.has(member_id)
    clock.advance(0)
    assert group.state is GroupState.EMPTY


def test_delete_groups() -> None:
    log = MemoryCoordinatorLog()
    coordinator = make_coordinator(log)
    member_id, generation = one_member_group(coordinator)
    commit(coordinator, {("t", 0): 1}, member_id, generation)
    commit(coordinator, {("t", 0): 1}, group="idle")
    outcome = Outcome()
    coordinator.handle_delete_groups(["g", "idle", "missing"], outcome)
    assert outcome.result == {"g": ErrorCode.NON_EMPTY_GROUP, "idle": ErrorCode.NO_ERROR,
                              "missing": ErrorCode.GROUP_ID_NOT_FOUND}
    assert coordinator.manager.get_group("idle") is None
    restarted = make_coordinator(log)
    assert restarted.manager.get_group("idle") is None and restarted.manager.get_group("g") is not None


def test_offset_delete_refuses_subscribed_topics_of_active_consumer_groups() -> None:
    coordinator = make_coordinator()
    member_id, generation = one_member_group(coordinator)  # subscribed to topic "t"
    commit(coordinator, {("t", 0): 1, ("old", 0): 2}, member_id, generation)
    outcome = Outcome()
    coordinator.handle_delete_offsets("g", [("t", 0), ("old", 0)], lambda e, r: outcome((e, r)))
    error, result = outcome.result
    assert error == ErrorCode.NO_ERROR
    assert result == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("old", 0): ErrorCode.NO_ERROR}
    assert set(fetch(coordinator)) == {("t", 0)}
    missing = Outcome()
    coordinator.handle_delete_offsets("nope", [("t", 0)], lambda e, r: missing((e, r)))
    assert missing.result == (ErrorCode.GROUP_ID_NOT_FOUND, {})


def test_offsets_of_an_empty_group_expire_after_retention_since_it_emptied() -> None:
    log = MemoryCoordinatorLog()
    clock = ManualScheduler()
    coordinator = make_coordinator(log, clock, offsets_retention_ms=DAY_MS, group_max_session_timeout_ms=3 * DAY_MS)
    member_id, generation = one_member_group(coordinator, session_timeout_ms=3 * DAY_MS)
    commit(coordinator, {("t", 0): 1}, member_id, generation)
    clock.advance(2 * DAY_MS - 1)  # a stable group subscribed to "t": kept however old
    heartbeat(coordinator, "g", member_id, None, generation)
    coordinator.manager.expire_offsets()
    assert fetch(coordinator, partitions=[("t", 0)])[("t", 0)] is not None
    leave(coordinator, "g", [(member_id, None)])
    clock.advance(DAY_MS - 1)
    coordinator.manager.expire_offsets()
    assert coordinator.manager.get_group("g") is not None
    clock.advance(1)
    coordinator.manager.expire_offsets()
    assert coordinator.manager.get_group("g") is None  # no offsets left: the group is gone
    assert make_coordinator(log).manager.get_group("g") is None  # tombstones written


def test_simple_consumer_offsets_expire_after_retention_since_commit() -> None:
    clock = ManualScheduler()
    coordinator = make_coordinator(clock=clock, offsets_retention_ms=DAY_MS)
    commit(coordinator, {("t", 0): 1})
    clock.advance(DAY_MS // 2)
    commit(coordinator, {("t", 1): 1})
    clock.advance(DAY_MS // 2)
    coordinator.manager.expire_offsets()
    assert set(fetch(coordinator)) == {("t", 1)}


def test_list_and_describe_groups() -> None:
    coordinator = make_coordinator()
    member_id, _ = one_member_group(coordinator)
    commit(coordinator, {("t", 0): 1}, group="simple")
    error, groups = coordinator.handle_list_groups(set())
    assert error == ErrorCode.NO_ERROR
    assert sorted((g.group_id, str(g.state), g.protocol_type) for g in groups) == [
        ("g", "Stable", "consumer"), ("simple", "Empty", None)]
    assert [g.group_id for g in coordinator.handle_list_groups({"empty"})[1]] == ["simple"]
    error, summary = coordinator.handle_describe_group("g")
    assert summary.state == "Stable" and summary.protocol == "range"
    assert [(m.member_id, m.assignment, m.client_host) for m in summary.members] == [
        (member_id, b"assignment", "/127.0.0.1")]
    assert coordinator.handle_describe_group("unknown") == (ErrorCode.NO_ERROR, None)


def test_groups_of_partitions_led_elsewhere_get_not_coordinator() -> None:
    log = MemoryCoordinatorLog(num_partitions=3)
    coordinator = make_coordinator(log)
    elsewhere = coordinator.manager.partition_for("g")
    log.is_local_leader = lambda p: p != elsewhere  # type: ignore[method-assign]
    coordinator.manager.owned_partitions.discard(elsewhere)
    assert join(coordinator).result.error == ErrorCode.NOT_COORDINATOR
    assert commit(coordinator, {("t", 0): 1}) == {("t", 0): ErrorCode.NOT_COORDINATOR}
    other = next(g for g in ("a", "b", "c", "d", "e") if coordinator.manager.partition_for(g) != elsewhere)
    assert join(coordinator, group=other).result.error == ErrorCode.MEMBER_ID_REQUIRED


def test_offsets_of_deleted_topics_are_removed_with_tombstones() -> None:
    log = MemoryCoordinatorLog()
    coordinator = make_coordinator(log)
    member_id, generation = one_member_group(coordinator)
    commit(coordinator, {("t", 0): 1, ("gone", 0): 2, ("gone", 1): 3}, member_id, generation)
    commit(coordinator, {("gone", 0): 4}, group="only-gone")
    removed = Outcome()
    coordinator.handle_deleted_topics({"gone"}, removed)
    assert removed.result == 3
    assert set(fetch(coordinator)) == {("t", 0)}
    assert coordinator.manager.get_group("only-gone") is None  # Empty and without offsets: dead
    restarted = make_coordinator(log)
    assert set(fetch(restarted)) == {("t", 0)} and restarted.manager.get_group("only-gone") is None
