"""ShareFetch (78): a share consumer acquires records of its share session's partitions (KIP-932).

Served only when ``group.coordinator.rebalance.protocols`` lists ``share``
(``REBALANCE_PROTOCOL``). The session epoch opens (0), continues (the next
epoch: partitions added or forgotten) or closes (-1) the member's share
session. Acknowledgements carried by the request (never on epoch 0) are
applied and made durable first, so what they release can be acquired again in
the same answer; then the session's partitions are read and what the member
acquires comes back as AcquiredRecords beside the batches that hold them. On
epoch -1 nothing is fetched and what the member still holds is given back.
READ on the group and on each topic is needed, as in Kafka. Version 2 adds the
acquire mode (KIP-1206: record-limit never acquires more than MaxRecords) and
RENEW acknowledgements (KIP-1222): a request with IsRenewAck only acknowledges
(its fetch limits must be 0) and fetches nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker.handlers.share_acknowledge import (
    Outcome,
    TopicIdPartition,
    acknowledge,
    current_leader,
    resolve,
    to_batches,
)
from broker.security.auth_helper import authorize_group
from coordinator.share.share_partition_manager import ShareFetchResult, ShareTarget
from coordinator.share.share_session_cache import ShareFetchContext, ShareSessionError
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.share_fetch import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext
    from broker.share_services import ShareServices

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 2
REBALANCE_PROTOCOL = "share"

#: MaxRecords when a request leaves it 0 (the Java consumer's max.poll.records default).
DEFAULT_MAX_RECORDS = 500
#: ShareAcquireMode values (KIP-1206).
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1


def _error(code: ErrorCode, message: str | None = None) -> ShareFetchResponse:
    return ShareFetchResponse(error_code=code, error_message=message)


def _refusal(request: ShareFetchRequest, version: int) -> ShareFetchResponse | None:
    if not request.group_id or not request.member_id:
        return _error(ErrorCode.INVALID_REQUEST, "a share fetch names its group and member")
    carries_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if request.share_session_epoch == 0 and carries_acks:
        return _error(ErrorCode.INVALID_REQUEST, "acknowledgements cannot open a share session")
    if version >= 2 and request.share_acquire_mode not in (BATCH_OPTIMIZED, RECORD_LIMIT):
        return _error(ErrorCode.INVALID_REQUEST, f"unknown share acquire mode {request.share_acquire_mode}")
    limits = (request.max_bytes, request.min_bytes, request.max_records, request.max_wait_ms)
    if version >= 2 and request.is_renew_ack and any(limits):
        return _error(ErrorCode.INVALID_REQUEST, "a renew acknowledgement fetches nothing: its limits must be 0")
    return None


def handle(ctx: RequestContext, broker: BrokerServices, request: ShareFetchRequest
           ) -> ShareFetchResponse | Awaitable[ShareFetchResponse]:
    share = broker.share
    if share is None:
        return _error(ErrorCode.UNSUPPORTED_VERSION, "share groups are not enabled")
    refusal = _refusal(request, ctx.api_version)
    if refusal is not None:
        return refusal
    group_id = request.group_id or ""
    if not authorize_group(ctx, broker, AclOperation.READ, group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    added = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    try:
        session = share.sessions.for_fetch(group_id, request.member_id or "", request.share_session_epoch,
                                           added, forgotten)
    except ShareSessionError as exc:
        return _error(exc.error_code, exc.message)
    return _answer(ctx, broker, share, request, session)


async def _answer(ctx: RequestContext, broker: BrokerServices, share: ShareServices, request: ShareFetchRequest,
                  session: ShareFetchContext) -> ShareFetchResponse:
    group_id, member_id = request.group_id or "", request.member_id or ""
    batches = {(t.topic_id, p.partition_index): to_batches(p.acknowledgement_batches)
               for t in request.topics for p in t.partitions if p.acknowledgement_batches}
    targets, refused = resolve(ctx, broker, sorted({*session.partitions, *batches}, key=str))
    version = ctx.api_version
    acks = await acknowledge(share.manager, group_id, member_id, targets, batches, allow_renew=version >= 2)
    # What the member gave up (forgotten partitions, a closed or replaced session) goes back once its
    # acknowledgements in this request are applied.
    share.manager.release(group_id, member_id, session.released)
    fetched: dict[ShareTarget, ShareFetchResult] = {}
    if not session.is_final and not (version >= 2 and request.is_renew_ack):
        wanted = [targets[key] for key in session.partitions if key in targets]
        fetched = await share.manager.fetch(
            group_id, member_id, wanted, max_wait_ms=request.max_wait_ms, min_bytes=request.min_bytes,
            max_bytes=request.max_bytes, max_records=request.max_records or DEFAULT_MAX_RECORDS,
            record_limit=version >= 2 and request.share_acquire_mode == RECORD_LIMIT)
    lock_ms = share.settings(group_id).partition.record_lock_duration_ms
    response = _response(lock_ms, refused, acks, fetched)
    _point_to_leaders(ctx, broker, targets, response)
    return response


def _point_to_leaders(ctx: RequestContext, broker: BrokerServices, targets: dict[TopicIdPartition, ShareTarget],
                      response: ShareFetchResponse) -> None:
    """Partitions answered NOT_LEADER_OR_FOLLOWER name the leader the metadata knows, and its endpoint."""
    endpoints: dict[int, NodeEndpoint] = {}
    for topic in response.responses:
        for data in topic.partitions:
            moved = ErrorCode.NOT_LEADER_OR_FOLLOWER in (data.error_code, data.acknowledge_error_code)
            target = targets.get((topic.topic_id, data.partition_index))
            if not moved or target is None:
                continue
            leader_id, leader_epoch, node = current_leader(ctx, broker, target)
            data.current_leader = LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
            if node is not None:
                endpoints[node.node_id] = NodeEndpoint(node_id=node.node_id, host=node.host, port=node.port,
                                                       rack=node.rack)
    response.node_endpoints = list(endpoints.values())


def _response(lock_ms: int, refused: dict[TopicIdPartition, Outcome], acks: dict[TopicIdPartition, Outcome],
              fetched: dict[ShareTarget, ShareFetchResult]) -> ShareFetchResponse:
    partitions: dict[TopicIdPartition, PartitionData] = {}
    for key, (code, message) in refused.items():
        partitions[key] = PartitionData(partition_index=key[1], error_code=code, error_message=message,
                                        current_leader=LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1), records=b"")
    for target, result in fetched.items():
        partitions[(target.topic_id, target.partition)] = PartitionData(
            partition_index=target.partition, error_code=result.error_code, error_message=result.error_message,
            current_leader=LeaderIdAndEpoch(leader_id=result.leader_id, leader_epoch=result.leader_epoch),
            records=result.records,
            acquired_records=[AcquiredRecords(first_offset=r.first_offset, last_offset=r.last_offset,
                                              delivery_count=r.delivery_count) for r in result.acquired])
    for key, (code, message) in acks.items():
        data = partitions.setdefault(key, PartitionData(
            partition_index=key[1], current_leader=LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1), records=b""))
        data.acknowledge_error_code, data.acknowledge_error_message = code, message
    topics: dict[uuid.UUID, ShareFetchableTopicResponse] = {}
    for (topic_id, _), data in partitions.items():
        topics.setdefault(topic_id, ShareFetchableTopicResponse(topic_id=topic_id, partitions=[])
                          ).partitions.append(data)
    return ShareFetchResponse(acquisition_lock_timeout_ms=lock_ms, responses=list(topics.values()))
