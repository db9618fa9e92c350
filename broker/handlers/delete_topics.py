"""DeleteTopics (20): delete topics by name, or (v6+) by topic id.

Each topic leaves the metadata store first, then its partitions are unhosted
and their directories renamed to ``<tp>.<uuid>-delete`` and removed by the
log manager, all on the append thread. A topic created again under the same
name gets a new id and empty logs. In a cluster the topic is marked in
ZooKeeper's ``/admin/delete_topics`` (any broker) and the answer waits until
the controller's UpdateMetadata removed it here (Kafka's DelayedDeleteTopics).
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


def _delete_one(broker: BrokerServices, name: str | None, topic_id: uuid.UUID, version: int) -> DeletableTopicResult:
    if name is not None and topic_id != ZERO_UUID:
        return _result(name, topic_id, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
    if name is None:
        if topic_id == ZERO_UUID:
            return _result(None, topic_id, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
        topic = broker.metadata.by_id(topic_id)
        if topic is None:
            return _result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        name = topic.name
    try:
        deleted = broker.admin.delete_topic(name)
    except AdminError as exc:
        code = exc.error_code
        if code == ErrorCode.TOPIC_DELETION_DISABLED and version < 3:
            code = ErrorCode.INVALID_REQUEST  # the code older clients know for it
        return _result(name, topic_id, code, exc.message)
    return _result(name, deleted.topic_id, ErrorCode.NO_ERROR, None)


def _delete_all(broker: BrokerServices, wanted: list[tuple[str | None, uuid.UUID]],
                version: int) -> list[DeletableTopicResult]:
    results = []
    names = [n for n, _ in wanted if n is not None]
    ids = [i for n, i in wanted if n is None and i != ZERO_UUID]
    for name, topic_id in wanted:
        if name is not None and names.count(name) > 1:
            results.append(_result(name, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
        elif name is None and ids.count(topic_id) > 1:
            results.append(_result(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id."))
        else:
            results.append(_delete_one(broker, name, topic_id, version))
    return results


async def _delete_in_cluster(broker: BrokerServices, wanted: list[tuple[str | None, uuid.UUID]], version: int,
                             timeout_ms: int) -> list[DeletableTopicResult]:
    """Mark each topic for deletion in ZooKeeper; answer once they left this broker's cache (at most
    the request's timeout: REQUEST_TIMED_OUT after), as Kafka's DelayedDeleteTopics."""
    assert broker.cluster is not None
    admin = broker.cluster.admin
    results: list[DeletableTopicResult] = []
    marked: list[DeletableTopicResult] = []
    names = [n for n, _ in wanted if n is not None]
    ids = [i for n, i in wanted if n is None and i != ZERO_UUID]
    for name, topic_id in wanted:
        if name is not None and topic_id != ZERO_UUID:
            results.append(_result(name, topic_id, ErrorCode.INVALID_REQUEST,
                                   "You may not specify both topic name and topic id."))
            continue
        if (name is not None and names.count(name) > 1) or (name is None and ids.count(topic_id) > 1):
            results.append(_result(name, topic_id, ErrorCode.INVALID_REQUEST,
                                   "Duplicate topic name." if name is not None else "Duplicate topic id."))
            continue
        if name is None:
            known = broker.metadata.by_id(topic_id)
            if known is None:
                results.append(_result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID,
                                       "This server does not host this topic ID."))
                continue
            name = known.name
        existing = broker.metadata.get(name)
        outcome = await admin.delete_topic(name)
        code = outcome.error_code
        if code == ErrorCode.TOPIC_DELETION_DISABLED and version < 3:
            code = ErrorCode.INVALID_REQUEST
        result = _result(name, existing.topic_id if existing is not None else topic_id, code, outcome.message)
        results.append(result)
        if code == ErrorCode.NO_ERROR:
            marked.append(result)
    if marked and timeout_ms > 0:
        gone = await asyncio.gather(*(admin.wait_until_deleted([r.name or ""], timeout_ms) for r in marked))
        for result, ok in zip(marked, gone, strict=True):
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
    if broker.cluster is not None:
        # Offsets of the deleted topics go when the controller's UpdateMetadata removes them.
        return DeleteTopicsResponse(throttle_time_ms=throttle_ms, responses=await _delete_in_cluster(
            broker, wanted, version, request.timeout_ms) + denied)
    results = await broker.append_thread.run(_delete_all, broker, wanted, version)
    deleted = {r.name for r in results if r.error_code == ErrorCode.NO_ERROR and r.name}
    if deleted:
        # Committed offsets on a deleted topic go too (tombstones), so a topic
        # re-created under the same name starts without stale positions.
        broker.group_coordinator.handle_deleted_topics(deleted)
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
