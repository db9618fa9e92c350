"""DescribeTransactions (65): the coordinator's state of transactional ids (KIP-664).

Each id is answered by this broker's transaction coordinator: NOT_COORDINATOR
for an id another broker coordinates, COORDINATOR_LOAD_IN_PROGRESS while its
``__transaction_state`` partition loads, TRANSACTIONAL_ID_NOT_FOUND for an id
it does not know (or is expiring).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorized_names
from coordinator.transaction.transaction_coordinator import DescribedTransaction
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


def _state(described: DescribedTransaction) -> TransactionState:
    topics: dict[str, list[int]] = {}
    for topic, partition in described.topic_partitions:
        topics.setdefault(topic, []).append(partition)
    return TransactionState(
        error_code=described.error, transactional_id=described.transactional_id,
        transaction_state=described.state_name, transaction_timeout_ms=described.txn_timeout_ms,
        transaction_start_time_ms=described.txn_start_timestamp, producer_id=described.producer_id,
        producer_epoch=described.producer_epoch,
        topics=[TopicData(topic=t, partitions=ps) for t, ps in topics.items()])


def handle(ctx: RequestContext, broker: BrokerServices,
           request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    coordinator = broker.transaction_coordinator
    described = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                 request.transactional_ids)
    states = []
    for tid in request.transactional_ids:
        if tid not in described:
            states.append(TransactionState(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                           transactional_id=tid, transaction_state="", producer_id=-1,
                                           producer_epoch=-1, topics=[]))
            continue
        state = _state(coordinator.handle_describe_transactions(tid))
        if broker.authorizer is not None:
            # Kafka leaves out the partitions of topics the client may not DESCRIBE
            visible = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                       (t.topic for t in state.topics))
            state.topics = [t for t in state.topics if t.topic in visible]
        states.append(state)
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
