"""EndTxn (26): commit or abort a producer's transaction.

The answer comes once PrepareCommit / PrepareAbort is in
``__transaction_state``, as Kafka answers: the outcome is durable then, and
the coordinator writes the markers and the completion after. Clients before
v2 get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED.

v5 is transaction version 2 (KIP-890 part 2): every EndTxn bumps the producer
epoch, the markers carry the bumped epoch, and the response tells the client
the producer id and epoch to continue with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_transactional_id
from coordinator.transaction.transaction_coordinator import EndTxnResult
from coordinator.transaction.transaction_state_manager import TransactionResult
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5

PRODUCER_FENCED_VERSION = 2
#: From this version on the client speaks transaction version 2.
EPOCH_BUMP_VERSION = 5


async def handle(ctx: RequestContext, broker: BrokerServices, request: EndTxnRequest) -> EndTxnResponse:
    if not authorize_transactional_id(ctx, broker, AclOperation.WRITE, request.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              producer_id=-1, producer_epoch=-1)
    result = TransactionResult.COMMIT if request.committed else TransactionResult.ABORT
    coordinator = broker.transaction_coordinator
    if ctx.api_version >= EPOCH_BUMP_VERSION:
        ended = await coordinator.handle_end_transaction_with_epoch_bump(
            request.transactional_id, request.producer_id, request.producer_epoch, result)
    else:
        ended = EndTxnResult(await coordinator.handle_end_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch, result))
    error = ended.error
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < PRODUCER_FENCED_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse(throttle_time_ms=0, error_code=error, producer_id=ended.producer_id,
                          producer_epoch=ended.producer_epoch)
