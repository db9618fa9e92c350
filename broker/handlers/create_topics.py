"""CreateTopics (19): validate and create topics (``validate_only`` checks only).

The checks and the answer are the same in both modes; ``broker.topic_admin``
makes the creation so (a lone broker's metadata store and partition
directories on the append thread, or ZooKeeper for a cluster member) and the
answer waits until every new partition has a leader this broker sees (Kafka's
DelayedCreatePartitions).

v0 and v1 (removed in Kafka 4) are served as Kafka 3.9 served them: v0 has
no ``validate_only`` (it always creates) and its results carry no error
message (the codec leaves it out); v1 adds both.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.admin_manager import AdminError
from broker.config.topic_config import topic_config_entries
from broker.quota.controller_mutation_quota import THROTTLING_QUOTA_EXCEEDED_MESSAGE
from broker.security.auth_helper import authorize_cluster, authorized_names
from protocol.acl_types import AclOperation, ResourceType
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
    from broker.request_context import RequestContext

API_KEY = 19
MIN_VERSION = 0  # Kafka 4.0's floor is v2 (KIP-896); v0-v1 as Kafka 3.9
MAX_VERSION = 7
#: KIP-599: from v6 a client over its controller_mutation_rate is refused (older ones only throttled).
_STRICT_QUOTA_VERSION = 6


async def _create_one(broker: BrokerServices, topic: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    result = CreatableTopicResult(name=topic.name, error_code=ErrorCode.NO_ERROR, num_partitions=-1,
                                  replication_factor=-1)
    admin = broker.topic_admin
    try:
        plan = admin.plan_topic(topic.name, topic.num_partitions, topic.replication_factor,
                                {c.name: c.value for c in topic.configs},
                                {a.partition_index: list(a.broker_ids) for a in topic.assignments})
        await admin.create_topic(plan, validate_only)
    except AdminError as exc:
        result.error_code, result.error_message = exc.error_code, exc.message
        return result
    result.num_partitions, result.replication_factor = plan.num_partitions, plan.replication_factor
    if not validate_only:
        result.configs = _config_entries(broker, plan.configs)
    return result


async def _create_all(broker: BrokerServices, request: CreateTopicsRequest) -> list[CreatableTopicResult]:
    """Each topic checked and created in turn; answered once every new partition has a leader this
    broker sees (at most the request's timeout: REQUEST_TIMED_OUT after, the topic stays)."""
    names = [t.name for t in request.topics]
    results: list[CreatableTopicResult] = []
    for topic in request.topics:
        if names.count(topic.name) > 1:
            results.append(CreatableTopicResult(
                name=topic.name, error_code=ErrorCode.INVALID_REQUEST, num_partitions=-1, replication_factor=-1,
                error_message="Create topics request from client contains duplicate topic names."))
            continue
        results.append(await _create_one(broker, topic, request.validate_only))
    created = [r for r in results if r.error_code == ErrorCode.NO_ERROR and not request.validate_only]
    if created and request.timeout_ms > 0:
        ready = await asyncio.gather(*(broker.topic_admin.wait_for_leaders(r.name, r.num_partitions,
                                                                           request.timeout_ms) for r in created))
        for result, ok in zip(created, ready, strict=True):
            if not ok:
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
                result.error_message = "Timed out waiting for the topic's partitions to get leaders."
    for result in created:
        known = broker.metadata.get(result.name)
        if known is not None:
            result.topic_id = known.topic_id
    return results


def _config_entries(broker: BrokerServices, configs: dict[str, str]) -> list[CreatableTopicConfigs]:
    return [CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                                  is_sensitive=e.sensitive)
            for e in topic_config_entries(broker.dynamic_config, configs)]


def _authorize(ctx: RequestContext, broker: BrokerServices, request: CreateTopicsRequest
               ) -> tuple[list[CreatableTopicResult], set[str]]:
    """Kafka's rule: CREATE on the cluster, else on each topic (TOPIC_AUTHORIZATION_FAILED); duplicates stay
    INVALID_REQUEST whoever asks. Takes the refused topics out of ``request``; answers them and the names whose
    configs may be returned (DESCRIBE_CONFIGS)."""
    names = [t.name for t in request.topics]
    creatable = (set(names) if authorize_cluster(ctx, broker, AclOperation.CREATE)
                 else authorized_names(ctx, broker, AclOperation.CREATE, ResourceType.TOPIC, names))
    refused = {n for n in names if n not in creatable and names.count(n) == 1}
    request.topics = [t for t in request.topics if t.name not in refused]
    denied = [CreatableTopicResult(name=n, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   error_message="Authorization failed.", num_partitions=-1, replication_factor=-1,
                                   topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
              for n in names if n in refused]
    return denied, authorized_names(ctx, broker, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, creatable)


async def handle(ctx: RequestContext, broker: BrokerServices, request: CreateTopicsRequest) -> CreateTopicsResponse:
    denied: list[CreatableTopicResult] = []
    describable: set[str] | None = None
    if broker.authorizer is not None:
        denied, describable = _authorize(ctx, broker, request)
    throttle_ms = 0
    if broker.quotas is not None and not request.validate_only:
        throttled, throttle_ms = _admit(ctx, broker, request)
        denied += throttled
    results = await _create_all(broker, request)
    if describable is not None:
        for result in results:
            if result.name not in describable:
                # created, but its configs and layout are not this client's to see
                result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                result.num_partitions = result.replication_factor = -1
                result.configs = []
    return CreateTopicsResponse(throttle_time_ms=throttle_ms, topics=results + denied)


def _admit(ctx: RequestContext, broker: BrokerServices, request: CreateTopicsRequest
           ) -> tuple[list[CreatableTopicResult], int]:
    """controller_mutation_rate (KIP-599): takes the topics it refuses out of ``request``; their answers
    and the throttle time."""
    assert broker.quotas is not None
    mutations = [(t.name, t.num_partitions if t.num_partitions > 0 else
                  len(t.assignments) or broker.config.num_partitions) for t in request.topics]
    admission = broker.quotas.admit_mutations(ctx, mutations, strict=ctx.api_version >= _STRICT_QUOTA_VERSION)
    request.topics = [t for t in request.topics if t.name not in admission.refused]
    throttled = [CreatableTopicResult(name=n, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                      error_message=THROTTLING_QUOTA_EXCEEDED_MESSAGE, num_partitions=-1,
                                      replication_factor=-1) for n, _ in mutations if n in admission.refused]
    return throttled, admission.throttle_time_ms
