"""A member's session: every heartbeat moves its deadline; it runs out exactly then, with one timer per member."""

from __future__ import annotations

from coordinator.common.scheduler import ManualScheduler
from coordinator.group.consumer_group_timeouts import ConsumerGroupTimeouts


def test_a_session_runs_out_at_its_latest_deadline() -> None:
    clock = ManualScheduler()
    timeouts = ConsumerGroupTimeouts(clock)
    expired: list[str] = []
    timeouts.schedule_session("g", "m", 45_000, lambda: expired.append("first"))
    for _ in range(10):  # a heartbeat every 5 s
        clock.advance(5_000)
        timeouts.schedule_session("g", "m", 45_000, lambda: expired.append("latest"))
    assert clock.pending == 1  # heartbeats move the deadline, they do not add timers
    clock.advance(44_999)
    assert expired == []
    clock.advance(1)
    assert expired == ["latest"]
    assert timeouts.pending == 0


def test_a_shorter_session_timeout_takes_effect_at_once() -> None:
    clock = ManualScheduler()
    timeouts = ConsumerGroupTimeouts(clock)
    expired: list[int] = []
    timeouts.schedule_session("g", "m", 45_000, lambda: expired.append(45))
    clock.advance(1_000)
    timeouts.schedule_session("g", "m", 10_000, lambda: expired.append(10))  # the group's timeout was lowered
    clock.advance(10_000)
    assert expired == [10]
    clock.advance(60_000)
    assert expired == [10]


def test_a_cancelled_session_never_runs_out() -> None:
    clock = ManualScheduler()
    timeouts = ConsumerGroupTimeouts(clock)
    expired: list[str] = []
    timeouts.schedule_session("g", "m", 45_000, lambda: expired.append("m"))
    timeouts.schedule_session("g", "n", 45_000, lambda: expired.append("n"))
    clock.advance(30_000)
    timeouts.schedule_session("g", "m", 45_000, lambda: expired.append("m"))
    timeouts.cancel_member("g", "m")
    clock.advance(100_000)
    assert expired == ["n"]
    timeouts.schedule_session("h", "x", 45_000, lambda: expired.append("x"))
    timeouts.cancel_group("h")
    clock.advance(100_000)
    assert expired == ["n"] and timeouts.pending == 0
