"""CreatePartitions (37): grow topics; new partitions are hosted at once.

Validation follows Kafka: the count must grow (INVALID_PARTITIONS otherwise),
manual assignments must name one live broker list per new partition
(INVALID_REPLICATION_ASSIGNMENT). Creation writes the metadata store and new
partition directories, so it runs on the append thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.admin_manager import AdminError
from protocol.errors import ErrorCode
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer
    from broker.socket_server import RequestContext

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


def _create_one(server: "KafkaServer", topic: CreatePartitionsTopic, validate_only: bool) -> CreatePartitionsTopicResult:
    result = CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.NO_ERROR, error_message=None)
    assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
    try:
        server.admin.create_partitions(topic.name, topic.count, validate_only, assignments)
    except AdminError as exc:
        result.error_code, result.error_message = exc.error_code, exc.message
    return result


def _create_all(server: "KafkaServer", request: CreatePartitionsRequest) -> list[CreatePartitionsTopicResult]:
    names = [t.name for t in request.topics]
    results = []
    for topic in request.topics:
        if names.count(topic.name) > 1:
            results.append(CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.INVALID_REQUEST,
                                                       error_message="Duplicate topic name."))
            continue
        results.append(_create_one(server, topic, request.validate_only))
    return results


async def handle(ctx: "RequestContext", server: "KafkaServer",
                 request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    results = await server.run_append(_create_all, server, request)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
