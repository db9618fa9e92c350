"""A group's configs over the broker's consumer-protocol timeouts, on a fake clock."""

from __future__ import annotations

from coordinator.group.group_configs import GroupConfigs
from protocol.errors import ErrorCode
from tests.coordinator.test_consumer_group_heartbeat import Harness, Member


def test_a_group_without_configs_runs_with_the_brokers() -> None:
    configs = GroupConfigs(45000, 5000)
    configs.replace("other", {"consumer.session.timeout.ms": "50000"})
    assert configs.consumer_session_timeout_ms("g") == 45000
    assert configs.consumer_heartbeat_interval_ms("g") == 5000
    assert configs.consumer_session_timeout_ms("other") == 50000
    configs.replace("other", {"consumer.session.timeout.ms": "not a number"})  # written around the admin API
    assert configs.consumer_session_timeout_ms("other") == 45000
    configs.replace("other", {})
    assert configs.items() == []


def test_the_groups_heartbeat_interval_is_given_to_its_members() -> None:
    h = Harness(heartbeat_interval_ms=5000)
    h.coordinator.consumer_groups.group_configs.replace("g", {"consumer.heartbeat.interval.ms": "7000"})
    result = h.join("a")
    assert result.error == ErrorCode.NO_ERROR
    assert result.heartbeat_interval_ms == 7000


def test_the_groups_session_timeout_fences_a_silent_member() -> None:
    h = Harness(session_timeout_ms=45000)
    h.coordinator.consumer_groups.group_configs.replace("g", {"consumer.session.timeout.ms": "50000"})
    a, _ = Member(h, "a"), Member(h, "b")
    for _ in range(4):  # 48 s: past the broker's 45 s, within the group's 50 s
        h.clock.advance(12_000)
        a.beat()
    assert "b" in h.group.members
    h.clock.advance(3_000)
    a.beat()
    assert "b" not in h.group.members
