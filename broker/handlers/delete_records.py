"""DeleteRecords (21): move partitions' log start offsets forward (the low watermark).

Offset -1 means the high watermark; an offset beyond it is OFFSET_OUT_OF_RANGE.
Topics whose cleanup.policy lacks ``delete`` refuse it (POLICY_VIOLATION), as
in Kafka. The log drops the segments wholly below the new start offset and the
log-start-offset checkpoint is rewritten, all on the append thread, so the new
low watermark survives a restart; fetches below it then get
OFFSET_OUT_OF_RANGE and ListOffsets(earliest) returns it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

log = logging.getLogger(__name__)

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2
HIGH_WATERMARK = -1


async def handle(ctx: RequestContext, broker: BrokerServices, request: DeleteRecordsRequest
                 ) -> DeleteRecordsResponse:
    deletable = authorized_names(ctx, broker, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics))
    offsets = [((topic.name, p.partition_index), p.offset) for topic in request.topics if topic.name in deletable
               for p in topic.partitions]
    results = iter(await broker.replica_manager.delete_records(offsets))
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, low_watermark = (next(results) if topic.name in deletable
                                   else (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1))
            partitions.append(DeleteRecordsPartitionResult(partition_index=p.partition_index,
                                                           low_watermark=low_watermark, error_code=code))
        topics.append(DeleteRecordsTopicResult(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
