"""InitProducerId (22): producer ids for idempotent and transactional producers.

Without a transactional id Kafka "blindly accepts the request and returns a
new producer id" (TransactionCoordinator.handleInitProducerId), also when the
client passes its old id and epoch to recover (KIP-360): a new id starts a new
sequence space on every partition. With one, the transaction coordinator
answers: the id's producer id with a bumped epoch, fencing older instances.
Clients before v4 do not know PRODUCER_FENCED: they get INVALID_PRODUCER_EPOCH,
as Kafka answers them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_by_resource_type, authorize_cluster, authorize_transactional_id
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5  # v6 (KIP-939 two-phase commit) is not served

#: The first version whose clients know PRODUCER_FENCED.
PRODUCER_FENCED_VERSION = 4
#: The first version carrying the producer id and epoch of a recovering producer (KIP-360).
RECOVERY_VERSION = 3


def _refusal(ctx: RequestContext, broker: BrokerServices, transactional_id: str | None) -> ErrorCode | None:
    """Kafka's rule: WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE on the
    cluster or WRITE on some topic."""
    if transactional_id is not None:
        if authorize_transactional_id(ctx, broker, AclOperation.WRITE, transactional_id):
            return None
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if (authorize_cluster(ctx, broker, AclOperation.IDEMPOTENT_WRITE)
            or authorize_by_resource_type(ctx, broker, AclOperation.WRITE, ResourceType.TOPIC)):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def handle(ctx: RequestContext, broker: BrokerServices, request: InitProducerIdRequest) -> InitProducerIdResponse:
    refusal = _refusal(ctx, broker, request.transactional_id)
    if refusal is not None:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=refusal, producer_id=-1, producer_epoch=-1)
    if request.transactional_id is None:
        producer_id = await broker.generate_producer_id()
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR,
                                      producer_id=producer_id, producer_epoch=0)
    recovering = ctx.api_version >= RECOVERY_VERSION
    result = await broker.transaction_coordinator.handle_init_producer_id(
        request.transactional_id, request.transaction_timeout_ms,
        request.producer_id if recovering else -1, request.producer_epoch if recovering else -1)
    error = result.error
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < PRODUCER_FENCED_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)
