"""Fetch (1): file ranges of whole batches, long polls, incremental sessions.

Reads never copy or parse records: each partition's answer is a FileRange of
its segment, written to the socket when the response goes out. A fetch that
finds less than ``min_bytes`` waits in the purgatory until an append to one of
its partitions or ``max_wait_ms``, whichever comes first, then reads again.

``max_bytes`` bounds the response and ``partition_max_bytes`` each partition;
the first partition with data always gets at least one whole batch (KIP-74),
so an oversized batch can never stall a consumer.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable

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
from replication.partition import READ_COMMITTED, LogReadResult
from storage.errors import OffsetOutOfRangeError

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer
    from broker.socket_server import RequestContext

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 16  # v17+ carry follower-only fields (KIP-853/KIP-1166) we do not serve yet


@dataclass(slots=True)
class _Read:
    cached: CachedPartition
    error_code: int
    result: LogReadResult | None


def _key(uses_ids: bool, topic: str, topic_id: uuid.UUID, partition: int) -> PartitionKey:
    return (topic_id if uses_ids else topic, partition)


def _requested_partitions(server: "KafkaServer", request: FetchRequest, uses_ids: bool) -> dict[PartitionKey, CachedPartition]:
    wanted: dict[PartitionKey, CachedPartition] = {}
    for topic in request.topics:
        if uses_ids:
            meta = server.metadata.by_id(topic.topic_id)
            name, topic_id = (meta.name if meta else ""), topic.topic_id
        else:
            meta = server.metadata.get(topic.topic)
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


def _resolve_session(server: "KafkaServer", request: FetchRequest, uses_ids: bool
                     ) -> tuple[FetchSession | None, list[CachedPartition], bool]:
    """(session, partitions to read, is_incremental) per KIP-227's epoch rules."""
    cache = server.fetch_sessions
    epoch, session_id = request.session_epoch, request.session_id
    wanted = _requested_partitions(server, request, uses_ids)
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


def _read_all(server: "KafkaServer", partitions: list[CachedPartition], max_bytes: int, isolation: int,
              from_follower: bool, uses_ids: bool) -> tuple[list[_Read], int, bool]:
    """Read every partition once: (reads, total bytes, any error)."""
    reads: list[_Read] = []
    total, any_error = 0, False
    unknown = ErrorCode.UNKNOWN_TOPIC_ID if uses_ids else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for cached in partitions:
        partition = server.replica_manager.get_partition(cached.topic, cached.partition) if cached.topic else None
        if partition is None:
            reads.append(_Read(cached, unknown, None))
            any_error = True
            continue
        epoch = cached.current_leader_epoch
        if epoch >= 0 and epoch != partition.leader_epoch:
            code = ErrorCode.FENCED_LEADER_EPOCH if epoch < partition.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
            reads.append(_Read(cached, code, None))
            any_error = True
            continue
        limit = min(cached.max_bytes, max(max_bytes - total, 0))
        try:
            result = partition.read_records(cached.fetch_offset, limit, isolation,
                                            min_one_message=total == 0, fetch_only_committed=not from_follower)
        except OffsetOutOfRangeError:
            reads.append(_Read(cached, ErrorCode.OFFSET_OUT_OF_RANGE, None))
            any_error = True
            continue
        total += result.info.size
        reads.append(_Read(cached, ErrorCode.NO_ERROR, result))
    return reads, total, any_error


def _partition_data(server: "KafkaServer", read: _Read, isolation: int) -> PartitionData:
    cached, result = read.cached, read.result
    if result is None:
        partition = server.replica_manager.get_partition(cached.topic, cached.partition) if cached.topic else None
        hw = partition.high_watermark if partition else -1
        lso = partition.last_stable_offset if partition else -1
        start = partition.log_start_offset if partition else -1
        return PartitionData(partition_index=cached.partition, error_code=read.error_code, high_watermark=hw,
                             last_stable_offset=lso, log_start_offset=start, preferred_read_replica=-1,
                             aborted_transactions=None, records=b"")
    records: FileRange | bytes = b""  # Kafka sends empty records, never null
    slice_ = result.info.records
    if slice_ is not None and slice_.size:
        records = FileRange(slice_.file, slice_.position, slice_.size)
    return PartitionData(
        partition_index=cached.partition, error_code=ErrorCode.NO_ERROR,
        high_watermark=result.high_watermark, last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset, preferred_read_replica=-1,
        aborted_transactions=(
            [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
             for a in result.info.aborted_transactions or ()]
            if isolation == READ_COMMITTED else None),
        records=records,
    )


def _response(server: "KafkaServer", reads: list[_Read], session: FetchSession | None, incremental: bool,
              isolation: int, uses_ids: bool) -> FetchResponse:
    topics: dict[PartitionKey | object, FetchableTopicResponse] = {}
    for read in reads:
        cached, result = read.cached, read.result
        hw = result.high_watermark if result else -1
        lso = result.last_stable_offset if result else -1
        start = result.log_start_offset if result else -1
        has_records = result is not None and result.info.size > 0
        send = cached.needs_response(read.error_code, has_records, hw, lso, start)
        if incremental and not send:
            continue
        key = cached.topic_id if uses_ids else cached.topic
        topic = topics.get(key)
        if topic is None:
            topic = topics[key] = FetchableTopicResponse(topic=cached.topic, topic_id=cached.topic_id, partitions=[])
        topic.partitions.append(_partition_data(server, read, isolation))
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR,
                         session_id=session.session_id if session else INVALID_SESSION_ID,
                         responses=list(topics.values()))


def handle(ctx: "RequestContext", server: "KafkaServer", request: FetchRequest
           ) -> FetchResponse | Awaitable[FetchResponse]:
    """Answer at once when the first read suffices (no task); else long-poll."""
    uses_ids = ctx.api_version >= 13
    replica_id = request.replica_state.replica_id if ctx.api_version >= 15 else request.replica_id
    from_follower = replica_id >= 0
    isolation = request.isolation_level
    try:
        session, partitions, incremental = _resolve_session(server, request, uses_ids)
    except FetchSessionError as exc:
        return FetchResponse(throttle_time_ms=0, error_code=exc.error_code, session_id=0, responses=[])

    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    reads, total, any_error = _read_all(server, partitions, request.max_bytes, isolation, from_follower, uses_ids)
    if total >= request.min_bytes or any_error or deadline <= time.monotonic() or not partitions:
        return _response(server, reads, session, incremental, isolation, uses_ids)
    return _long_poll(server, request, session, partitions, incremental, deadline, from_follower, uses_ids)


async def _long_poll(server: "KafkaServer", request: FetchRequest, session: FetchSession | None,
                     partitions: list[CachedPartition], incremental: bool, deadline: float,
                     from_follower: bool, uses_ids: bool) -> FetchResponse:
    """Wait in the purgatory until an append to one of the partitions, or the deadline.

    Reads again first: appends may have landed since ``handle`` read, and the
    read and the registration in the purgatory must have no await between them,
    or a notify could fall in the gap and the fetch sleep out its wait.
    """
    isolation = request.isolation_level
    keys = [(c.topic, c.partition) for c in partitions]
    while True:
        reads, total, any_error = _read_all(server, partitions, request.max_bytes, isolation, from_follower, uses_ids)
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or any_error or remaining <= 0:
            break
        if not await server.fetch_purgatory.wait(keys, remaining):
            reads, _, _ = _read_all(server, partitions, request.max_bytes, isolation, from_follower, uses_ids)
            break
    return _response(server, reads, session, incremental, isolation, uses_ids)
