"""LeaderAndIsr and StopReplica at the replica manager: controller and leader epoch fencing,
per-partition errors, topic ids, log creation and deletion, leadership listeners; and
``ReplicaStateChanges``' steps (``make_leaders``, ``make_followers``, ``start_fetchers``) alone."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from replication.append_thread import AppendThread
from replication.hosted_partitions import HostedPartitions
from replication.isr_manager import IsrManager
from replication.partition import Partition
from replication.purgatories import Purgatories
from replication.replica_manager import ReplicaManager
from replication.replica_state_changes import ReplicaStateChanges
from replication.replication_config import ReplicationConfig
from replication.state_change_requests import (
    BrokerEndpoint,
    LeaderAndIsrResult,
    LeaderAndIsrStates,
    PartitionState,
    StopReplicaPartition,
    StopReplicaStates,
)
from storage.log_manager import LogManager
from tests.storage.helpers import make_batch

TOPIC_ID = uuid.uuid4()


def _request(controller_epoch: int, *states: tuple[str, int, int, int, list[int]],
             topic_id: uuid.UUID = TOPIC_ID, live_leaders: tuple[int, ...] = ()) -> LeaderAndIsrStates:
    """States as (topic, partition, leader, leader epoch, replicas); the ISR is the replicas."""
    partition_states = [PartitionState(topic, topic_id, LeaderAndIsrPartitionState(
        topic_name=topic, partition_index=index, controller_epoch=controller_epoch, leader=leader, leader_epoch=epoch,
        isr=list(replicas), partition_epoch=epoch, replicas=list(replicas)))
        for topic, index, leader, epoch, replicas in states]
    # A live leader's port refuses connections: a follower's fetcher starts and backs off.
    leaders = {b: BrokerEndpoint(b, "127.0.0.1", 1) for b in live_leaders}
    return LeaderAndIsrStates(0, controller_epoch, partition_states, leaders)


def _errors(result: LeaderAndIsrResult) -> dict[tuple[str, int], int]:
    return dict(result.errors)


def _run(tmp_path: Path, scenario: Callable[[ReplicaManager, LogManager], Awaitable[None]],
         config: ReplicationConfig | None = None) -> None:
    async def main() -> None:
        log_manager = LogManager([tmp_path / "logs"], broker_id=0)
        log_manager.startup()
        executor = concurrent.futures.ThreadPoolExecutor(1)
        rm = ReplicaManager(0, log_manager, AppendThread(executor), config)
        try:
            await scenario(rm, log_manager)
        finally:
            rm.shutdown()
            await rm.shutdown_replication()
            executor.shutdown(wait=True)
            log_manager.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_leader_and_isr_creates_logs_and_answers_per_partition(tmp_path: Path) -> None:
    async def scenario(rm: ReplicaManager, log_manager: LogManager) -> None:
        heard: list[tuple[str, int]] = []
        rm.add_leadership_listener("t", lambda p: heard.append(("elected", p)), lambda p: heard.append(("left", p)))
        response = await rm.become_leader_or_follower(_request(
            3, ("t", 0, 0, 0, [0]), ("t", 1, 0, 0, [0, 1]), ("t", 2, 1, 0, [1, 2])))
        assert response.error_code == ErrorCode.NO_ERROR
        # Broker 0 is no replica of t-2: refused, no log.
        assert _errors(response) == {("t", 0): 0, ("t", 1): 0, ("t", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert log_manager.get_log("t", 0) is not None and log_manager.get_log("t", 2) is None
        assert rm.controller_epoch == 3 and heard == [("elected", 0), ("elected", 1)]
        p0 = rm.get_partition("t", 0)
        assert p0 is not None and p0.is_leader and p0.topic_id == TOPIC_ID and p0.isr == [0]
        assert p0.log.leader_epoch_cache.latest_epoch == 0  # the epoch starts at the election, not the first append
        # The same leader epoch again, or an older one: STALE_CONTROLLER_EPOCH for the partition (Kafka's answer).
        again = await rm.become_leader_or_follower(_request(3, ("t", 0, 0, 0, [0])))
        assert _errors(again) == {("t", 0): ErrorCode.STALE_CONTROLLER_EPOCH}
        # An older controller epoch: refused whole.
        stale = await rm.become_leader_or_follower(_request(2, ("t", 0, 0, 5, [0])))
        assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH and p0.leader_epoch == 0
        # Another topic id for a hosted partition.
        other = await rm.become_leader_or_follower(_request(3, ("t", 0, 0, 1, [0]), topic_id=uuid.uuid4()))
        assert _errors(other) == {("t", 0): ErrorCode.INCONSISTENT_TOPIC_ID}
        # Single-broker style appends keep working on a partition led through LeaderAndIsr.
        results = rm.append_records([("t", 0, make_batch(2))], -1, 1000)
        results = results if isinstance(results, list) else await results
        assert results[0].error_code == 0 and p0.high_watermark == 2

    _run(tmp_path, scenario)


@pytest.mark.parametrize("high_watermark_only", [False, True])
def test_becoming_follower_resigns_and_leaves_truncation_to_the_fetcher(tmp_path: Path,
                                                                        high_watermark_only: bool) -> None:
    """A new follower keeps its log: its fetcher truncates where the leader's epochs say it
    diverged (KIP-101). Only the test switch for Kafka's old behaviour truncates to the HW."""
    async def scenario(rm: ReplicaManager, log_manager: LogManager) -> None:
        heard: list[tuple[str, int]] = []
        rm.add_leadership_listener("t", lambda p: heard.append(("elected", p)), lambda p: heard.append(("left", p)))
        await rm.become_leader_or_follower(_request(1, ("t", 0, 0, 0, [0, 1])))
        p = rm.get_partition("t", 0)
        assert p is not None
        pending = rm.append_records([("t", 0, make_batch(4))], -1, 10_000)
        assert not isinstance(pending, list)  # the follower has fetched nothing: acks=all waits
        waiting = asyncio.ensure_future(pending)
        await asyncio.sleep(0.05)
        assert p.log_end_offset == 4 and p.high_watermark == 0
        # Leadership moves to broker 1 (live: a fetcher starts, finding nothing to fetch from).
        response = await rm.become_leader_or_follower(_request(1, ("t", 0, 1, 1, [0, 1]), live_leaders=(1,)))
        assert _errors(response) == {("t", 0): 0}
        assert not p.is_leader and p.leader_id == 1 and heard == [("elected", 0), ("left", 0)]
        # The waiting produce ends at once, not at its timeout.
        results = await asyncio.wait_for(waiting, 1)
        assert results[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert p.log_end_offset == (0 if high_watermark_only else 4)

    _run(tmp_path, scenario, ReplicationConfig(truncate_to_high_watermark_only=high_watermark_only))


def test_a_follower_of_no_live_leader_keeps_its_log(tmp_path: Path) -> None:
    """The controller takes a dead leader out of the ISR (leader -1) before it elects: a follower
    told so must keep everything above its high watermark, since it may be the next leader and
    those records may have been acknowledged (Kafka's makeFollowers skips such partitions)."""
    async def scenario(rm: ReplicaManager, log_manager: LogManager) -> None:
        await rm.become_leader_or_follower(_request(1, ("t", 0, 0, 0, [0, 1])))
        p = rm.get_partition("t", 0)
        assert p is not None
        results = rm.append_records([("t", 0, make_batch(4))], 1, 10_000)
        results = results if isinstance(results, list) else await results
        # acks=1: written, not yet replicated, so above the high watermark.
        assert results[0].error_code == 0 and p.log_end_offset == 4 and p.high_watermark == 0
        # Leader 1 is not among the live leaders, then no leader at all: the log stays whole.
        for leader, epoch in ((1, 1), (-1, 2)):
            response = await rm.become_leader_or_follower(_request(1, ("t", 0, leader, epoch, [0, 1])))
            assert _errors(response) == {("t", 0): 0}
            assert not p.is_leader and p.log_end_offset == 4
        # Elected again: everything it kept is there to be served.
        await rm.become_leader_or_follower(_request(1, ("t", 0, 0, 3, [0])))
        assert p.is_leader and p.log_end_offset == 4

    _run(tmp_path, scenario)


def test_stop_replica_fences_by_leader_epoch_and_deletes(tmp_path: Path) -> None:
    async def scenario(rm: ReplicaManager, log_manager: LogManager) -> None:
        heard: list[tuple[str, int]] = []
        rm.add_leadership_listener("t", lambda p: heard.append(("elected", p)), lambda p: heard.append(("left", p)))
        await rm.become_leader_or_follower(_request(2, ("t", 0, 0, 4, [0]), ("t", 1, 0, 4, [0])))
        log_dir = log_manager.get_log("t", 0).dir  # type: ignore[union-attr]
        assert log_dir.is_dir()

        def stop(controller_epoch: int, *parts: tuple[int, int, bool]) -> StopReplicaStates:
            return StopReplicaStates(0, controller_epoch, [StopReplicaPartition("t", i, e, d) for i, e, d in parts])

        stale = await rm.stop_replicas(stop(1, (0, 5, True)))
        assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH and rm.get_partition("t", 0) is not None
        fenced = await rm.stop_replicas(stop(2, (0, 3, True), (1, 3, True)))
        assert fenced.errors == {
            ("t", 0): ErrorCode.FENCED_LEADER_EPOCH, ("t", 1): ErrorCode.FENCED_LEADER_EPOCH}
        # The current epoch stops the replica, as Kafka's check (>=) does; so does EPOCH_DURING_DELETE (-2).
        deleted = await rm.stop_replicas(stop(2, (0, 4, True), (1, -2, False)))
        assert list(deleted.errors.values()) == [0, 0]
        assert rm.get_partition("t", 0) is None and not log_dir.exists() and log_manager.get_log("t", 0) is None
        assert rm.get_partition("t", 1) is not None  # stopped, not deleted
        assert heard == [("elected", 0), ("elected", 1), ("left", 0)]

    _run(tmp_path, scenario)


# -- ReplicaStateChanges' steps, each alone -----------------------------------------------------


class _Fetchers:
    """A fetcher manager that records what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def add_fetcher_for_partitions(self, leaders: dict[tuple[str, int], BrokerEndpoint]) -> None:
        self.calls.append(("add", dict(leaders)))

    def remove_fetcher_for_partitions(self, tps: list[tuple[str, int]]) -> None:
        self.calls.append(("remove", list(tps)))

    def shutdown_idle_fetcher_threads(self) -> None:
        self.calls.append(("shutdown_idle", None))

    async def shutdown(self) -> None:
        pass


def _steps(tmp_path: Path, scenario: Callable[[ReplicaStateChanges, _Fetchers, list[tuple[str, int, bool]],
                                               LogManager], Awaitable[None]]) -> None:
    """ReplicaStateChanges over real partitions, purgatories and logs, with a recording fetcher
    manager and leadership listener."""
    async def main() -> None:
        log_manager = LogManager([tmp_path / "logs"], broker_id=0)
        log_manager.startup()
        executor = concurrent.futures.ThreadPoolExecutor(1)
        hosted = HostedPartitions()
        purgatories = Purgatories(hosted)
        fetchers = _Fetchers()
        heard: list[tuple[str, int, bool]] = []
        changes = ReplicaStateChanges(0, hosted, log_manager, AppendThread(executor), purgatories,
                                      IsrManager(0, hosted, purgatories), lambda t, p, e: heard.append((t, p, e)),
                                      lambda: fetchers, ReplicationConfig())  # type: ignore[arg-type, return-value]
        changes.fetcher_manager = fetchers  # type: ignore[assignment]
        try:
            await scenario(changes, fetchers, heard, log_manager)
        finally:
            purgatories.shutdown()
            executor.shutdown(wait=True)
            log_manager.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def _host(changes: ReplicaStateChanges, log_manager: LogManager, index: int, leader: int,
          topic_id: uuid.UUID = TOPIC_ID) -> Partition:
    """A hosted partition of "t" at leader epoch 0 under ``leader``."""
    partition = Partition("t", index, topic_id, log_manager.get_or_create_log("t", index), 0, [0, 1], 0)
    partition.leader_id = leader
    changes._hosted.add(partition)
    return partition


def _state(index: int, leader: int, epoch: int, topic_id: uuid.UUID = TOPIC_ID) -> PartitionState:
    return _request(1, ("t", index, leader, epoch, [0, 1]), topic_id=topic_id).partition_states[0]


def test_make_leaders_leads_stops_the_fetcher_and_wakes_parked_fetches(tmp_path: Path) -> None:
    async def scenario(changes: ReplicaStateChanges, fetchers: _Fetchers, heard: list[tuple[str, int, bool]],
                       log_manager: LogManager) -> None:
        follower = _host(changes, log_manager, 0, leader=1)
        leader = _host(changes, log_manager, 1, leader=0)
        parked = changes._purgatories.fetch.park([("t", 0)], 10)
        new_leaders = changes.make_leaders([_state(0, 0, 1), _state(1, 0, 1)], now=1000)
        assert follower.is_leader and follower.leader_epoch == 1 and leader.leader_epoch == 1
        # Each partition's fetcher stopped; only the partition that was not leading is an election.
        assert fetchers.calls == [("remove", [("t", 0)]), ("remove", [("t", 1)])]
        assert heard == [("t", 0, True)]
        # Step 3's input: where each new epoch starts (the log end at the election).
        assert [(p.partition_index, epoch, start) for p, epoch, start in new_leaders] == [(0, 1, 0), (1, 1, 0)]
        assert await asyncio.wait_for(parked.wait(), 1) == [("t", 0)]  # a new epoch: the fetch reads again

    _steps(tmp_path, scenario)


def test_make_followers_resigns_answers_waiting_produces_and_skips_dead_leaders(tmp_path: Path) -> None:
    async def scenario(changes: ReplicaStateChanges, fetchers: _Fetchers, heard: list[tuple[str, int, bool]],
                       log_manager: LogManager) -> None:
        zero = uuid.UUID(int=0)
        led = _host(changes, log_manager, 0, leader=0, topic_id=zero)
        changes.make_leaders([_state(0, 0, 1)], now=1000)
        waiting = asyncio.ensure_future(changes._purgatories.produce.wait({("t", 0): 5}, 10))
        await asyncio.sleep(0)
        other = _host(changes, log_manager, 1, leader=1)
        fetchers.calls.clear()
        heard.clear()
        live = {1: BrokerEndpoint(1, "127.0.0.1", 1)}
        new_followers = changes.make_followers([_state(0, 1, 2), _state(1, 2, 2)], live)
        assert not led.is_leader and led.leader_id == 1 and other.leader_id == 2
        assert led.topic_id == TOPIC_ID  # learned from the request
        assert heard == [("t", 0, False)]  # only the partition that was leading resigns
        assert fetchers.calls == [("remove", [("t", 0)]), ("remove", [("t", 1)])]
        # The produce waiting on the former leader ends now, not at its timeout.
        assert await asyncio.wait_for(waiting, 1) == {("t", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
        # Broker 2 is not a live leader: no fetcher for t-1 (its log is kept whole).
        assert [(p.partition_index, leader) for p, leader in new_followers] == [(0, live[1])]

    _steps(tmp_path, scenario)


def test_start_fetchers_skips_partitions_that_moved_on(tmp_path: Path) -> None:
    async def scenario(changes: ReplicaStateChanges, fetchers: _Fetchers, heard: list[tuple[str, int, bool]],
                       log_manager: LogManager) -> None:
        endpoint = BrokerEndpoint(1, "127.0.0.1", 1)
        following = _host(changes, log_manager, 0, leader=1)
        leading_again = _host(changes, log_manager, 1, leader=0)
        gone = _host(changes, log_manager, 2, leader=1)
        changes._hosted.remove("t", 2)
        changes.start_fetchers([(following, endpoint), (leading_again, endpoint), (gone, endpoint)])
        assert fetchers.calls == [("add", {("t", 0): endpoint}), ("shutdown_idle", None)]
        fetchers.calls.clear()
        changes.start_fetchers([])  # nothing to fetch: idle fetchers still stop
        assert fetchers.calls == [("shutdown_idle", None)]

    _steps(tmp_path, scenario)
