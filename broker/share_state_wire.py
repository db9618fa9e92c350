"""The persister APIs (InitializeShareGroupState 83 ... ReadShareGroupStateSummary 87) on both ends.

The handlers answer each partition of a request with this broker's share
coordinator's outcome (:func:`partition_outcome`); the broker's persister sends a one-partition
request to the coordinator's broker and turns its answer back into a result
or a :class:`~coordinator.share.persister.PersisterError` (``*_request`` and
``*_outcome``). Both sides use the same conversions.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from broker.security.auth_helper import authorize_cluster
from coordinator.share.persister import PersisterError, PersisterStateBatch, ShareGroupPartitionState
from coordinator.share.share_coordinator_shard import READ_UNINITIALIZED_MESSAGE
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import delete_share_group_state as delete_
from protocol.messages import initialize_share_group_state as init_
from protocol.messages import read_share_group_state as read_
from protocol.messages import read_share_group_state_summary as summary_
from protocol.messages import write_share_group_state as write_

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext
    from coordinator.share.share_coordinator import ShareCoordinator

T = TypeVar("T")
#: A partition's answer: its error code and message, and the result when there is no error.
Outcome = tuple[ErrorCode, str | None, T | None]

#: What a summary answers for a share partition without state (Kafka's uninitialized start offset).
UNINITIALIZED_START_OFFSET = -1
#: The state epoch a share partition without state is summarized with.
NO_STATE_EPOCH = 0


def refusal(ctx: RequestContext, broker: BrokerServices) -> PersisterError | None:
    """CLUSTER_ACTION is needed, as for Kafka's other broker-to-broker APIs."""
    if authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION):
        return None
    return PersisterError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")


async def partition_outcome(broker: BrokerServices, refused: PersisterError | None,
                            call: Callable[[ShareCoordinator], Awaitable[T]]) -> Outcome[T]:
    """A partition's outcome from this broker's share coordinator: (NO_ERROR, None, result), or
    (Kafka's code, message, None)."""
    try:
        if refused is not None:
            raise refused
        coordinator = broker.share_coordinator
        if coordinator is None:
            raise PersisterError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
        return ErrorCode.NO_ERROR, None, await call(coordinator)
    except PersisterError as exc:
        return ErrorCode(exc.error_code), exc.message, None


def _raise_if_error(error_code: int, message: str | None) -> None:
    if error_code != ErrorCode.NO_ERROR:
        raise PersisterError(error_code, message or ErrorCode(error_code).name)


def _only(results: list[T], what: str) -> T:
    if len(results) != 1:
        raise PersisterError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{what}: expected one result, got {len(results)}")
    return results[0]


# -- InitializeShareGroupState ------------------------------------------------------------
def initialize_request(group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                       start_offset: int) -> init_.InitializeShareGroupStateRequest:
    return init_.InitializeShareGroupStateRequest(group_id=group_id, topics=[init_.InitializeStateData(
        topic_id=topic_id, partitions=[init_.PartitionData(partition=partition, state_epoch=state_epoch,
                                                           start_offset=start_offset)])])


def initialize_outcome(response: init_.InitializeShareGroupStateResponse) -> None:
    result = _only(_only(response.results, "InitializeShareGroupState").partitions, "InitializeShareGroupState")
    _raise_if_error(result.error_code, result.error_message)


# -- ReadShareGroupState ------------------------------------------------------------------
def read_request(group_id: str, topic_id: uuid.UUID, partition: int,
                 leader_epoch: int) -> read_.ReadShareGroupStateRequest:
    return read_.ReadShareGroupStateRequest(group_id=group_id, topics=[read_.ReadStateData(
        topic_id=topic_id, partitions=[read_.PartitionData(partition=partition, leader_epoch=leader_epoch)])])


def read_result(partition: int, outcome: Outcome[ShareGroupPartitionState]
                ) -> read_.PartitionResult:
    """A share partition never initialized is INVALID_REQUEST, as in Kafka; an error leaves the other
    fields at their defaults."""
    error, message, state = outcome
    if error == ErrorCode.NO_ERROR and state is None:
        error, message = ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED_MESSAGE
    if state is None:
        return read_.PartitionResult(partition=partition, error_code=error, error_message=message, state_batches=[])
    return read_.PartitionResult(
        partition=partition, error_code=error, error_message=message, state_epoch=state.state_epoch,
        start_offset=state.start_offset,
        state_batches=[read_.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                        delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                       for b in state.state_batches])


def is_uninitialized(state_epoch: int, start_offset: int) -> bool:
    """What a summary of a share partition without state answers: none tells it from a state so
    initialized."""
    return state_epoch == NO_STATE_EPOCH and start_offset == UNINITIALIZED_START_OFFSET


def read_outcome(response: read_.ReadShareGroupStateResponse, leader_epoch: int) -> ShareGroupPartitionState | None:
    """None for a share partition never initialized (INVALID_REQUEST: the persister's requests are
    otherwise well formed)."""
    result = _only(_only(response.results, "ReadShareGroupState").partitions, "ReadShareGroupState")
    if result.error_code == ErrorCode.INVALID_REQUEST:
        return None
    _raise_if_error(result.error_code, result.error_message)
    # The answer carries no leader epoch: after the read it is the reader's own (the coordinator
    # recorded it, or fenced an older one); -1 where the reader gave none.
    return ShareGroupPartitionState(result.state_epoch, result.start_offset, leader_epoch, tuple(
        PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in result.state_batches))


# -- WriteShareGroupState -----------------------------------------------------------------
def write_request(group_id: str, topic_id: uuid.UUID, partition: int,
                  state: ShareGroupPartitionState) -> write_.WriteShareGroupStateRequest:
    return write_.WriteShareGroupStateRequest(group_id=group_id, topics=[write_.WriteStateData(
        topic_id=topic_id, partitions=[write_.PartitionData(
            partition=partition, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            state_batches=[write_.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                             delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                           for b in state.state_batches])])])


def write_state_of(data: write_.PartitionData) -> ShareGroupPartitionState:
    return ShareGroupPartitionState(data.state_epoch, data.start_offset, data.leader_epoch, tuple(
        PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in data.state_batches))


def write_outcome(response: write_.WriteShareGroupStateResponse) -> None:
    result = _only(_only(response.results, "WriteShareGroupState").partitions, "WriteShareGroupState")
    _raise_if_error(result.error_code, result.error_message)


# -- DeleteShareGroupState ----------------------------------------------------------------
def delete_request(group_id: str, topic_id: uuid.UUID, partition: int) -> delete_.DeleteShareGroupStateRequest:
    return delete_.DeleteShareGroupStateRequest(group_id=group_id, topics=[delete_.DeleteStateData(
        topic_id=topic_id, partitions=[delete_.PartitionData(partition=partition)])])


def delete_outcome(response: delete_.DeleteShareGroupStateResponse) -> None:
    result = _only(_only(response.results, "DeleteShareGroupState").partitions, "DeleteShareGroupState")
    _raise_if_error(result.error_code, result.error_message)


# -- ReadShareGroupStateSummary -----------------------------------------------------------
def summary_request(group_id: str, topic_id: uuid.UUID, partition: int,
                    leader_epoch: int) -> summary_.ReadShareGroupStateSummaryRequest:
    return summary_.ReadShareGroupStateSummaryRequest(group_id=group_id, topics=[summary_.ReadStateSummaryData(
        topic_id=topic_id, partitions=[summary_.PartitionData(partition=partition, leader_epoch=leader_epoch)])])


def summary_result(partition: int, outcome: Outcome[tuple[int, int, int]]
                   ) -> summary_.PartitionResult:
    error, message, summary = outcome
    state_epoch, start_offset, leader_epoch = summary or (NO_STATE_EPOCH, UNINITIALIZED_START_OFFSET, -1)
    return summary_.PartitionResult(partition=partition, error_code=error, error_message=message,
                                    state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset)


def summary_outcome(response: summary_.ReadShareGroupStateSummaryResponse) -> tuple[int, int, int] | None:
    result = _only(_only(response.results, "ReadShareGroupStateSummary").partitions, "ReadShareGroupStateSummary")
    _raise_if_error(result.error_code, result.error_message)
    if is_uninitialized(result.state_epoch, result.start_offset):
        return None
    return result.state_epoch, result.start_offset, result.leader_epoch
