"""AddOffsetsToTxn (25): a transactional producer will commit a group's offsets in its transaction.

The group's ``__consumer_offsets`` partition joins the transaction, so that
the commit or abort marker reaches the offsets TxnOffsetCommit writes there.
Clients before v2 get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.handlers.find_coordinator import ensure_offsets_topic
from broker.security.auth_helper import authorize_group, authorize_transactional_id
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4  # v4 only allows TRANSACTION_ABORTABLE, which pafka never answers yet

PRODUCER_FENCED_VERSION = 2


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not authorize_transactional_id(ctx, broker, AclOperation.WRITE, request.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorize_group(ctx, broker, AclOperation.READ, request.group_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    # The offsets partition must exist for its marker to be written.
    error = await ensure_offsets_topic(broker)
    if error == ErrorCode.NO_ERROR:
        error = await broker.transaction_coordinator.handle_add_offsets_to_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < PRODUCER_FENCED_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)
