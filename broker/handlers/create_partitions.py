"""CreatePartitions (37): grow topics; new partitions are hosted at once.

Validation follows Kafka: the count must grow (INVALID_PARTITIONS otherwise),
manual assignments must name one live broker list per new partition
(INVALID_REPLICATION_ASSIGNMENT). ``broker.topic_admin`` adds them (a lone
broker's metadata store and partition directories on the append thread, or
ZooKeeper for a cluster member) and the answer waits, at most the request's
timeout, until they have leaders this broker sees.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.admin_manager import AdminError
from broker.quota.controller_mutation_quota import THROTTLING_QUOTA_EXCEEDED_MESSAGE
from broker.security.auth_helper import authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3
#: KIP-599: from v3 a client over its controller_mutation_rate is refused (older ones only throttled).
_STRICT_QUOTA_VERSION = 3


async def _create_one(broker: BrokerServices, topic: CreatePartitionsTopic,
                      validate_only: bool) -> CreatePartitionsTopicResult:
    result = CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.NO_ERROR, error_message=None)
    assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
    try:
        await broker.topic_admin.create_partitions(topic.name, topic.count, assignments, validate_only)
    except AdminError as exc:
        result.error_code, result.error_message = exc.error_code, exc.message
    return result


async def _create_all(broker: BrokerServices, request: CreatePartitionsRequest) -> list[CreatePartitionsTopicResult]:
    """Each topic grown in turn; answered once the new partitions have leaders this broker sees
    (at most the request's timeout: REQUEST_TIMED_OUT after, the partitions stay)."""
    names = [t.name for t in request.topics]
    results: list[CreatePartitionsTopicResult] = []
    waits: list[tuple[CreatePartitionsTopicResult, int]] = []
    for topic in request.topics:
        if names.count(topic.name) > 1:
            results.append(CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.INVALID_REQUEST,
                                                       error_message="Duplicate topic name."))
            continue
        result = await _create_one(broker, topic, request.validate_only)
        results.append(result)
        if result.error_code == ErrorCode.NO_ERROR and not request.validate_only:
            waits.append((result, topic.count))
    if waits and request.timeout_ms > 0:
        ready = await asyncio.gather(*(broker.topic_admin.wait_for_leaders(r.name, n, request.timeout_ms)
                                       for r, n in waits))
        for (result, _), ok in zip(waits, ready, strict=True):
            if not ok:
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
                result.error_message = "Timed out waiting for the new partitions to get leaders."
    return results


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    denied: list[CreatePartitionsTopicResult] = []
    if broker.authorizer is not None:
        names = [t.name for t in request.topics]
        alterable = authorized_names(ctx, broker, AclOperation.ALTER, ResourceType.TOPIC, names)
        # a duplicate is INVALID_REQUEST whoever asks, as in Kafka
        refused = {n for n in names if n not in alterable and names.count(n) == 1}
        denied = [CreatePartitionsTopicResult(name=n, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                              error_message="Authorization failed.") for n in names if n in refused]
        request.topics = [t for t in request.topics if t.name not in refused]
    throttle_ms = 0
    if broker.quotas is not None and not request.validate_only:
        mutations = [(t.name, max(0, t.count - _current_count(broker, t.name))) for t in request.topics]
        admission = broker.quotas.admit_mutations(ctx, mutations, strict=ctx.api_version >= _STRICT_QUOTA_VERSION)
        request.topics = [t for t in request.topics if t.name not in admission.refused]
        denied += [CreatePartitionsTopicResult(name=n, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                               error_message=THROTTLING_QUOTA_EXCEEDED_MESSAGE)
                   for n, _ in mutations if n in admission.refused]
        throttle_ms = admission.throttle_time_ms
    results = await _create_all(broker, request)
    return CreatePartitionsResponse(throttle_time_ms=throttle_ms, results=results + denied)


def _current_count(broker: BrokerServices, topic: str) -> int:
    known = broker.metadata.get(topic)
    return known.partition_count if known is not None else 0
