"""The controller's reading of a broker's KAFKA_STORAGE_ERROR answers: replicas on offline dirs."""

from __future__ import annotations

import uuid

from controller.controller_context import ControllerContext, PartitionReplica
from controller.log_dir_failures import new_offline_replicas
from controller.zk.zk_data import BrokerInfo
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionError, LeaderAndIsrResponse, LeaderAndIsrTopicError

TOPIC_ID = uuid.UUID(int=7)


def _context() -> ControllerContext:
    context = ControllerContext()
    context.add_live_brokers([BrokerInfo(b, [], None, 10 + b) for b in (1, 2, 3)])
    context.add_topic("t", TOPIC_ID)
    return context


def _answer(errors: dict[int, int]) -> LeaderAndIsrResponse:
    return LeaderAndIsrResponse(topics=[LeaderAndIsrTopicError(topic_id=TOPIC_ID, partition_errors=[
        LeaderAndIsrPartitionError(partition_index=p, error_code=code) for p, code in errors.items()])])


def test_storage_errors_make_replicas_offline_once() -> None:
    context = _context()
    answer = _answer({0: ErrorCode.KAFKA_STORAGE_ERROR, 1: ErrorCode.NO_ERROR, 2: ErrorCode.KAFKA_STORAGE_ERROR})
    assert new_offline_replicas(context, 1, answer) == [PartitionReplica("t", 0, 1), PartitionReplica("t", 2, 1)]
    assert new_offline_replicas(context, 1, answer) == []  # already known
    assert not context.is_replica_online(1, tp=("t", 0))
    assert context.is_replica_online(1, tp=("t", 1)) and context.is_replica_online(1)
    assert context.is_replica_online(2, tp=("t", 0))


def test_v4_answers_name_their_topic_and_a_restart_forgets() -> None:
    context = _context()
    answer = LeaderAndIsrResponse(partition_errors=[
        LeaderAndIsrPartitionError(topic_name="t", partition_index=3, error_code=ErrorCode.KAFKA_STORAGE_ERROR)])
    assert new_offline_replicas(context, 2, answer) == [PartitionReplica("t", 3, 2)]
    context.remove_live_brokers([2])  # the broker died (or bounced): its dirs are judged again
    assert context.replicas_on_offline_dirs == {}
