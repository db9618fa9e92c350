"""Two replica managers replicating over real sockets: a follower's fetcher against the leader's
Fetch handler, the HW, acks=all, ISR shrink and expansion through AlterPartition, a restarted
follower catching up, and a leadership switch."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from broker.fetch_session import FetchSessionCache
from protocol.errors import ErrorCode
from replication.replica_manager import FetchParams
from replication.replication_config import ReplicationConfig
from replication.state_change_requests import StopReplicaPartition, StopReplicaStates
from storage.log_config import LogConfig
from tests.in_process import run, wait_for
from tests.replication.replication_rig import TOPIC, TP, Controller, Node, ReplicationRig, batches, produce, run_rig
from tests.storage.helpers import make_batch

CONFIG = ReplicationConfig(replica_lag_time_max_ms=600, replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=50)


class _Wanted:
    def __init__(self, fetch_offset: int) -> None:
        self.topic, self.partition, self.fetch_offset = TOPIC, 0, fetch_offset
        self.max_bytes, self.current_leader_epoch = 1 << 20, -1
        self.last_fetched_epoch = -1


def _run(tmp_path: Path, scenario: Callable[[ReplicationRig], Awaitable[None]]) -> None:
    run_rig(tmp_path, CONFIG, scenario)


def test_follower_replicates_and_acks_all_waits_for_it(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicationRig) -> None:
        leader, follower = await cluster.start(0), await cluster.start(1)
        await cluster.elect([0, 1])
        lp, fp = leader.rm.get_partition(*TP), follower.rm.get_partition(*TP)
        assert lp is not None and fp is not None and lp.is_leader and not fp.is_leader
        assert follower.rm.replica_fetcher_manager is not None
        assert follower.rm.replica_fetcher_manager.fetcher_for(TP) is not None
        for _ in range(20):
            result = await produce(leader.rm, 5)
            assert result.error_code == ErrorCode.NO_ERROR, result
            # acks=all answered only once the follower has it: the HW passed the append.
            assert lp.high_watermark >= result.info.last_offset + 1  # type: ignore[union-attr]
            assert fp.log_end_offset >= result.info.last_offset + 1  # type: ignore[union-attr]
        assert lp.log_end_offset == 100
        await wait_for(lambda: fp.high_watermark == 100, "the follower's HW (min(leader HW, own LEO))")
        # Offsets, epochs and bytes kept: the same batches, CRCs equal, in order.
        assert batches(fp.log) == batches(lp.log) and len(batches(lp.log)) == 20
        assert fp.log.leader_epoch_cache.latest_epoch == lp.leader_epoch
        # The newest Fetch both speak: replica id in replica_state (v15+), topics by id (v13+).
        assert {v for k, v in leader.server.versions if k == 1} == {17}
        # Produce and consume at the follower are refused.
        refused = await produce(follower.rm, 1, acks=1)
        assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        consumer = FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        read = follower.rm.fetch_messages(consumer, [_Wanted(0)])
        assert isinstance(read, list) and read[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    _run(tmp_path, scenario)


def test_consumers_see_only_up_to_the_hw_and_wake_when_it_moves(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicationRig) -> None:
        leader, follower = await cluster.start(0), await cluster.start(1)
        await cluster.elect([0, 1])
        lp = leader.rm.get_partition(*TP)
        assert lp is not None
        await produce(leader.rm, 3)
        assert lp.high_watermark == 3
        # The follower stops fetching (StopReplica without delete, as before a controlled shutdown).
        stop = StopReplicaStates(0, 1, [StopReplicaPartition(TOPIC, 0, -1, delete=False)])
        answer = await follower.rm.stop_replicas(stop)
        assert list(answer.errors.values()) == [0]
        assert follower.rm.get_partition(*TP) is not None  # hosted still: not deleted
        acked = await produce(leader.rm, 2, acks=1)
        assert acked.error_code == ErrorCode.NO_ERROR and lp.log_end_offset == 5 and lp.high_watermark == 3
        consumer = FetchParams(replica_id=-1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        read = leader.rm.fetch_messages(consumer, [_Wanted(3)])
        assert not isinstance(read, list)  # nothing committed past 3: the consumer long-polls
        poll = asyncio.ensure_future(read)
        await asyncio.sleep(0.1)
        assert not poll.done()
        # A follower fetch at 5 (the replica fetcher's request, made by hand) moves the HW to 5.
        follower_fetch = FetchParams(replica_id=1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        leader.rm.fetch_messages(follower_fetch, [_Wanted(5)])
        assert lp.high_watermark == 5
        results = await asyncio.wait_for(poll, 2)
        assert results[0].info is not None and results[0].info.size > 0 and results[0].high_watermark == 5

    _run(tmp_path, scenario)


def test_isr_shrinks_then_a_restarted_follower_catches_up_and_rejoins(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicationRig) -> None:
        leader, _ = await cluster.start(0), await cluster.start(1)
        await cluster.elect([0, 1])
        lp = leader.rm.get_partition(*TP)
        assert lp is not None
        lp.log.config = LogConfig.model_validate({"min.insync.replicas": 2})
        assert (await produce(leader.rm, 10)).error_code == ErrorCode.NO_ERROR
        # The follower dies: acks=all waits, then the ISR shrinks (AlterPartition) after the lag time.
        # The follower was last caught up when the leader read its last fetch, which may have been
        # parked up to replica.fetch.wait.max.ms before the stop: the shrink comes no sooner after.
        started = time.monotonic()
        await cluster.stop(1)
        waiting = asyncio.ensure_future(produce(leader.rm, 1, timeout_ms=10_000))
        await wait_for(lambda: lp.isr == [0], "the ISR to shrink to the leader")
        earliest_ms = CONFIG.replica_lag_time_max_ms - CONFIG.replica_fetch_wait_max_ms
        assert time.monotonic() - started >= earliest_ms / 1000 * 0.9
        assert cluster.controller.states[TP].isr == (0,) and lp.partition_epoch == 1
        # The append waiting for the HW ends once the ISR is below min.insync.replicas.
        assert (await asyncio.wait_for(waiting, 5)).error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        # Below min.insync.replicas nothing more is appended.
        end = lp.log_end_offset
        assert (await produce(leader.rm, 1)).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert lp.log_end_offset == end
        assert (await produce(leader.rm, 4, acks=1)).error_code == ErrorCode.NO_ERROR
        # The follower restarts on its old log dir and learns the current state: it catches up
        # and the leader proposes it back into the ISR.
        restarted = await cluster.start(1)
        await cluster.resend(1, [0, 1])
        await wait_for(lambda: lp.isr == [0, 1], "the follower to rejoin the ISR")
        assert cluster.controller.states[TP].isr == (0, 1) and lp.partition_epoch == 2
        fp = restarted.rm.get_partition(*TP)
        assert fp is not None
        await wait_for(lambda: fp.log_end_offset == lp.log_end_offset, "the follower to catch up")
        assert batches(fp.log) == batches(lp.log)
        assert (await produce(leader.rm, 1)).error_code == ErrorCode.NO_ERROR

    _run(tmp_path, scenario)


def test_leadership_switches_and_back(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicationRig) -> None:
        b0, b1 = await cluster.start(0), await cluster.start(1)
        elected: list[tuple[int, str, int]] = []
        for node in (b0, b1):
            node.rm.add_leadership_listener(
                TOPIC, lambda p, b=node.broker_id: elected.append((b, "elected", p)),
                lambda p, b=node.broker_id: elected.append((b, "resigned", p)))
        await cluster.elect([0, 1])
        assert (await produce(b0.rm, 5)).error_code == ErrorCode.NO_ERROR
        # Broker 1 takes over at a new leader epoch; broker 0 follows it.
        await cluster.elect([0, 1], leader=1)
        p0, p1 = b0.rm.get_partition(*TP), b1.rm.get_partition(*TP)
        assert p0 is not None and p1 is not None
        assert p1.is_leader and not p0.is_leader and p0.leader_epoch == p1.leader_epoch == 1
        assert [(e.epoch, e.start_offset) for e in p1.log.leader_epoch_cache.entries] == [(0, 0), (1, 5)]
        assert b0.rm.replica_fetcher_manager is not None and b0.rm.replica_fetcher_manager.fetcher_for(TP)
        assert b1.rm.replica_fetcher_manager is not None and not b1.rm.replica_fetcher_manager.fetcher_for(TP)
        result = await produce(b1.rm, 3)
        assert result.error_code == ErrorCode.NO_ERROR and result.info is not None and result.info.first_offset == 5
        await wait_for(lambda: p0.log_end_offset == 8, "the old leader to follow")
        assert batches(p0.log) == batches(p1.log)
        assert [e for (_, _, e) in batches(p1.log)] and batches(p1.log)[-1][1] == 1
        # And back: the preferred leader leads again.
        await cluster.elect([0, 1], leader=0)
        assert p0.is_leader and not p1.is_leader
        assert (await produce(b0.rm, 2)).error_code == ErrorCode.NO_ERROR
        await wait_for(lambda: p1.log_end_offset == 10, "broker 1 to follow again")
        assert [e for e in elected if e[0] == 0] == [(0, "elected", 0), (0, "resigned", 0), (0, "elected", 0)]
        assert [e for e in elected if e[0] == 1] == [(1, "elected", 0), (1, "resigned", 0)]

    _run(tmp_path, scenario)


def test_offset_out_of_range_truncates_or_restarts_at_the_leaders_log_start(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicationRig) -> None:
        b0, b1 = await cluster.start(0), await cluster.start(1)
        # Broker 1 led alone for a while (epoch 0) and wrote 9 records no one else has.
        await cluster.elect([1], leader=1, isr=[1])
        assert (await produce(b1.rm, 9)).error_code == ErrorCode.NO_ERROR
        # Broker 0 takes over with less data: the follower's log ends past the leader's.
        await cluster.elect([0, 1], leader=0, isr=[0])
        p0, p1 = b0.rm.get_partition(*TP), b1.rm.get_partition(*TP)
        assert p0 is not None and p1 is not None
        assert (await produce(b0.rm, 4, acks=1)).error_code == ErrorCode.NO_ERROR
        await wait_for(lambda: p1.log_end_offset == 4, "the follower to truncate to the leader's end")
        assert (await produce(b0.rm, 3, acks=1)).error_code == ErrorCode.NO_ERROR
        await wait_for(lambda: p1.log_end_offset == 7, "the follower to fetch on")
        assert batches(p1.log) == batches(p0.log)
        # The leader's log now starts past everything the follower has: it starts over there.
        await cluster.stop(1)
        await b0.rm.append_thread.run(p0.log.truncate_fully_and_start_at, 50)
        assert (await produce(b0.rm, 5, acks=1)).error_code == ErrorCode.NO_ERROR
        restarted = await cluster.start(1)
        await cluster.resend(1, [0, 1])
        fp = restarted.rm.get_partition(*TP)
        assert fp is not None
        await wait_for(lambda: fp.log_end_offset == 55, "the follower to restart at the leader's log start")
        assert fp.log.log_start_offset == 50 and batches(fp.log) == batches(p0.log)

    _run(tmp_path, scenario)


def test_three_brokers_lead_and_follow_many_partitions_with_two_fetchers_each(tmp_path: Path) -> None:
    partitions = 6
    config = ReplicationConfig(replica_lag_time_max_ms=5000, replica_fetch_wait_max_ms=100,
                               replica_fetch_backoff_ms=50, num_replica_fetchers=2)

    async def main() -> None:
        controller = Controller()
        topic_id = uuid.uuid4()
        nodes: dict[int, Node] = {}
        ports: dict[int, int] = {}
        try:
            for broker_id in range(3):
                node = nodes[broker_id] = Node(broker_id, tmp_path / f"b{broker_id}", config, {TOPIC: topic_id},
                                               controller)
                ports[broker_id] = await node.start(lambda: (0, "127.0.0.1", ports[0]))
            assignment = {p: [p % 3, (p + 1) % 3, (p + 2) % 3] for p in range(partitions)}
            for p, replicas in assignment.items():
                request = controller.leader_and_isr(1, TOPIC, topic_id, p, replicas, ports)
                for broker_id in replicas:
                    await nodes[broker_id].rm.become_leader_or_follower(request)
            for broker_id, node in nodes.items():
                fetchers = node.rm.replica_fetcher_manager
                assert fetchers is not None
                # Each broker follows 4 partitions led by the two others, spread over fetcher ids 0 and 1.
                assert {source for source, _ in fetchers.fetchers} == {0, 1, 2} - {broker_id}
                assert len(fetchers.fetchers) > 2
            for round_ in range(5):
                for p, replicas in assignment.items():
                    outcome = nodes[replicas[0]].rm.append_records([(TOPIC, p, make_batch(round_ + 1))], -1, 5000)
                    results = outcome if isinstance(outcome, list) else await outcome
                    assert results[0].error_code == ErrorCode.NO_ERROR
            for p, replicas in assignment.items():
                logs = [nodes[b].rm.get_partition(TOPIC, p) for b in replicas]
                assert all(x is not None for x in logs)
                leader = logs[0]
                assert leader is not None and leader.high_watermark == 15 and leader.isr == replicas
                for follower in logs[1:]:
                    assert follower is not None
                    await wait_for(lambda f=follower: f.high_watermark == 15, f"{TOPIC}-{p}'s follower HW")
                    assert batches(follower.log) == batches(leader.log)
        finally:
            for node in nodes.values():
                await node.close()

    run(main(), 60)


@pytest.mark.parametrize("fetch_version", [4, 11, 14])
def test_an_older_leader_is_fetched_from_at_its_highest_fetch_version(tmp_path: Path, fetch_version: int) -> None:
    async def scenario(cluster: ReplicationRig) -> None:
        leader = await cluster.start(0)
        leader.server.max_versions[1] = fetch_version  # replica_id in the request body (< v15), names (< v13)
        follower = await cluster.start(1)
        await cluster.elect([0, 1])
        assert (await produce(leader.rm, 7)).error_code == ErrorCode.NO_ERROR
        fp = follower.rm.get_partition(*TP)
        assert fp is not None and fp.log_end_offset == 7
        assert {v for k, v in leader.server.versions if k == 1} == {fetch_version}

    _run(tmp_path, scenario)


def test_a_follower_fetches_in_an_incremental_session(tmp_path: Path) -> None:
    """KIP-227 between brokers: once the session is open, a follower's request names only the
    partitions whose fetch offset moved; a session the leader lost is opened again."""
    partitions = 8

    async def scenario(cluster: ReplicationRig) -> None:
        leader, follower = await cluster.start(0), await cluster.start(1)
        for p in range(partitions):
            request = cluster.controller.leader_and_isr(1, TOPIC, cluster.topic_id, p, [0, 1], cluster.ports)
            for node in (leader, follower):
                await node.rm.become_leader_or_follower(request)

        async def produce(p: int, count: int) -> None:
            outcome = leader.rm.append_records([(TOPIC, p, make_batch(count))], -1, 5000)
            results = outcome if isinstance(outcome, list) else await outcome
            assert results[0].error_code == ErrorCode.NO_ERROR

        for p in range(partitions):
            await produce(p, 2)
        requests = leader.server.fetch_requests
        mark = len(requests)
        for _ in range(3):
            await produce(5, 4)
        incremental = requests[mark:]
        named = [{(t.topic_id, q.partition) for t in r.topics for q in t.partitions} for r in incremental]
        assert incremental and all(r.session_id != 0 and r.session_epoch > 0 for r in incremental)
        assert all(n <= {(cluster.topic_id, 5)} for n in named) and any(named)
        # The leader forgets every session (as a full cache evicts one): the follower's next request
        # is answered FETCH_SESSION_ID_NOT_FOUND, and it starts over with a full one.
        mark = len(requests)
        leader.server.services.fetch_sessions = FetchSessionCache(100)
        await produce(2, 3)
        restarted = requests[mark:]
        assert any(r.session_epoch == 0 and sum(len(t.partitions) for t in r.topics) == partitions
                   for r in restarted)
        await produce(6, 1)
        for p in range(partitions):
            lp, fp = leader.rm.get_partition(TOPIC, p), follower.rm.get_partition(TOPIC, p)
            assert lp is not None and fp is not None
            await wait_for(lambda f=fp, lead=lp: f.log_end_offset == lead.log_end_offset, f"{TOPIC}-{p} replicated")
            assert batches(fp.log) == batches(lp.log)

    _run(tmp_path, scenario)


def test_a_session_opened_before_the_leader_knew_the_topic_id_heals(tmp_path: Path) -> None:
    """LeaderAndIsr can reach a follower before UpdateMetadata reaches its leader: the follower's
    first fetch names a topic id the leader does not know yet (UNKNOWN_TOPIC_ID). The session keeps
    the partition, and once the leader's metadata has the topic its incremental fetches read it."""
    async def scenario(cluster: ReplicationRig) -> None:
        leader, follower = await cluster.start(0), await cluster.start(1)
        known = leader.server.services.metadata.topics
        hidden = known.pop(TOPIC)
        await cluster.elect([0, 1])
        await wait_for(lambda: len(leader.server.fetch_requests) >= 2, "the follower's fetches")
        assert leader.server.fetch_requests[-1].session_epoch > 0  # the session is open
        known[TOPIC] = hidden
        result = await produce(leader.rm, 5, timeout_ms=5000)
        assert result.error_code == ErrorCode.NO_ERROR
        fp = follower.rm.get_partition(*TP)
        assert fp is not None and fp.log_end_offset == 5

    _run(tmp_path, scenario)
