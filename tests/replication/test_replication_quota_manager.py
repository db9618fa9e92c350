"""The replication quota manager on a stepped clock: Kafka's SimpleRate over 11 one-second samples,
the quota check, the throttled partitions and Kafka's throttled-replicas list format."""

from __future__ import annotations

import pytest

from replication.replication_quota_manager import (
    ALL_REPLICAS,
    LONG_MAX,
    QuotaType,
    ReplicationQuotaManager,
    ReplicationQuotas,
    SimpleRate,
    is_valid_throttled_replicas,
    should_follower_throttle,
    should_leader_throttle,
    throttled_partitions,
)


class Clock:
    """Seconds, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def leader_quota(clock: Clock, bound: float = LONG_MAX) -> ReplicationQuotaManager:
    return ReplicationQuotaManager(QuotaType.LEADER_REPLICATION, bound, clock=clock)


# -- the rate ---------------------------------------------------------------------------------------
def test_a_first_burst_is_measured_over_one_whole_window() -> None:
    rate = SimpleRate()
    rate.record(1000, 0)
    assert rate.measure(0) == 1000  # not infinite: at least one window (1 s)
    assert rate.measure(500) == 1000
    assert rate.measure(2000) == 500  # then over the time since the oldest sample began
    assert rate.measure(4000) == 250


def test_samples_without_events_for_eleven_windows_no_longer_count() -> None:
    rate = SimpleRate()
    rate.record(1100, 0)
    assert rate.measure(10_999) == pytest.approx(1100 / 10.999)
    assert rate.measure(11_000) == 0


def test_a_steady_rate_is_measured_as_itself_once_the_samples_wrap() -> None:
    rate = SimpleRate()
    for tick in range(300):  # 30 s of 100 bytes every 100 ms: 1000 bytes/s
        rate.record(100, tick * 100)
        if tick >= 20:
            assert rate.measure(tick * 100) == pytest.approx(1000, rel=0.1)


def test_old_traffic_leaves_the_rate_as_its_samples_are_recycled() -> None:
    rate = SimpleRate()
    rate.record(50_000, 0)  # a burst, then a trickle for 20 s
    for tick in range(1, 21):
        rate.record(10, tick * 1000)
    assert rate.measure(20_000) == pytest.approx(10, rel=0.2)  # the burst's sample was reused


# -- the quota -------------------------------------------------------------------------------------
def test_no_bound_is_never_exceeded() -> None:
    clock = Clock()
    quota = leader_quota(clock)
    quota.record(10**15)
    assert quota.upper_bound == LONG_MAX and not quota.is_quota_exceeded()


def test_exceeded_above_the_bound_until_the_average_comes_down() -> None:
    clock = Clock()
    quota = leader_quota(clock, bound=1000)
    quota.record(1000)
    assert not quota.is_quota_exceeded()  # 1000 B/s is within 1000 B/s
    quota.record(1)
    assert quota.is_quota_exceeded()
    clock.now += 0.9
    assert quota.is_quota_exceeded()  # still one window: 1001 B/s
    clock.now += 1.1
    assert not quota.is_quota_exceeded()  # 1001 B over 2 s
    assert quota.rate() == pytest.approx(500.5)


def test_a_new_bound_applies_to_the_history_already_measured() -> None:
    clock = Clock()
    quota = leader_quota(clock, bound=1000)
    quota.record(800)
    assert not quota.is_quota_exceeded()
    quota.update_quota(500)
    assert quota.upper_bound == 500 and quota.is_quota_exceeded()
    quota.update_quota(LONG_MAX)
    assert not quota.is_quota_exceeded()


@pytest.mark.parametrize("chunk", [16 * 1024, 64 * 1024])
def test_reading_whenever_the_quota_allows_replicates_at_the_bound(chunk: int) -> None:
    """What a throttled follower sees: a chunk whenever the quota is not exceeded, else a wait;
    2 MB at 200 KB/s takes the ten seconds the bound allows (the first chunks ride the first
    window, as in Kafka)."""
    clock = Clock()
    start = clock.now
    quota = leader_quota(clock, bound=200 * 1024)
    copied = 0
    while copied < 2 * 1024 * 1024:
        if quota.is_quota_exceeded():
            clock.now += 0.05
            continue
        quota.record(chunk)
        copied += chunk
    elapsed = clock.now - start
    assert copied / elapsed == pytest.approx(200 * 1024, rel=0.05)


# -- throttled partitions -------------------------------------------------------------------------
def test_throttled_partitions_per_topic_and_all_replicas() -> None:
    quota = leader_quota(Clock())
    assert not quota.throttled_topics and not quota.is_throttled(("t", 0))
    quota.mark_throttled("t", frozenset({0, 2}))
    quota.mark_throttled("all", ALL_REPLICAS)
    assert [quota.is_throttled(("t", p)) for p in range(3)] == [True, False, True]
    assert quota.is_throttled(("all", 7)) and not quota.is_throttled(("other", 0))
    before = quota.throttled_topics
    quota.remove_throttle("t")
    assert not quota.is_throttled(("t", 0)) and quota.is_throttled(("all", 0))
    assert before["t"] == frozenset({0, 2})  # replaced, never mutated: a reader's view stays whole


def test_update_throttled_list_keeps_this_brokers_entries() -> None:
    quotas = ReplicationQuotas()
    quotas.update_throttled_replicas("t", ["0:1", "1:2", "2:1"], ["1:2"], broker_id=1)
    assert quotas.leader.throttled_topics == {"t": frozenset({0, 2})}
    assert quotas.follower.throttled_topics == {"t": frozenset()}  # listed, but not for this broker
    assert not quotas.follower.is_throttled(("t", 1))
    quotas.update_throttled_replicas("t", ["*"], [], broker_id=1)
    assert quotas.leader.is_throttled(("t", 5)) and quotas.follower.throttled_topics == {}
    quotas.update_throttled_replicas("t", ["0:x"], [], broker_id=1)  # invalid (written around validation)
    assert quotas.leader.throttled_topics == {}


def test_update_rates_sets_both_bounds() -> None:
    quotas = ReplicationQuotas()
    quotas.update_rates(1000, 2000)
    assert (quotas.leader.upper_bound, quotas.follower.upper_bound) == (1000, 2000)


def test_an_in_sync_replica_is_never_throttled() -> None:
    clock = Clock()
    quota = leader_quota(clock, bound=10)
    quota.mark_throttled("t", frozenset({0}))
    assert not should_leader_throttle(quota, ("t", 0), [0], replica_id=1)  # quota not exceeded yet
    quota.record(1000)
    assert should_leader_throttle(quota, ("t", 0), [0], replica_id=1)
    assert not should_leader_throttle(quota, ("t", 0), [0, 1], replica_id=1)  # in the ISR
    assert not should_leader_throttle(quota, ("t", 1), [0], replica_id=1)  # not throttled
    assert should_follower_throttle(quota, ("t", 0), in_sync=False)
    assert not should_follower_throttle(quota, ("t", 0), in_sync=True)


# -- Kafka's list format ---------------------------------------------------------------------------
@pytest.mark.parametrize("entries, valid", [
    ([], True),
    (["0:1"], True),
    (["0:1", " 12:3 "], True),
    (["*"], True),
    ([" * "], True),
    (["0:1", ""], True),  # an empty entry matches Kafka's ([0-9]+:[0-9]+)?
    (["*", "0:1"], False),
    (["0-1"], False),
    (["0"], False),
    (["a:1"], False),
    (["0:1:2"], False),
    (["-1:0"], False),
    (["\u0663:1"], False),  # an Arabic-Indic digit: Kafka's [0-9] is ASCII only
])
def test_throttled_replicas_format(entries: list[str], valid: bool) -> None:
    assert is_valid_throttled_replicas(entries) is valid


def test_throttled_partitions_parsing() -> None:
    assert throttled_partitions(["0:1", "1:2", "2:1"], 1) == frozenset({0, 2})
    assert throttled_partitions(["0:1"], 3) == frozenset()
    assert throttled_partitions(["*"], 3) is ALL_REPLICAS
    with pytest.raises(ValueError, match="must be the literal"):
        throttled_partitions(["0-1"], 1)
