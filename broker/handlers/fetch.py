"""Fetch (1): file ranges of whole batches, long polls, incremental sessions.

Reads never copy or parse records: each partition's answer is a FileRange of
its segment, written to the socket when the response goes out. The handler
resolves the KIP-227 session, makes one ``ReplicaManager.fetch_messages`` call
(reads, leader-epoch fencing, and the long poll: a fetch that finds less than
``min_bytes`` waits until an append to one of its partitions or ``max_wait_ms``)
and encodes what it returns.

``max_bytes`` bounds the response and ``partition_max_bytes`` each partition;
the first partition with data always gets at least one whole batch (KIP-74),
so an oversized batch can never stall a consumer.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionError,
    PartitionKey,
)
from protocol.buffers import FileRange
from protocol.errors import ErrorCode
from protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from protocol.request_constants import READ_COMMITTED
from replication.partition import LogReadResult
from replication.replica_manager import FetchParams

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.socket_server import RequestContext

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 16  # v17+ carry follower-only fields (KIP-853/KIP-1166) we do not serve yet


def _key(uses_ids: bool, topic: str, topic_id: uuid.UUID, partition: int) -> PartitionKey:
    return (topic_id if uses_ids else topic, partition)


def _requested_partitions(broker: BrokerServices, request: FetchRequest, uses_ids: bool) -> dict[PartitionKey, CachedPartition]:
    wanted: dict[PartitionKey, CachedPartition] = {}
    for topic in request.topics:
        if uses_ids:
            meta = broker.metadata.by_id(topic.topic_id)
            name, topic_id = (meta.name if meta else ""), topic.topic_id
        else:
            meta = broker.metadata.get(topic.topic)
            name, topic_id = topic.topic, (meta.topic_id if meta else uuid.UUID(int=0))
        for p in topic.partitions:
            wanted[_key(uses_ids, name, topic_id, p.partition)] = CachedPartition(
                topic=name, topic_id=topic_id, partition=p.partition, fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes, current_leader_epoch=p.current_leader_epoch,
                last_fetched_epoch=p.last_fetched_epoch, log_start_offset=p.log_start_offset,
            )
    return wanted


def _forgotten(request: FetchRequest, uses_ids: bool, session: FetchSession) -> None:
    for topic in request.forgotten_topics_data:
        for index in topic.partitions:
            if uses_ids:
                session.partitions.pop((topic.topic_id, index), None)
            else:
                session.partitions.pop((topic.topic, index), None)


def _resolve_session(broker: BrokerServices, request: FetchRequest, uses_ids: bool
                     ) -> tuple[FetchSession | None, list[CachedPartition], bool]:
    """(session, partitions to read, is_incremental) per KIP-227's epoch rules."""
    cache = broker.fetch_sessions
    epoch, session_id = request.session_epoch, request.session_id
    wanted = _requested_partitions(broker, request, uses_ids)
    if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        session = cache.create(uses_ids, wanted) if epoch == INITIAL_EPOCH and wanted else None
        return session, list(wanted.values()), False
    session = cache.lookup(session_id, epoch)
    for key, cached in wanted.items():
        existing = session.partitions.get(key)
        if existing is None:
            session.partitions[key] = cached
        else:
            existing.fetch_offset = cached.fetch_offset
            existing.max_bytes = cached.max_bytes
            existing.current_leader_epoch = cached.current_leader_epoch
            existing.last_fetched_epoch = cached.last_fetched_epoch
            existing.log_start_offset = cached.log_start_offset
    _forgotten(request, uses_ids, session)
    return session, list(session.partitions.values()), True


def _partition_data(cached: CachedPartition, result: LogReadResult, isolation: int, uses_ids: bool) -> PartitionData:
    info = result.info
    records: FileRange | bytes = b""  # Kafka sends empty records, never null
    if info is None:
        code = result.error_code
        if uses_ids and not cached.topic:
            code = ErrorCode.UNKNOWN_TOPIC_ID  # the request named a topic id we do not know
        return PartitionData(partition_index=cached.partition, error_code=code,
                             high_watermark=result.high_watermark, last_stable_offset=result.last_stable_offset,
                             log_start_offset=result.log_start_offset, preferred_read_replica=-1,
                             aborted_transactions=None, records=records)
    slice_ = info.records
    if slice_ is not None and slice_.size:
        records = FileRange(slice_.file, slice_.position, slice_.size)
    return PartitionData(
        partition_index=cached.partition, error_code=ErrorCode.NO_ERROR,
        high_watermark=result.high_watermark, last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset, preferred_read_replica=-1,
        aborted_transactions=(
            [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
             for a in info.aborted_transactions or ()]
            if isolation == READ_COMMITTED else None),
        records=records,
    )


def _response(partitions: list[CachedPartition], results: list[LogReadResult], session: FetchSession | None,
              incremental: bool, isolation: int, uses_ids: bool) -> FetchResponse:
    topics: dict[object, FetchableTopicResponse] = {}
    for cached, result in zip(partitions, results, strict=True):
        has_records = result.info is not None and result.info.size > 0
        send = cached.needs_response(result.error_code, has_records, result.high_watermark,
                                     result.last_stable_offset, result.log_start_offset)
        if incremental and not send:
            continue
        key = cached.topic_id if uses_ids else cached.topic
        topic = topics.get(key)
        if topic is None:
            topic = topics[key] = FetchableTopicResponse(topic=cached.topic, topic_id=cached.topic_id, partitions=[])
        topic.partitions.append(_partition_data(cached, result, isolation, uses_ids))
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR,
                         session_id=session.session_id if session else INVALID_SESSION_ID,
                         responses=list(topics.values()))


def handle(ctx: RequestContext, broker: BrokerServices, request: FetchRequest
           ) -> FetchResponse | Awaitable[FetchResponse]:
    """Decode and resolve the session → ``ReplicaManager.fetch_messages`` → encode.

    Answers at once when the replica manager did (no task); else when its long poll ends.
    """
    uses_ids = ctx.api_version >= 13
    replica_id = request.replica_state.replica_id if ctx.api_version >= 15 else request.replica_id
    try:
        session, partitions, incremental = _resolve_session(broker, request, uses_ids)
    except FetchSessionError as exc:
        return FetchResponse(throttle_time_ms=0, error_code=exc.error_code, session_id=0, responses=[])
    params = FetchParams(replica_id=replica_id, max_wait_ms=request.max_wait_ms, min_bytes=request.min_bytes,
                         max_bytes=request.max_bytes, isolation_level=request.isolation_level)
    results = broker.replica_manager.fetch_messages(params, partitions)
    if isinstance(results, list):
        return _response(partitions, results, session, incremental, params.isolation_level, uses_ids)
    return _answer_later(results, partitions, session, incremental, params.isolation_level, uses_ids)


async def _answer_later(pending: Awaitable[list[LogReadResult]], partitions: list[CachedPartition],
                        session: FetchSession | None, incremental: bool, isolation: int,
                        uses_ids: bool) -> FetchResponse:
    return _response(partitions, await pending, session, incremental, isolation, uses_ids)
