"""LeaderAndIsr and StopReplica at the replica manager: controller and leader epoch fencing,
per-partition errors, topic ids, log creation and deletion, leadership listeners."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicState,
)
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager
from replication.replication_config import ReplicationConfig
from storage.log_manager import LogManager
from tests.storage.helpers import make_batch

TOPIC_ID = uuid.uuid4()


def _request(controller_epoch: int, *states: tuple[str, int, int, int, list[int]],
             topic_id: uuid.UUID = TOPIC_ID, live_leaders: tuple[int, ...] = ()) -> LeaderAndIsrRequest:
    """States as (topic, partition, leader, leader epoch, replicas); the ISR is the replicas."""
    topics: dict[str, LeaderAndIsrTopicState] = {}
    for topic, index, leader, epoch, replicas in states:
        entry = topics.setdefault(topic, LeaderAndIsrTopicState(topic_name=topic, topic_id=topic_id,
                                                                partition_states=[]))
        entry.partition_states.append(LeaderAndIsrPartitionState(
            partition_index=index, controller_epoch=controller_epoch, leader=leader, leader_epoch=epoch,
            isr=list(replicas), partition_epoch=epoch, replicas=list(replicas)))
    # A live leader's port refuses connections: a follower's fetcher starts and backs off.
    leaders = [LeaderAndIsrLiveLeader(broker_id=b, host_name="127.0.0.1", port=1) for b in live_leaders]
    return LeaderAndIsrRequest(controller_id=0, controller_epoch=controller_epoch, topic_states=list(topics.values()),
                               live_leaders=leaders)


def _errors(response: LeaderAndIsrResponse, version: int = 7) -> dict[tuple[str, int], int]:
    """The answer per partition, after a trip through the codec at ``version``."""
    response = LeaderAndIsrResponse.decode(response.to_bytes(version), version)
    if version < 5:
        assert not response.topics
        return {(e.topic_name, e.partition_index): e.error_code for e in response.partition_errors}
    assert not response.partition_errors and all(t.topic_id != uuid.UUID(int=0) for t in response.topics)
    return {("t", e.partition_index): e.error_code for t in response.topics for e in t.partition_errors}


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

        def stop(controller_epoch: int, *parts: tuple[int, int, bool]) -> StopReplicaRequest:
            return StopReplicaRequest(controller_epoch=controller_epoch, topic_states=[StopReplicaTopicState(
                topic_name="t", partition_states=[StopReplicaPartitionState(
                    partition_index=i, leader_epoch=e, delete_partition=d) for i, e, d in parts])])

        stale = await rm.stop_replicas(stop(1, (0, 5, True)))
        assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH and rm.get_partition("t", 0) is not None
        fenced = await rm.stop_replicas(stop(2, (0, 3, True), (1, 3, True)))
        assert {(e.topic_name, e.partition_index): e.error_code for e in fenced.partition_errors} == {
            ("t", 0): ErrorCode.FENCED_LEADER_EPOCH, ("t", 1): ErrorCode.FENCED_LEADER_EPOCH}
        # The current epoch stops the replica, as Kafka's check (>=) does; so does EPOCH_DURING_DELETE (-2).
        deleted = await rm.stop_replicas(stop(2, (0, 4, True), (1, -2, False)))
        assert [e.error_code for e in deleted.partition_errors] == [0, 0]
        assert rm.get_partition("t", 0) is None and not log_dir.exists() and log_manager.get_log("t", 0) is None
        assert rm.get_partition("t", 1) is not None  # stopped, not deleted
        assert heard == [("elected", 0), ("elected", 1), ("left", 0)]

    _run(tmp_path, scenario)


def test_answers_take_the_shape_of_the_request_version(tmp_path: Path) -> None:
    async def scenario(rm: ReplicaManager, log_manager: LogManager) -> None:
        # v0-v1 list partition states ungrouped and get a flat answer.
        v1 = LeaderAndIsrRequest(controller_id=0, controller_epoch=1, ungrouped_partition_states=[
            LeaderAndIsrPartitionState(topic_name="t", partition_index=0, controller_epoch=1, leader=0,
                                       leader_epoch=0, isr=[0], replicas=[0]),
            LeaderAndIsrPartitionState(topic_name="t", partition_index=1, controller_epoch=1, leader=0,
                                       leader_epoch=0, isr=[2], replicas=[2])])
        answer = await rm.become_leader_or_follower(v1, version=1)
        assert _errors(answer, 1) == {("t", 0): 0, ("t", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # v2-v4 group by topic, without ids; v5+ answer by topic id (inferred from the ids when
        # the version is not given).
        v4 = _request(1, ("t", 0, 0, 1, [0]), topic_id=uuid.UUID(int=0))
        assert _errors(await rm.become_leader_or_follower(v4, version=4), 4) == {("t", 0): 0}
        v4_again = _request(1, ("t", 0, 0, 2, [0]), topic_id=uuid.UUID(int=0))
        assert _errors(await rm.become_leader_or_follower(v4_again), 4) == {("t", 0): 0}
        v7 = await rm.become_leader_or_follower(_request(1, ("t", 0, 0, 3, [0])))
        assert _errors(v7) == {("t", 0): 0} and [t.topic_id for t in v7.topics] == [TOPIC_ID]
        stale = await rm.become_leader_or_follower(_request(0, ("t", 0, 0, 4, [0])), version=7)
        assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert _errors(stale) == {("t", 0): ErrorCode.STALE_CONTROLLER_EPOCH}

    _run(tmp_path, scenario)
