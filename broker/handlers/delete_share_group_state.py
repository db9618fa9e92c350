"""DeleteShareGroupState (86): remove share partitions' state (inter-broker, KIP-932).

Sent when a share group, or its offsets for a topic, are deleted. Served
behind the share switch (``REBALANCE_PROTOCOL``); each partition is answered
once its tombstones are in ``__share_group_state``. A partition without state
is answered NO_ERROR.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from broker.share_state_wire import partition_outcome, refusal
from protocol.messages.delete_share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    DeleteStateResult,
    PartitionData,
    PartitionResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 86
MIN_VERSION = 0
MAX_VERSION = 0
REBALANCE_PROTOCOL = "share"


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    refused = refusal(ctx, broker)

    async def one(topic_id: uuid.UUID, p: PartitionData) -> PartitionResult:
        error, message, _ = await partition_outcome(broker, refused, lambda c: c.delete_state(
            request.group_id, topic_id, p.partition))
        return PartitionResult(partition=p.partition, error_code=error, error_message=message)

    results = []
    for topic in request.topics:
        partitions = await asyncio.gather(*(one(topic.topic_id, p) for p in topic.partitions))
        results.append(DeleteStateResult(topic_id=topic.topic_id, partitions=list(partitions)))
    return DeleteShareGroupStateResponse(results=results)
