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

from protocol.errors import ErrorCode
from protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from storage.errors import OffsetOutOfRangeError

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer
    from broker.socket_server import RequestContext

log = logging.getLogger(__name__)

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2
HIGH_WATERMARK = -1


def _delete_one(server: "KafkaServer", topic: str, request: DeleteRecordsPartition) -> DeleteRecordsPartitionResult:
    result = DeleteRecordsPartitionResult(partition_index=request.partition_index, low_watermark=-1,
                                          error_code=ErrorCode.NO_ERROR)
    partition = server.replica_manager.get_partition(topic, request.partition_index)
    if partition is None:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return result
    log_ = partition.log
    if not log_.config.delete:
        result.error_code = ErrorCode.POLICY_VIOLATION
        return result
    offset = partition.high_watermark if request.offset == HIGH_WATERMARK else request.offset
    if offset < 0 or offset > partition.high_watermark:
        result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
        return result
    try:
        result.low_watermark = log_.delete_records(offset)
    except OffsetOutOfRangeError:
        result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
    except OSError as exc:
        log.error("[KafkaServer id=%d] DeleteRecords on %s-%d failed: %s", server.broker_id, topic,
                  request.partition_index, exc)
        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
    return result


def _delete_all(server: "KafkaServer", request: DeleteRecordsRequest) -> list[DeleteRecordsTopicResult]:
    results = [DeleteRecordsTopicResult(name=topic.name,
                                        partitions=[_delete_one(server, topic.name, p) for p in topic.partitions])
               for topic in request.topics]
    if any(p.error_code == ErrorCode.NO_ERROR for t in results for p in t.partitions):
        server.log_manager.checkpoint_log_start_offsets()
    return results


async def handle(ctx: "RequestContext", server: "KafkaServer", request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = await server.run_append(_delete_all, server, request)
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
