"""Replication throttles (KIP-73) between two replica managers over real sockets: a follower
catching up on 2 MB of a throttled partition does so at the throttled rate, leader side
(``leader.replication.throttled.replicas`` and rate on the leader) or follower side (the
``follower.*`` pair on the follower), while an unthrottled partition of the same fetches catches up
at once. The throttles arrive the way the broker delivers them: the topic config through the log
manager, the rate through the quotas' ``update_rates``.

Each scenario moves ~2 MB at 200 KB/s: about ten seconds, hence ``slow``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from replication.replication_config import ReplicationConfig
from replication.replication_quota_manager import LONG_MAX
from tests.in_process import wait_for
from tests.replication.replication_rig import TOPIC, Node, ReplicationRig, run_rig
from tests.storage.helpers import make_batch

LEADER, FOLLOWER = 0, 1
THROTTLED, UNTHROTTLED = 0, 1
PARTITIONS = (THROTTLED, UNTHROTTLED)
RATE = 200 * 1024
#: Whole batches of 16 records of 1 KB: 2 MB is 128 of them.
BATCHES, RECORDS, VALUE_SIZE = 128, 16, 1000
# Small fetches per partition: the first window lets one quota's worth through unchecked, as in
# Kafka, and a fetch's last read may overshoot by one partition fetch; 64 KB keeps both small
# next to 2 MB.
CONFIG = ReplicationConfig(replica_lag_time_max_ms=30_000, replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=50,
                           replica_fetch_max_bytes=64 * 1024)


async def _send_states(cluster: ReplicationRig, to: int, replicas: list[int]) -> None:
    """The controller's current state of both partitions to one broker, in one LeaderAndIsr (a
    follower starts fetching both together)."""
    request, *others = [cluster.controller.request_for(cluster.controller_epoch, TOPIC, cluster.topic_id, partition,
                                                       replicas, cluster.ports) for partition in PARTITIONS]
    for other in others:
        request.partition_states += other.partition_states
    response = await cluster.nodes[to].rm.become_leader_or_follower(request)
    assert list(response.errors.values()) == [ErrorCode.NO_ERROR] * 2


async def _fill(node: Node, partition: int) -> int:
    """~2 MB in whole batches as leader (acks=1: the follower is not in the ISR); the log's bytes."""
    for seed in range(BATCHES):
        outcome = node.rm.append_records([(TOPIC, partition, make_batch(RECORDS, value_size=VALUE_SIZE, seed=seed))],
                                         1, 5000)
        results = outcome if isinstance(outcome, list) else await outcome
        assert results[0].error_code == ErrorCode.NO_ERROR
    hosted = node.rm.get_partition(TOPIC, partition)
    assert hosted is not None
    return hosted.log.size


def _follow_topic_configs(node: Node, overrides: dict[str, str]) -> None:
    """As the broker wires it (KafkaServer): topic configs reach the quotas through the log manager."""
    node.log_manager.add_topic_config_listener(node.rm.update_throttled_replicas)
    node.log_manager.update_topic_config(TOPIC, overrides)


async def _catch_up(cluster: ReplicationRig, throttle: Callable[[ReplicationRig], None]) -> tuple[float, float, int]:
    """A leader with two filled partitions; ``throttle`` set; then a new follower of both.
    (seconds until the unthrottled partition caught up, until the throttled one did, its bytes)."""
    leader = await cluster.start(LEADER)
    for partition in PARTITIONS:
        cluster.controller.leader_and_isr(cluster.controller_epoch, TOPIC, cluster.topic_id, partition,
                                          [LEADER, FOLLOWER], cluster.ports, leader=LEADER, isr=[LEADER])
    await _send_states(cluster, LEADER, [LEADER, FOLLOWER])
    size = await _fill(leader, THROTTLED)
    await _fill(leader, UNTHROTTLED)
    follower = await cluster.start(FOLLOWER)
    throttle(cluster)
    await _send_states(cluster, FOLLOWER, [LEADER, FOLLOWER])
    # From the fetcher's start: the LeaderAndIsr above created the logs (fsyncs: slow on a busy
    # disk) before adding the fetcher, whose task has not run yet.
    started = time.monotonic()
    caught_up: dict[int, float] = {}

    def done(partition: int) -> bool:
        ours, theirs = follower.rm.get_partition(TOPIC, partition), leader.rm.get_partition(TOPIC, partition)
        assert ours is not None and theirs is not None
        if partition not in caught_up and ours.log_end_offset == theirs.log_end_offset:
            caught_up[partition] = time.monotonic() - started
        return partition in caught_up

    await wait_for(lambda: done(UNTHROTTLED) + done(THROTTLED) == 2, "the follower to catch up", timeout=30)
    return caught_up[UNTHROTTLED], caught_up[THROTTLED], size


def _run(tmp_path: Path, scenario: Callable[[ReplicationRig], Awaitable[None]]) -> None:
    run_rig(tmp_path, CONFIG, scenario, timeout=60)


def _assert_not_slowed(seconds: float, size: int) -> None:
    """Far above the throttled rate (in practice it takes a few tens of milliseconds)."""
    assert size / seconds > 3 * RATE, f"{size} bytes took {seconds:.1f} s"


def _assert_throttled_rate(unthrottled: float, throttled: float, size: int) -> None:
    assert size >= 2_000_000  # ~2 MB
    _assert_not_slowed(unthrottled, size)
    rate = size / throttled
    assert rate == pytest.approx(RATE, rel=0.2), f"{size} bytes in {throttled:.1f} s: {rate / 1024:.0f} KB/s"


@pytest.mark.slow
def test_leader_throttle_bounds_a_catching_up_follower(tmp_path: Path) -> None:
    measured: list[tuple[float, float, int]] = []

    def throttle(cluster: ReplicationRig) -> None:
        leader = cluster.nodes[LEADER]
        # Kafka's reassignment throttles the current replicas as leaders: partition:leader id.
        _follow_topic_configs(leader, {"leader.replication.throttled.replicas": f"{THROTTLED}:{LEADER}"})
        leader.rm.quotas.update_rates(RATE, LONG_MAX)

    async def scenario(cluster: ReplicationRig) -> None:
        measured.append(await _catch_up(cluster, throttle))
        leader = cluster.nodes[LEADER].rm.quotas.leader
        assert leader.is_throttled((TOPIC, THROTTLED)) and not leader.is_throttled((TOPIC, UNTHROTTLED))
        follower = cluster.nodes[FOLLOWER].rm.quotas.follower
        assert follower.rate() == 0  # nothing throttled there: nothing counted

    _run(tmp_path, scenario)
    _assert_throttled_rate(*measured[0])


@pytest.mark.slow
def test_follower_throttle_bounds_its_own_catching_up(tmp_path: Path) -> None:
    measured: list[tuple[float, float, int]] = []

    def throttle(cluster: ReplicationRig) -> None:
        follower = cluster.nodes[FOLLOWER]
        # ... and the moving replicas as followers: partition:follower id.
        _follow_topic_configs(follower, {"follower.replication.throttled.replicas": f"{THROTTLED}:{FOLLOWER}"})
        follower.rm.quotas.update_rates(LONG_MAX, RATE)

    async def scenario(cluster: ReplicationRig) -> None:
        measured.append(await _catch_up(cluster, throttle))
        follower = cluster.nodes[FOLLOWER].rm.quotas.follower
        assert follower.rate() > 0 and not follower.is_throttled((TOPIC, UNTHROTTLED))

    _run(tmp_path, scenario)
    _assert_throttled_rate(*measured[0])


def test_unthrottled_replication_is_not_slowed(tmp_path: Path) -> None:
    """A rate on both sides but no throttled replicas: the whole 2 MB of both partitions at once."""
    measured: list[tuple[float, float, int]] = []

    def throttle(cluster: ReplicationRig) -> None:
        for node in cluster.nodes.values():
            _follow_topic_configs(node, {"leader.replication.throttled.replicas": f"{THROTTLED}:{LEADER + 7}"})
            node.rm.quotas.update_rates(RATE, RATE)

    async def scenario(cluster: ReplicationRig) -> None:
        measured.append(await _catch_up(cluster, throttle))

    _run(tmp_path, scenario)
    unthrottled, throttled, size = measured[0]
    _assert_not_slowed(unthrottled, size)
    _assert_not_slowed(throttled, size)
