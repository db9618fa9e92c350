"""DeleteTopics (20): delete topics by name, or (v6+) by topic id.

The checks and the answer are the same in both modes; ``broker.topic_admin``
deletes (a lone broker drops the topic from its metadata store, then unhosts
its partitions on the append thread; a cluster member marks it in ZooKeeper's
``/admin/delete_topics``) and the answer waits until the topic left this
broker's metadata (Kafka's DelayedDeleteTopics). A topic created again under
the same name gets a new id and empty logs.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from broker.admin_manager import AdminError
from broker.quota.controller_mutation_quota import THROTTLING_QUOTA_EXCEEDED_MESSAGE
from broker.security.auth_helper import authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.delete_topics import DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 20
MIN_VERSION = 0  # Kafka 4.0's floor is v1 (KIP-896); v0 is v1 without throttle_time_ms
MAX_VERSION = 6
#: KIP-599: from v5 a client over its controller_mutation_rate is refused (older ones only throttled).
_STRICT_QUOTA_VERSION = 5
ZERO_UUID = uuid.UUID(int=0)


def _result(name: str | None, topic_id: uuid.UUID, code: ErrorCode, message: str | None) -> DeletableTopicResult:
    return DeletableTopicResult(name=name, topic_id=topic_id, error_code=code, error_message=message)


def _malformed(name: str | None, topic_id: uuid.UUID, names: list[str],
               ids: list[uuid.UUID]) -> DeletableTopicResult | None:
    """Kafka's checks of one entry before any lookup: both or neither of name and id, duplicates."""
    if name is not None and topic_id != ZERO_UUID:
        return _result(name, topic_id, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
    if name is None and topic_id == ZERO_UUID:
        return _result(None, topic_id, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
    if name is not None and names.count(name) > 1:
        return _result(name, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    if name is None and ids.count(topic_id) > 1:
        return _result(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
    return None


async def _delete_one(broker: BrokerServices, name: str | None, topic_id: uuid.UUID,
                      version: int) -> DeletableTopicResult:
    if name is None:
        known = broker.metadata.by_id(topic_id)
        if known is None:
            return _result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        name = known.name
    existing = broker.metadata.get(name)
    try:
        await broker.topic_admin.delete_topic(name)
    except AdminError as exc:
        code = exc.error_code
        if code == ErrorCode.TOPIC_DELETION_DISABLED and version < 3:
            code = ErrorCode.INVALID_REQUEST  # the code older clients know for it
        return _result(name, topic_id, code, exc.message)
    return _result(name, existing.topic_id if existing is not None else topic_id, ErrorCode.NO_ERROR, None)


async def _delete_all(broker: BrokerServices, wanted: list[tuple[str | None, uuid.UUID]], version: int,
                      timeout_ms: int) -> list[DeletableTopicResult]:
    """Delete each topic; answer once they left this broker's metadata (at most the request's
    timeout: REQUEST_TIMED_OUT after), as Kafka's DelayedDeleteTopics."""
    # An entry with both a name and an id is refused on its own: it counts as neither's duplicate (Kafka).
    names = [n for n, i in wanted if n is not None and i == ZERO_UUID]
    ids = [i for n, i in wanted if n is None and i != ZERO_UUID]
    results: list[DeletableTopicResult] = []
    for name, topic_id in wanted:
        malformed = _malformed(name, topic_id, names, ids)
        results.append(malformed if malformed is not None else await _delete_one(broker, name, topic_id, version))
    deleted = [r for r in results if r.error_code == ErrorCode.NO_ERROR]
    if deleted and timeout_ms > 0:
        gone = await asyncio.gather(*(broker.topic_admin.wait_until_deleted([r.name or ""], timeout_ms)
                                      for r in deleted))
        for result, ok in zip(deleted, gone, strict=True):
            if not ok:
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
                result.error_message = "Timed out waiting for the topic to be deleted."
    return results


def _authorize(ctx: RequestContext, broker: BrokerServices, wanted: list[tuple[str | None, uuid.UUID]]
               ) -> tuple[list[DeletableTopicResult], list[tuple[str | None, uuid.UUID]]]:
    """DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED; a topic named by id needs DESCRIBE for its
    name to be reported (Kafka). Duplicates and malformed entries are left to the checks after."""
    resolved = {i: known.name for n, i in wanted if n is None and (known := broker.metadata.by_id(i)) is not None}
    names = [n for n, _ in wanted if n is not None] + list(resolved.values())
    deletable = authorized_names(ctx, broker, AclOperation.DELETE, ResourceType.TOPIC, names)
    described = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC, resolved.values())
    denied, kept = [], []
    for name, topic_id in wanted:
        target = name if name is not None else resolved.get(topic_id)
        if target is None or target in deletable or names.count(target) > 1:
            kept.append((name, topic_id))
        else:
            shown = target if name is not None or target in described else None
            denied.append(_result(shown, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
    return denied, kept


async def handle(ctx: RequestContext, broker: BrokerServices, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    version = ctx.api_version
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    denied: list[DeletableTopicResult] = []
    if broker.authorizer is not None:
        denied, wanted = _authorize(ctx, broker, wanted)
    throttle_ms = 0
    if broker.quotas is not None:
        throttled, wanted, throttle_ms = _admit(ctx, broker, wanted)
        denied += throttled
    # Committed offsets of the deleted topics go when this broker's metadata drops them (both modes).
    results = await _delete_all(broker, wanted, version, request.timeout_ms)
    return DeleteTopicsResponse(throttle_time_ms=throttle_ms, responses=results + denied)


def _admit(ctx: RequestContext, broker: BrokerServices, wanted: list[tuple[str | None, uuid.UUID]]
           ) -> tuple[list[DeletableTopicResult], list[tuple[str | None, uuid.UUID]], int]:
    """controller_mutation_rate (KIP-599): each topic deletes all its partitions. The refused topics'
    answers, the topics left to delete, and the throttle time."""
    assert broker.quotas is not None
    known = [broker.metadata.get(name) if name else broker.metadata.by_id(topic_id) for name, topic_id in wanted]
    mutations = [(meta.name if meta is not None else name or str(topic_id), meta.partition_count if meta else 0)
                 for (name, topic_id), meta in zip(wanted, known, strict=True)]
    admission = broker.quotas.admit_mutations(ctx, mutations, strict=ctx.api_version >= _STRICT_QUOTA_VERSION)
    refused = [(w, m) for w, m in zip(wanted, mutations, strict=True) if m[0] in admission.refused]
    throttled = [DeletableTopicResult(name=label, topic_id=topic_id, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                      error_message=THROTTLING_QUOTA_EXCEEDED_MESSAGE)
                 for (_, topic_id), (label, _) in refused]
    left = [w for w, m in zip(wanted, mutations, strict=True) if m[0] not in admission.refused]
    return throttled, left, admission.throttle_time_ms
