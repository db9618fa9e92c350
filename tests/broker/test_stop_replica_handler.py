"""StopReplica's wire versions, converted by its handler: every version becomes one list of
partitions (leader epoch, delete flag), and the replica manager's errors the answer."""

from __future__ import annotations

from broker.handlers.stop_replica import partition_states, response_for
from protocol.errors import ErrorCode
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaPartitionV0,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaTopicState,
    StopReplicaTopicV1,
)
from replication.state_change_requests import StopReplicaPartition, StopReplicaResult


def _decoded(request: StopReplicaRequest, version: int) -> StopReplicaRequest:
    return StopReplicaRequest.decode(request.to_bytes(version), version)


def test_every_version_becomes_one_list_of_partitions() -> None:
    v0 = StopReplicaRequest(controller_id=3, controller_epoch=2, delete_partitions=True, ungrouped_partitions=[
        StopReplicaPartitionV0(topic_name="t", partition_index=0), StopReplicaPartitionV0(topic_name="u", partition_index=1)])
    states = partition_states(_decoded(v0, 0), 0)
    assert (states.controller_id, states.controller_epoch) == (3, 2)
    assert states.partitions == [StopReplicaPartition("t", 0, -1, True), StopReplicaPartition("u", 1, -1, True)]
    v2 = StopReplicaRequest(controller_id=3, controller_epoch=2, delete_partitions=False, topics=[
        StopReplicaTopicV1(name="t", partition_indexes=[0, 1])])
    assert partition_states(_decoded(v2, 2), 2).partitions == [
        StopReplicaPartition("t", 0, -1, False), StopReplicaPartition("t", 1, -1, False)]
    v3 = StopReplicaRequest(controller_id=3, controller_epoch=2, topic_states=[StopReplicaTopicState(
        topic_name="t", partition_states=[StopReplicaPartitionState(partition_index=0, leader_epoch=4,
                                                                    delete_partition=True)])])
    assert partition_states(_decoded(v3, 3), 3).partitions == [StopReplicaPartition("t", 0, 4, True)]


def test_the_answer_lists_each_partitions_error() -> None:
    result = StopReplicaResult(ErrorCode.NO_ERROR, {("t", 0): 0, ("t", 1): ErrorCode.FENCED_LEADER_EPOCH})
    for version in (0, 4):
        answer = StopReplicaResponse.decode(response_for(result).to_bytes(version), version)
        assert [(e.topic_name, e.partition_index, e.error_code) for e in answer.partition_errors] == [
            ("t", 0, 0), ("t", 1, ErrorCode.FENCED_LEADER_EPOCH)]
