"""CreateTopics (19): validate and create topics (``validate_only`` checks only).

Creation writes the metadata store and partition directories with fsyncs, so
it runs on the append thread.

v0 and v1 (removed in Kafka 4) are served as Kafka 3.9 served them: v0 has
no ``validate_only`` (it always creates) and its results carry no error
message (the codec leaves it out); v1 adds both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.admin_manager import AdminError
from broker.config.topic_config import topic_config_entries
from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.socket_server import RequestContext

API_KEY = 19
MIN_VERSION = 0  # Kafka 4.0's floor is v2 (KIP-896); v0-v1 as Kafka 3.9
MAX_VERSION = 7


def _create_one(broker: BrokerServices, topic: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    result = CreatableTopicResult(name=topic.name, error_code=ErrorCode.NO_ERROR)
    try:
        plan = broker.admin.plan_topic(
            topic.name, topic.num_partitions, topic.replication_factor,
            {c.name: c.value for c in topic.configs},
            {a.partition_index: list(a.broker_ids) for a in topic.assignments},
        )
    except AdminError as exc:
        result.error_code, result.error_message = exc.error_code, exc.message
        result.num_partitions = result.replication_factor = -1
        return result
    if not validate_only:
        result.topic_id = broker.admin.create_topic(plan).topic_id
    result.num_partitions, result.replication_factor = plan.num_partitions, plan.replication_factor
    result.configs = [
        CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                              is_sensitive=e.sensitive)
        for e in topic_config_entries(broker.dynamic_config, broker.metadata.configs_of(topic.name))
    ] if not validate_only else []
    return result


def _create_all(broker: BrokerServices, request: CreateTopicsRequest) -> list[CreatableTopicResult]:
    names = [t.name for t in request.topics]
    results = []
    for topic in request.topics:
        if names.count(topic.name) > 1:
            results.append(CreatableTopicResult(
                name=topic.name, error_code=ErrorCode.INVALID_REQUEST, num_partitions=-1, replication_factor=-1,
                error_message="Create topics request from client contains duplicate topic names."))
            continue
        results.append(_create_one(broker, topic, request.validate_only))
    return results


async def handle(ctx: RequestContext, broker: BrokerServices, request: CreateTopicsRequest) -> CreateTopicsResponse:
    results = await broker.append_thread.run(_create_all, broker, request)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
