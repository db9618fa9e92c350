"""WriteShareGroupState (85): store a share partition's state (inter-broker, KIP-932).

The share partition's leader sends it for every acknowledgement before it
answers the consumer. Served behind the share switch (``REBALANCE_PROTOCOL``);
each partition is answered once its record is in ``__share_group_state``
(acks=all), or with FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH / the
coordinator's error. v1 adds DeliveryCompleteCount (KIP-1226), which the
coordinator does not keep.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from broker.share_state_wire import partition_outcome, refusal, write_state_of
from protocol.messages.write_share_group_state import (
    PartitionData,
    PartitionResult,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
    WriteStateResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 85
MIN_VERSION = 0
MAX_VERSION = 1
REBALANCE_PROTOCOL = "share"


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    refused = refusal(ctx, broker)

    async def one(topic_id: uuid.UUID, p: PartitionData) -> PartitionResult:
        error, message, _ = await partition_outcome(broker, refused, lambda c: c.write_state(
            request.group_id, topic_id, p.partition, write_state_of(p)))
        return PartitionResult(partition=p.partition, error_code=error, error_message=message)

    results = []
    for topic in request.topics:
        partitions = await asyncio.gather(*(one(topic.topic_id, p) for p in topic.partitions))
        results.append(WriteStateResult(topic_id=topic.topic_id, partitions=list(partitions)))
    return WriteShareGroupStateResponse(results=results)
