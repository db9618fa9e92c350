"""ReadShareGroupStateSummary (87): state epoch, leader epoch and start offset of share partitions.

What DescribeShareGroupOffsets reads (inter-broker, KIP-932). Served behind
the share switch (``REBALANCE_PROTOCOL``); nothing is written. A partition
without state reads as state epoch 0 and start offset -1. v1 adds
DeliveryCompleteCount (KIP-1226), answered -1: the coordinator does not keep it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from broker.share_state_wire import partition_outcome, refusal, summary_result
from protocol.messages.read_share_group_state_summary import (
    PartitionData,
    PartitionResult,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    ReadStateSummaryResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 87
MIN_VERSION = 0
MAX_VERSION = 1
REBALANCE_PROTOCOL = "share"


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
    refused = refusal(ctx, broker)

    async def one(topic_id: uuid.UUID, p: PartitionData) -> PartitionResult:
        return summary_result(p.partition, await partition_outcome(broker, refused, lambda c: c.read_state_summary(
            request.group_id, topic_id, p.partition, p.leader_epoch)))

    results = []
    for topic in request.topics:
        partitions = await asyncio.gather(*(one(topic.topic_id, p) for p in topic.partitions))
        results.append(ReadStateSummaryResult(topic_id=topic.topic_id, partitions=list(partitions)))
    return ReadShareGroupStateSummaryResponse(results=results)
