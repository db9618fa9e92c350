"""The classic rebalance protocol on a fake clock: states, generations, errors where Kafka returns them."""

from __future__ import annotations

from coordinator.common.scheduler import ManualScheduler
from coordinator.group.group_membership import NEW_MEMBER_JOIN_TIMEOUT_MS
from coordinator.group.group_metadata import GroupState
from protocol.errors import ErrorCode
from tests.coordinator.fakes import PROTOCOLS, heartbeat, join, join_new, leave, make_coordinator, sync


def stable_group(coordinator, n: int = 1, **kwargs):  # type: ignore[no-untyped-def]
    """n members joined (in one rebalance) and synced; returns their ids, leader first."""
    joins = [join_new(coordinator, **kwargs) for _ in range(n)]
    coordinator.scheduler.advance(0)
    results = [outcome.result for _, outcome in joins]
    assert all(r.error == ErrorCode.NO_ERROR for r in results), results
    leader = results[0].leader_id
    generation = results[0].generation_id
    ids = [leader] + [m for m, _ in joins if m != leader]
    syncs = [sync(coordinator, m, generation, {x: x.encode() for x in ids} if m == leader else None) for m in ids]
    assert all(s.result.error == ErrorCode.NO_ERROR for s in syncs)
    return ids, generation


def test_first_join_needs_a_member_id_then_completes_after_the_initial_delay() -> None:
    clock = ManualScheduler()
    coordinator = make_coordinator(clock=clock, group_initial_rebalance_delay_ms=3000)
    first = join(coordinator)
    assert first.result.error == ErrorCode.MEMBER_ID_REQUIRED
    member_id = first.result.member_id
    assert member_id.startswith("client-")
    second = join(coordinator, member_id=member_id)
    assert not second.done
    clock.advance(2999)
    assert not second.done
    clock.advance(1)
    result = second.result
    assert result.error == ErrorCode.NO_ERROR and result.generation_id == 1
    assert result.leader_id == member_id and result.protocol_name == "range"
    assert [(m, md) for m, _, md in result.members] == [(member_id, PROTOCOLS[0][1])]
    assert coordinator.manager.get_group("g").state is GroupState.COMPLETING_REBALANCE


def test_initial_delay_extends_while_members_keep_arriving() -> None:
    clock = ManualScheduler()
    coordinator = make_coordinator(clock=clock, group_initial_rebalance_delay_ms=1000)
    _, a = join_new(coordinator, rebalance_timeout_ms=10_000)
    clock.advance(900)
    _, b = join_new(coordinator, rebalance_timeout_ms=10_000)
    clock.advance(100)  # the first delay ends; a member arrived during it: wait again
    assert not a.done and not b.done
    clock.advance(1000)
    assert a.result.generation_id == b.result.generation_id == 1


def test_leader_gets_all_members_followers_get_none() -> None:
    coordinator = make_coordinator()
    a_id, a = join_new(coordinator)
    b_id, b = join_new(coordinator)
    coordinator.scheduler.advance(0)
    leader = a.result if a.result.leader_id == a_id else b.result
    follower = b.result if leader is a.result else a.result
    assert sorted(m for m, _, _ in leader.members) == sorted([a_id, b_id])
    assert follower.members == [] and follower.leader_id == leader.member_id


def test_follower_sync_waits_for_the_leader_and_gets_its_own_assignment() -> None:
    coordinator = make_coordinator()
    a_id, a = join_new(coordinator)
    b_id, _b = join_new(coordinator)
    coordinator.scheduler.advance(0)
    generation = a.result.generation_id
    leader_id = a.result.leader_id
    follower_id = b_id if leader_id == a_id else a_id
    follower_sync = sync(coordinator, follower_id, generation)
    assert not follower_sync.done
    leader_sync = sync(coordinator, leader_id, generation, {leader_id: b"L", follower_id: b"F"})
    assert leader_sync.result.assignment == b"L"
    assert follower_sync.result.error == ErrorCode.NO_ERROR and follower_sync.result.assignment == b"F"
    assert coordinator.manager.get_group("g").state is GroupState.STABLE


def test_protocol_is_chosen_by_votes_among_common_protocols() -> None:
    coordinator = make_coordinator()
    rr_first = [("roundrobin", b"x"), ("range", b"y")]
    join_new(coordinator, protocols=rr_first)
    join_new(coordinator, protocols=rr_first)
    _, c = join_new(coordinator, protocols=[("range", b"z"), ("roundrobin", b"w"), ("sticky", b"s")])
    coordinator.scheduler.advance(0)
    assert c.result.protocol_name == "roundrobin"


def test_inconsistent_group_protocol_when_nothing_is_common() -> None:
    coordinator = make_coordinator()
    stable_group(coordinator)
    outcome = join(coordinator, protocols=[("cooperative-sticky", b"")])
    assert outcome.result.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_session_timeout_must_be_within_the_group_bounds() -> None:
    coordinator = make_coordinator(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=60_000)
    assert join(coordinator, session_timeout_ms=5999).result.error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join(coordinator, session_timeout_ms=60_001).result.error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join(coordinator, session_timeout_ms=6000).result.error == ErrorCode.MEMBER_ID_REQUIRED


def test_join_with_an_unknown_member_id_and_empty_group_id() -> None:
    coordinator = make_coordinator()
    assert join(coordinator, member_id="nobody").result.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert join(coordinator, group="").result.error == ErrorCode.INVALID_GROUP_ID


def test_new_member_triggers_rebalance_heartbeats_say_rebalance_in_progress() -> None:
    coordinator = make_coordinator()
    (a_id,), generation = stable_group(coordinator)
    assert heartbeat(coordinator, "g", a_id, None, generation) == ErrorCode.NO_ERROR
    _b_id, b = join_new(coordinator)
    group = coordinator.manager.get_group("g")
    assert group.state is GroupState.PREPARING_REBALANCE and not b.done
    assert heartbeat(coordinator, "g", a_id, None, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    a = join(coordinator, member_id=a_id)  # a rejoins: everyone is in, the join completes at once
    assert a.result.generation_id == b.result.generation_id == generation + 1
    assert heartbeat(coordinator, "g", a_id, None, generation) == ErrorCode.ILLEGAL_GENERATION
    assert sync(coordinator, a_id, generation).result.error == ErrorCode.ILLEGAL_GENERATION


def test_member_that_does_not_rejoin_is_removed_after_the_rebalance_timeout() -> None:
    clock = ManualScheduler()
    coordinator = make_coordinator(clock=clock)
    (a_id,), generation = stable_group(coordinator, rebalance_timeout_ms=20_000, session_timeout_ms=60_000)
    _, b = join_new(coordinator, rebalance_timeout_ms=20_000, session_timeout_ms=60_000)
    clock.advance(19_999)
    assert not b.done
    clock.advance(1)
    assert b.result.error == ErrorCode.NO_ERROR and b.result.generation_id == generation + 1
    assert not coordinator.manager.get_group("g").has(a_id)


def test_expired_session_evicts_member_and_rebalances() -> None:
    clock = ManualScheduler()
    coordinator = make_coordinator(clock=clock)
    (a_id, b_id), generation = stable_group(coordinator, n=2, session_timeout_ms=10_000)
    clock.advance(5000)
    assert heartbeat(coordinator, "g", a_id, None, generation) == ErrorCode.NO_ERROR
    assert heartbeat(coordinator, "g", b_id, None, generation) == ErrorCode.NO_ERROR
    clock.advance(5000)
    assert heartbeat(coordinator, "g", a_id, None, generation) == ErrorCode.NO_ERROR
    clock.advance(4999)  # b's last heartbeat was 9999 ms ago
    assert coordinator.manager.get_group("g").has(b_id)
    clock.advance(1)
    group = coordinator.manager.get_group("g")
    assert not group.has(b_id)  # b stopped heartbeating and was evicted
    assert heartbeat(coordinator, "g", a_id, None, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    assert join(coordinator, member_id=a_id).result.generation_id == generation + 1
    assert heartbeat(coordinator, "g", b_id, None, generation) == ErrorCode.UNKNOWN_MEMBER_ID


def test_members_waiting_in_a_rebalance_are_not_expired() -> None:
    clock = ManualScheduler()
    coordinator = make_coordinator(clock=clock)
    (a_id, b_id), generation = stable_group(coordinator, n=2, session_timeout_ms=10_000,
                                            rebalance_timeout_ms=60_000)
    a = join(coordinator, member_id=a_id, session_timeout_ms=10_000, rebalance_timeout_ms=60_000)
    clock.advance(9_000)
    assert join(coordinator, member_id=b_id, session_timeout_ms=10_000,
                rebalance_timeout_ms=60_000).result.error == ErrorCode.NO_ERROR
    assert a.result.error == ErrorCode.NO_ERROR and a.result.generation_id == generation + 1


def test_leave_group_rebalances_and_last_leave_empties_the_group() -> None:
    coordinator = make_coordinator()
    (a_id, b_id), generation = stable_group(coordinator, n=2)
    error, errors = leave(coordinator, "g", [(b_id, None), ("ghost", None)])
    assert error == ErrorCode.NO_ERROR and errors == [ErrorCode.NO_ERROR, ErrorCode.UNKNOWN_MEMBER_ID]
    a = join(coordinator, member_id=a_id)
    assert a.result.generation_id == generation + 1 and [m for m, _, _ in a.result.members] == [a_id]
    assert leave(coordinator, "g", [(a_id, None)]) == (ErrorCode.NO_ERROR, [ErrorCode.NO_ERROR])
    group = coordinator.manager.get_group("g")
    assert group.state is GroupState.EMPTY and group.generation_id == generation + 2
    assert leave(coordinator, "nope", [(a_id, None)]) == (ErrorCode.NO_ERROR, [ErrorCode.UNKNOWN_MEMBER_ID])


def test_rebalance_during_completing_rebalance_answers_parked_syncs() -> None:
    coordinator = make_coordinator()
    a_id, a = join_new(coordinator)
    b_id, _b = join_new(coordinator)
    coordinator.scheduler.advance(0)
    follower = b_id if a.result.leader_id == a_id else a_id
    parked = sync(coordinator, follower, a.result.generation_id)
    join_new(coordinator)  # a third member arrives before the leader synced
    assert parked.result.error == ErrorCode.REBALANCE_IN_PROGRESS


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    clock = ManualScheduler()
    coordinator = make_coordinator(clock=clock)
    a_id, a = join_new(coordinator, rebalance_timeout_ms=5000, session_timeout_ms=60_000)
    b_id, _b = join_new(coordinator, rebalance_timeout_ms=5000, session_timeout_ms=60_000)
    clock.advance(0)
    leader = a.result.leader_id
    silent = b_id if leader == a_id else a_id
    sync(coordinator, leader, a.result.generation_id, {leader: b"x", silent: b"y"})
    clock.advance(5000)
    group = coordinator.manager.get_group("g")
    assert not group.has(silent) and group.state is GroupState.PREPARING_REBALANCE


def test_group_max_size() -> None:
    coordinator = make_coordinator(group_max_size=2)
    stable_group(coordinator, n=2)
    third_id = join(coordinator).result.member_id
    assert join(coordinator, member_id=third_id).result.error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_new_member_whose_join_never_completes_is_dropped() -> None:
    clock = ManualScheduler()
    coordinator = make_coordinator(clock=clock)
    (a_id,), generation = stable_group(coordinator, session_timeout_ms=10_000, rebalance_timeout_ms=600_000)
    _, b = join_new(coordinator, session_timeout_ms=10_000, rebalance_timeout_ms=600_000)
    for _ in range(NEW_MEMBER_JOIN_TIMEOUT_MS // 5000):
        clock.advance(5000)
        heartbeat(coordinator, "g", a_id, None, generation)
    assert b.result.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_pending_member_that_never_rejoins_expires_after_the_session_timeout() -> None:
    clock = ManualScheduler()
    coordinator = make_coordinator(clock=clock)
    (_a_id,), _ = stable_group(coordinator)
    pending = join(coordinator, session_timeout_ms=10_000).result.member_id
    assert pending in coordinator.manager.get_group("g").pending_members
    clock.advance(10_000)
    assert pending not in coordinator.manager.get_group("g").pending_members


def test_static_member_restart_in_a_stable_group_keeps_generation_and_assignment() -> None:
    coordinator = make_coordinator()
    a_id, a = join_new(coordinator, instance_id=None)
    s = join(coordinator, instance_id="static-1")  # static members skip MEMBER_ID_REQUIRED
    coordinator.scheduler.advance(0)
    s_id = s.result.member_id
    generation = a.result.generation_id
    leader = a.result.leader_id
    assignment = {a_id: b"A", s_id: b"S"}
    sync(coordinator, s_id, generation, assignment if leader == s_id else None, instance_id="static-1")
    sync(coordinator, leader, generation, assignment, instance_id="static-1" if leader == s_id else None)
    # The static member's process restarts: a JoinGroup without member id, same instance id.
    again = join(coordinator, instance_id="static-1")
    result = again.result
    assert result.error == ErrorCode.NO_ERROR and result.generation_id == generation
    assert result.member_id != s_id and result.leader_id != result.member_id
    group = coordinator.manager.get_group("g")
    assert group.state is GroupState.STABLE
    assert sync(coordinator, result.member_id, generation, instance_id="static-1").result.assignment == b"S"
    # The old incarnation is fenced.
    assert heartbeat(coordinator, "g", s_id, "static-1", generation) == ErrorCode.FENCED_INSTANCE_ID
    assert heartbeat(coordinator, "g", a_id, None, generation) == ErrorCode.NO_ERROR


def test_static_leader_restart_with_skip_assignment() -> None:
    coordinator = make_coordinator()
    s = join(coordinator, instance_id="lead")
    coordinator.scheduler.advance(0)
    s_id, generation = s.result.member_id, s.result.generation_id
    sync(coordinator, s_id, generation, {s_id: b"all"}, instance_id="lead")
    again = join(coordinator, instance_id="lead", skip_assignment=True).result
    assert again.leader_id == again.member_id and again.skip_assignment
    assert [m for m, _, _ in again.members] == [again.member_id]


def test_static_member_with_unknown_instance_id_is_unknown() -> None:
    coordinator = make_coordinator()
    (a_id,), _ = stable_group(coordinator)
    assert join(coordinator, member_id=a_id, instance_id="other").result.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_admin_removes_static_member_by_instance_id() -> None:
    coordinator = make_coordinator()
    s = join(coordinator, instance_id="static-1")
    coordinator.scheduler.advance(0)
    assert leave(coordinator, "g", [("", "static-1")]) == (ErrorCode.NO_ERROR, [ErrorCode.NO_ERROR])
    assert not coordinator.manager.get_group("g").has(s.result.member_id)


def test_cooperative_extra_rebalance_keeps_generation_moving() -> None:
    coordinator = make_coordinator()
    coop = [("cooperative-sticky", b"owned:none")]
    (a_id,), generation = stable_group(coordinator, protocols=coop)
    b_id, _b = join_new(coordinator, protocols=coop)
    a = join(coordinator, member_id=a_id, protocols=[("cooperative-sticky", b"owned:0,1")])
    assert a.result.generation_id == generation + 1
    # After revoking, the member rejoins with new owned partitions: a second rebalance.
    sync(coordinator, b_id, generation + 1)
    sync(coordinator, a_id, generation + 1, {a_id: b"0", b_id: b""})
    a2 = join(coordinator, member_id=a_id, protocols=[("cooperative-sticky", b"owned:0")])
    b2 = join(coordinator, member_id=b_id, protocols=coop)
    assert a2.result.generation_id == b2.result.generation_id == generation + 2


def test_loading_partition_answers_coordinator_load_in_progress() -> None:
    coordinator = make_coordinator()
    partition = coordinator.manager.partition_for("g")
    coordinator.manager.begin_loading([partition])
    assert join(coordinator).result.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert sync(coordinator, "m", 1).result.error == ErrorCode.REBALANCE_IN_PROGRESS
    assert heartbeat(coordinator, "g", "m", None, 1) == ErrorCode.NO_ERROR
    assert coordinator.handle_fetch_offsets("g", False, None)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_shutdown_cancels_every_timer() -> None:
    import asyncio

    clock = ManualScheduler()
    coordinator = make_coordinator(clock=clock, group_initial_rebalance_delay_ms=3000)
    _, parked = join_new(coordinator)
    assert clock.pending > 0
    asyncio.run(coordinator.shutdown())
    assert clock.pending == 0
    assert parked.result.error == ErrorCode.NOT_COORDINATOR


def test_static_member_replacement_is_reverted_when_it_cannot_be_stored() -> None:
    from tests.coordinator.fakes import MemoryCoordinatorLog

    log = MemoryCoordinatorLog()
    coordinator = make_coordinator(log)
    s = join(coordinator, instance_id="static-1")
    coordinator.scheduler.advance(0)
    old_id, generation = s.result.member_id, s.result.generation_id
    sync(coordinator, old_id, generation, {old_id: b"A"}, instance_id="static-1")
    log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    again = join(coordinator, instance_id="static-1").result
    assert again.error == ErrorCode.NOT_COORDINATOR and again.member_id == ""
    group = coordinator.manager.get_group("g")
    assert group.has(old_id) and group.static_member_id("static-1") == old_id
    assert group.num_members_awaiting_join == 0
    assert heartbeat(coordinator, "g", old_id, "static-1", generation) == ErrorCode.NO_ERROR
