"""LeaderAndIsr's wire versions, converted by its handler both ways: every version's request
becomes one list of partition states, and the replica manager's per-partition errors the
version's answer (a flat list below v5, by topic id from v5)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from pathlib import Path

from broker.handlers.leader_and_isr import error_result, partition_states, response_for
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicState,
)
from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager
from replication.state_change_requests import BrokerEndpoint, LeaderAndIsrResult
from storage.log_manager import LogManager

ZERO = uuid.UUID(int=0)
T_ID, U_ID = uuid.uuid4(), uuid.uuid4()


def _ps(topic: str, index: int, leader: int = 0, epoch: int = 0, replicas: tuple[int, ...] = (0,)
        ) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(topic_name=topic, partition_index=index, controller_epoch=1, leader=leader,
                                      leader_epoch=epoch, isr=list(replicas), replicas=list(replicas))


def _decoded(response: LeaderAndIsrResponse, version: int) -> LeaderAndIsrResponse:
    return LeaderAndIsrResponse.decode(response.to_bytes(version), version)


def _grouped(*topics: tuple[str, uuid.UUID, list[LeaderAndIsrPartitionState]], epoch: int = 1) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(controller_id=3, controller_epoch=epoch, topic_states=[
        LeaderAndIsrTopicState(topic_name=name, topic_id=topic_id, partition_states=states)
        for name, topic_id, states in topics],
        live_leaders=[LeaderAndIsrLiveLeader(broker_id=1, host_name="h", port=9092)])


def test_every_request_version_becomes_one_list_of_partition_states() -> None:
    # v0-v1: ungrouped, each state naming its topic; taken topic by topic, without ids.
    v1 = LeaderAndIsrRequest(controller_id=3, controller_epoch=2, ungrouped_partition_states=[
        _ps("t", 0), _ps("u", 0), _ps("t", 1)])
    states = partition_states(LeaderAndIsrRequest.decode(v1.to_bytes(1), 1), 1)
    assert (states.controller_id, states.controller_epoch) == (3, 2)
    assert [(s.topic, s.state.partition_index, s.topic_id) for s in states.partition_states] == [
        ("t", 0, ZERO), ("t", 1, ZERO), ("u", 0, ZERO)]
    # v2-v4 group by topic, without ids; v5+ with them.
    request = _grouped(("t", T_ID, [_ps("t", 0), _ps("t", 1)]), ("u", U_ID, [_ps("u", 0)]))
    for version, ids in ((4, (ZERO, ZERO, ZERO)), (7, (T_ID, T_ID, U_ID))):
        states = partition_states(LeaderAndIsrRequest.decode(request.to_bytes(version), version), version)
        assert [(s.topic, s.state.partition_index) for s in states.partition_states] == [("t", 0), ("t", 1), ("u", 0)]
        assert tuple(s.topic_id for s in states.partition_states) == ids
        assert states.live_leaders == {1: BrokerEndpoint(1, "h", 9092)}


def test_results_take_the_shape_of_the_request_version() -> None:
    request = _grouped(("t", T_ID, [_ps("t", 0), _ps("t", 1)]), ("u", U_ID, [_ps("u", 0)]))
    states = partition_states(request, 7)
    result = LeaderAndIsrResult(ErrorCode.NO_ERROR, {("t", 0): 0, ("t", 1): ErrorCode.STALE_CONTROLLER_EPOCH,
                                                     ("u", 0): 0})
    for version in (0, 4):
        flat = _decoded(response_for(result, states, version), version)
        assert not flat.topics
        assert [(e.topic_name, e.partition_index, e.error_code) for e in flat.partition_errors] == [
            ("t", 0, 0), ("t", 1, ErrorCode.STALE_CONTROLLER_EPOCH), ("u", 0, 0)]
    for version in (5, 7):
        grouped = _decoded(response_for(result, states, version), version)
        assert not grouped.partition_errors
        assert [(t.topic_id, [(e.partition_index, e.error_code) for e in t.partition_errors])
                for t in grouped.topics] == [(T_ID, [(0, 0), (1, ErrorCode.STALE_CONTROLLER_EPOCH)]), (U_ID, [(0, 0)])]


def test_a_refused_request_answers_its_error_on_every_partition() -> None:
    states = partition_states(_grouped(("t", T_ID, [_ps("t", 0), _ps("t", 1)])), 7)
    error = ErrorCode.STALE_BROKER_EPOCH
    answer = _decoded(response_for(error_result(states, error), states, 7), 7)
    assert answer.error_code == error
    assert [(t.topic_id, [e.error_code for e in t.partition_errors]) for t in answer.topics] == [(T_ID, [error] * 2)]


def test_the_replica_manager_answers_every_version_through_the_handler(tmp_path: Path) -> None:
    """A v1 request, a v4 one and a v7 one through the conversions and a real replica manager."""
    async def main() -> None:
        log_manager = LogManager([tmp_path / "logs"], broker_id=0)
        log_manager.startup()
        executor = concurrent.futures.ThreadPoolExecutor(1)
        rm = ReplicaManager(0, log_manager, AppendThread(executor))

        async def send(request: LeaderAndIsrRequest, version: int) -> LeaderAndIsrResponse:
            states = partition_states(LeaderAndIsrRequest.decode(request.to_bytes(version), version), version)
            return _decoded(response_for(await rm.become_leader_or_follower(states), states, version), version)

        try:
            v1 = LeaderAndIsrRequest(controller_id=0, controller_epoch=1, ungrouped_partition_states=[
                _ps("t", 0), _ps("t", 1, replicas=(2,))])
            answer = await send(v1, 1)
            assert {(e.topic_name, e.partition_index): e.error_code for e in answer.partition_errors} == {
                ("t", 0): 0, ("t", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            v4 = await send(_grouped(("t", T_ID, [_ps("t", 0, epoch=1)])), 4)
            assert [(e.topic_name, e.error_code) for e in v4.partition_errors] == [("t", 0)]
            v7 = await send(_grouped(("t", T_ID, [_ps("t", 0, epoch=2)])), 7)
            assert [t.topic_id for t in v7.topics] == [T_ID] and v7.topics[0].partition_errors[0].error_code == 0
            partition = rm.get_partition("t", 0)
            assert partition is not None and partition.topic_id == T_ID  # learned once a version carried it
            stale = await send(_grouped(("t", T_ID, [_ps("t", 0, epoch=3)]), epoch=0), 7)
            assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
            assert [e.error_code for t in stale.topics for e in t.partition_errors] == [ErrorCode.STALE_CONTROLLER_EPOCH]
        finally:
            rm.shutdown()
            await rm.shutdown_replication()
            executor.shutdown(wait=True)
            log_manager.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))
