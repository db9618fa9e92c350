"""ListTransactions (66): the transactions this broker coordinates, filtered (KIP-664, KIP-994).

Filters combine: states (names Kafka shows, e.g. "Ongoing"; an unknown name
is echoed back in ``unknown_state_filters`` and matches nothing), producer
ids, and from v1 a duration (only transactions running longer than it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse, TransactionState

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.socket_server import RequestContext

API_KEY = 66
MIN_VERSION = 0
# v2 (KIP-1152, Kafka 4.1) adds a transactional id pattern: not served yet.
MAX_VERSION = 1

DURATION_FILTER_VERSION = 1


def handle(ctx: RequestContext, broker: BrokerServices, request: ListTransactionsRequest) -> ListTransactionsResponse:
    duration_ms = request.duration_filter if ctx.api_version >= DURATION_FILTER_VERSION else -1
    result = broker.transaction_coordinator.handle_list_transactions(
        request.producer_id_filters, request.state_filters, duration_ms)
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=result.error_code, unknown_state_filters=result.unknown_state_filters,
        transaction_states=[TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                             transaction_state=t.state_name)
                            for t in sorted(result.transaction_states, key=lambda t: t.transactional_id)])
