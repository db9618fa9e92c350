"""KIP-392 in the replica manager: the leader's preferred read replica for a consumer with a rack
(Kafka's RackAwareReplicaSelector over the in-sync replicas that hold the fetch offset), and a
follower serving a consumer's fetch up to its own high watermark."""

from __future__ import annotations

from pathlib import Path

from protocol.errors import ErrorCode
from protocol.request_constants import READ_COMMITTED
from replication.replica_manager import FetchParams
from replication.replica_selector import (
    LEADER_SELECTOR,
    RACK_AWARE_REPLICA_SELECTOR,
    RackAwareReplicaSelector,
    ReplicaView,
    replica_selector,
)
from replication.replication_config import ReplicationConfig
from replication.state_change_requests import StopReplicaPartition, StopReplicaStates
from tests.in_process import wait_for
from tests.replication.replication_rig import TP, ReplicationRig, produce, run_rig

CONFIG = ReplicationConfig(replica_lag_time_max_ms=10_000, replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=50)
RACKS = {0: "r0", 1: "r1", 2: "r2"}


class _Wanted:
    def __init__(self, fetch_offset: int) -> None:
        self.topic, self.partition, self.fetch_offset = TP[0], 0, fetch_offset
        self.max_bytes, self.current_leader_epoch = 1 << 20, -1
        self.last_fetched_epoch = -1


def _consumer(rack: str | None, replica_id: int = -1, isolation: int = 0) -> FetchParams:
    return FetchParams(replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                       isolation_level=isolation, client_rack=rack)


def test_rack_aware_selector_prefers_the_leader_then_the_most_caught_up() -> None:
    selector = RackAwareReplicaSelector(RACKS.get)
    leader = ReplicaView(0, "r0", 10, 0)
    behind, ahead, stale = ReplicaView(1, "r1", 8, 0), ReplicaView(2, "r1", 10, 50), ReplicaView(3, "r1", 10, 900)
    assert selector.select("r1", leader, [behind, stale, ahead]) is ahead
    assert selector.select("r0", leader, [behind, ahead]) is leader  # the leader's own rack
    assert selector.select("r9", leader, [behind, ahead]) is leader  # no replica in the rack
    assert selector.select("", leader, [behind, ahead]) is leader  # a client with no rack
    assert isinstance(replica_selector(RACK_AWARE_REPLICA_SELECTOR, RACKS.get), RackAwareReplicaSelector)
    assert replica_selector(LEADER_SELECTOR, RACKS.get) is None and replica_selector(None, RACKS.get) is None


def test_leader_names_the_rack_local_follower_and_the_follower_serves(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicationRig) -> None:
        nodes = [await cluster.start(b) for b in (0, 1, 2)]
        await cluster.elect([0, 1, 2])
        leader = nodes[0]
        lp = leader.rm.get_partition(*TP)
        assert lp is not None
        for _ in range(3):
            assert (await produce(leader.rm, 4)).error_code == ErrorCode.NO_ERROR
        followers = [n.rm.get_partition(*TP) for n in nodes[1:]]
        await wait_for(lambda: all(p is not None and p.high_watermark == 12 for p in followers), "followers' HW")
        await wait_for(lambda: all(r.log_end_offset == 12 for r in lp.remote_replicas.values()), "leader's view")
        # No selector: every consumer reads at the leader.
        read = leader.rm.fetch_messages(_consumer("r1"), [_Wanted(0)])
        assert isinstance(read, list) and read[0].preferred_read_replica == -1 and read[0].info.size > 0  # type: ignore[union-attr]
        leader.rm.reader.replica_selector = RackAwareReplicaSelector(RACKS.get)
        read = leader.rm.fetch_messages(_consumer("r1"), [_Wanted(0)])
        assert isinstance(read, list)
        assert read[0].error_code == ErrorCode.NO_ERROR and read[0].preferred_read_replica == 1
        assert read[0].info is not None and read[0].info.size == 0 and read[0].high_watermark == 12
        for params in (_consumer("r0"), _consumer(""), _consumer(None), _consumer("r1", replica_id=1)):
            read = leader.rm.fetch_messages(params, [_Wanted(0)])
            assert isinstance(read, list) and read[0].preferred_read_replica == -1
        # A fetch offset past what the follower holds: read at the leader.
        read = leader.rm.fetch_messages(_consumer("r2"), [_Wanted(13)])
        assert isinstance(read, list) and read[0].preferred_read_replica == -1
        # The follower serves a consumer with client metadata, up to its high watermark; without, it refuses.
        follower = nodes[1].rm
        read = follower.fetch_messages(_consumer("r1"), [_Wanted(0)])
        assert isinstance(read, list) and read[0].error_code == ErrorCode.NO_ERROR
        assert read[0].info is not None and read[0].info.size > 0 and read[0].high_watermark == 12
        read = follower.fetch_messages(_consumer("r1", isolation=READ_COMMITTED), [_Wanted(12)])
        assert isinstance(read, list) and read[0].error_code == ErrorCode.NO_ERROR and read[0].last_stable_offset == 12
        read = follower.fetch_messages(_consumer(None), [_Wanted(0)])
        assert isinstance(read, list) and read[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # Past the follower's log end: out of range (the consumer goes back to the leader).
        read = follower.fetch_messages(_consumer("r1"), [_Wanted(20)])
        assert isinstance(read, list) and read[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        # ListOffsets and OffsetsForLeaderEpoch stay with the leader, as Kafka's consumers send them.
        assert follower.fetch_offset_for_timestamp(TP, -1, 0, -1).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert follower.last_offset_for_leader_epoch(TP, -1, 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # A replica removed from here (reassigned away) serves no consumer: not hosted, which the Fetch
        # handler answers NOT_LEADER_OR_FOLLOWER while the cluster has the partition (the client goes
        # back to the leader).
        stop = StopReplicaStates(0, 1, [StopReplicaPartition(TP[0], 0, -1, delete=True)])
        assert list((await nodes[2].rm.stop_replicas(stop)).errors.values()) == [0]
        read = nodes[2].rm.fetch_messages(_consumer("r2"), [_Wanted(0)])
        assert isinstance(read, list) and read[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run_rig(tmp_path, CONFIG, scenario)


def test_out_of_sync_follower_is_not_preferred(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicationRig) -> None:
        nodes = [await cluster.start(b) for b in (0, 1, 2)]
        await cluster.elect([0, 1, 2])
        leader = nodes[0]
        leader.rm.reader.replica_selector = RackAwareReplicaSelector(RACKS.get)
        lp = leader.rm.get_partition(*TP)
        assert lp is not None
        assert (await produce(leader.rm, 2)).error_code == ErrorCode.NO_ERROR
        await wait_for(lambda: all(r.log_end_offset == 2 for r in lp.remote_replicas.values()), "followers fetch")
        # Follower 1 leaves the ISR (set here with no await before the fetches: no fetch re-adds it).
        lp.isr = [0, 2]
        read = leader.rm.fetch_messages(_consumer("r1"), [_Wanted(0)])
        assert isinstance(read, list) and read[0].preferred_read_replica == -1
        read = leader.rm.fetch_messages(_consumer("r2"), [_Wanted(0)])
        assert isinstance(read, list) and read[0].preferred_read_replica == 2

    run_rig(tmp_path, CONFIG, scenario)
