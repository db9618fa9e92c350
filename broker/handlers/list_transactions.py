"""ListTransactions (66): the transactions this broker coordinates, filtered (KIP-664, KIP-994, KIP-1152).

Filters combine: states (names Kafka shows, e.g. "Ongoing"; an unknown name
is echoed back in ``unknown_state_filters`` and matches nothing), producer
ids, from v1 a duration (only transactions running longer than it), and from
v2 a regular expression the whole transactional id must match (a pattern
that does not compile answers INVALID_REGULAR_EXPRESSION). The pattern is
compiled by Python's ``re``: Java's syntax beyond the common core (possessive
quantifiers, Unicode property classes) is not understood.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse, TransactionState

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: RequestContext, broker: BrokerServices, request: ListTransactionsRequest) -> ListTransactionsResponse:
    # A filter the request's version lacks keeps its default (-1 and None): no filter.
    result = broker.transaction_coordinator.handle_list_transactions(
        request.producer_id_filters, request.state_filters, request.duration_filter,
        request.transactional_id_pattern)
    described = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                 (t.transactional_id for t in result.transaction_states))
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=result.error_code, unknown_state_filters=result.unknown_state_filters,
        transaction_states=[TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                             transaction_state=t.state_name)
                            for t in sorted(result.transaction_states, key=lambda t: t.transactional_id)
                            if t.transactional_id in described])
