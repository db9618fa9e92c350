"""ReadShareGroupState (84): a share partition's state, as its new leader loads it (inter-broker, KIP-932).

Served behind the share switch (``REBALANCE_PROTOCOL``). A newer leader epoch
than stored is recorded in ``__share_group_state`` before the answer (so the
previous leader's writes are fenced from then on); an older one is
FENCED_LEADER_EPOCH. A partition without state reads as state epoch 0 and
start offset -1, with no batches.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from broker.share_state_wire import partition_outcome, read_result, refusal
from protocol.messages.read_share_group_state import (
    PartitionData,
    PartitionResult,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadStateResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 84
MIN_VERSION = 0
MAX_VERSION = 0
REBALANCE_PROTOCOL = "share"


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    refused = refusal(ctx, broker)

    async def one(topic_id: uuid.UUID, p: PartitionData) -> PartitionResult:
        return read_result(p.partition, await partition_outcome(broker, refused, lambda c: c.read_state(
            request.group_id, topic_id, p.partition, p.leader_epoch)))

    results = []
    for topic in request.topics:
        partitions = await asyncio.gather(*(one(topic.topic_id, p) for p in topic.partitions))
        results.append(ReadStateResult(topic_id=topic.topic_id, partitions=list(partitions)))
    return ReadShareGroupStateResponse(results=results)
