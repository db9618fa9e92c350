"""InitProducerId (22): producer ids for idempotent producers.

Without a transactional id Kafka "blindly accepts the request and returns a
new producer id" (TransactionCoordinator.handleInitProducerId), also when the
client passes its old id and epoch to recover (KIP-360): a new id starts a new
sequence space on every partition. Transactional ids need the transaction
coordinator, which is not built yet: they get COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.socket_server import RequestContext

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5  # v6 (KIP-939 two-phase commit) is transactional-only


async def handle(ctx: RequestContext, broker: BrokerServices, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                      producer_id=-1, producer_epoch=-1)
    producer_id = await broker.append_thread.run(broker.producer_ids.generate_producer_id)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR,
                                  producer_id=producer_id, producer_epoch=0)
