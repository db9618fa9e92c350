"""InitializeShareGroupState (83): create or reset share partitions' state (inter-broker, KIP-932).

The group coordinator sends it to the share coordinator's broker when a share
group's partitions are first assigned. Served behind the share switch
(``REBALANCE_PROTOCOL``). Each partition is answered once its snapshot is in
``__share_group_state``, or with the share coordinator's error.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from broker.share_state_wire import partition_outcome, refusal
from protocol.messages.initialize_share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    InitializeStateResult,
    PartitionData,
    PartitionResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 83
MIN_VERSION = 0
MAX_VERSION = 0
REBALANCE_PROTOCOL = "share"


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
    refused = refusal(ctx, broker)

    async def one(topic_id: uuid.UUID, p: PartitionData) -> PartitionResult:
        error, message, _ = await partition_outcome(broker, refused, lambda c: c.initialize_state(
            request.group_id, topic_id, p.partition, p.state_epoch, p.start_offset))
        return PartitionResult(partition=p.partition, error_code=error, error_message=message)

    results = []
    for topic in request.topics:
        partitions = await asyncio.gather(*(one(topic.topic_id, p) for p in topic.partitions))
        results.append(InitializeStateResult(topic_id=topic.topic_id, partitions=list(partitions)))
    return InitializeShareGroupStateResponse(results=results)
