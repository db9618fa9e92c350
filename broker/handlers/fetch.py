"""Fetch (1): file ranges of whole batches, long polls, incremental sessions.

Reads never copy or parse records: each partition's answer is a FileRange of
its segment, written to the socket when the response goes out. The handler
resolves the KIP-227 session, makes one ``ReplicaManager.fetch_messages`` call
(reads, leader-epoch fencing, and the long poll: a fetch that finds less than
``min_bytes`` waits until an append to one of its partitions or ``max_wait_ms``)
and encodes what it returns.

``max_bytes`` (at most the broker's ``fetch.max.bytes``) bounds the response and
``partition_max_bytes`` each partition;
the first partition with data always gets at least one whole batch (KIP-74),
so an oversized batch can never stall a consumer.

From v12 a fetcher may name the epoch of the last batch it holds
(``last_fetched_epoch``, KIP-320): when the leader's log does not have that epoch
up to the fetch offset, the partition is answered at once with no records and
the ``diverging_epoch`` (the largest epoch both may share and where it ends),
and the fetcher truncates there. A follower's fetch that diverged does not move
the leader's view of its log end.

From v11 a consumer names its rack (``rack_id``, KIP-392): it may then read from a
follower (up to that replica's high watermark), and a leader with a replica selector
may answer it with no records and the ``preferred_read_replica`` to read from instead.

Versions Kafka 4 removed (v0-v3) are served as Kafka 3.9 served them: no
response-level ``max_bytes`` below v3 (Int.MaxValue) and no KIP-74 (a partition
whose first batch exceeds its limit answers no records), and the stored v2
batches *down-converted* to message format v0 (Fetch v0-v1) or v1 (v2-v3). Only
those requests read and convert record bytes; every later version stays a file
range. Below v10 (KIP-110) a topic with ``compression.type=zstd`` answers
UNSUPPORTED_COMPRESSION_TYPE, a check of the topic's config, never of its
batches: Kafka 3.9 serves producer-compressed zstd batches to Fetch v4-v9 as
they are, and so does pafka.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker.fetch_session import CachedPartition, FetchSession, FetchSessionError, PartitionKey
from broker.security.auth_helper import authorize_cluster, authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.buffers import FileRange
from protocol.errors import CorruptRecordError, ErrorCode
from protocol.legacy_record import UnsupportedCompressionError, down_convert_fetched
from protocol.messages.fetch import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from protocol.primitives import UNSET
from protocol.request_constants import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, READ_COMMITTED
from replication.partition import LogReadResult
from replication.replica_manager import FetchParams

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

log = logging.getLogger(__name__)

API_KEY = 1
MIN_VERSION = 0
#: v17 (ReplicaDirectoryId, KIP-853; Kafka 3.9's newest) and v18 (the follower's HighWatermark,
#: KIP-1166) add tagged fields that only a follower sends: a consumer's fetch at v17-v18 is its v16
#: fetch. pafka's followers send neither (a directory id matters only with several log dirs per
#: replica in KRaft; the high watermark they learn from the answer), so both are read as absent.
MAX_VERSION = 18
#: The first version carrying the consumer's rack (KIP-392): a consumer may then read from a follower.
CLIENT_METADATA_MIN_VERSION = 11
#: The first version that may read zstd (KIP-110).
ZSTD_MIN_VERSION = 10
#: The message format each old version reads: v0-v1 format v0, v2-v3 format v1 (KIP-32).
DOWN_CONVERSION_MAGIC = {0: 0, 1: 0, 2: 1, 3: 1}
#: The last version whose clients may not know KAFKA_STORAGE_ERROR (Kafka answers them NOT_LEADER_OR_FOLLOWER).
STORAGE_ERROR_MAX_VERSION = 5
#: Down-conversion of more stored bytes than this runs on a worker thread, not the event loop.
#: Converting parses and rebuilds every record, about 11 us a record here: 330 KB of small
#: uncompressed records took 14 ms, 42 KB of the same gzip-compressed 58 ms. The thread still
#: takes the GIL, but hands it back every switch interval (5 ms), so other connections wait
#: that long at most instead of the whole conversion; a few records (a long poll's answer)
#: are cheaper on the loop than the thread hop.
CONVERT_ON_LOOP_MAX_BYTES = 4 * 1024


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
            existing.topic = cached.topic
            existing.fetch_offset = cached.fetch_offset
            existing.max_bytes = cached.max_bytes
            existing.current_leader_epoch = cached.current_leader_epoch
            existing.last_fetched_epoch = cached.last_fetched_epoch
            existing.log_start_offset = cached.log_start_offset
    _forgotten(request, uses_ids, session)
    if uses_ids:
        _resolve_unknown_names(broker, session)
    return session, list(session.partitions.values()), True


def _resolve_unknown_names(broker: BrokerServices, session: FetchSession) -> None:
    """Name the session's partitions whose topic id was unknown when they joined it (Kafka's
    ``maybeResolveUnknownName``): a follower learns of a new topic from LeaderAndIsr, and may fetch
    before this broker's metadata has it. An incremental request does not name such a partition
    again, so without this it would be answered UNKNOWN_TOPIC_ID for as long as the session lives."""
    for cached in session.partitions.values():
        if not cached.topic:
            meta = broker.metadata.by_id(cached.topic_id)
            if meta is not None:
                cached.topic = meta.name


def _partition_data(broker: BrokerServices, cached: CachedPartition, result: LogReadResult, isolation: int,
                    uses_ids: bool) -> PartitionData:
    info = result.info
    records: FileRange | bytes = b""  # Kafka sends empty records, never null
    if info is None:
        code = result.error_code
        if uses_ids and not cached.topic:
            code = ErrorCode.UNKNOWN_TOPIC_ID  # the request named a topic id we do not know
        elif code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            code = broker.cluster_view.unhosted_error(cached.topic, cached.partition)
        return PartitionData(partition_index=cached.partition, error_code=code,
                             high_watermark=result.high_watermark, last_stable_offset=result.last_stable_offset,
                             log_start_offset=result.log_start_offset, preferred_read_replica=-1,
                             aborted_transactions=None, records=records)
    slice_ = info.records
    if slice_ is not None and slice_.size:
        records = FileRange(slice_.file, slice_.position, slice_.size)
    aborted = None
    if isolation == READ_COMMITTED and result.diverging_epoch is None:
        aborted = [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                   for a in info.aborted_transactions or ()]
    # KIP-320: the fetcher truncates at the diverging epoch's end and is sent nothing past it.
    diverging: EpochEndOffset | None = None
    if result.diverging_epoch is not None:
        epoch, end_offset = result.diverging_epoch
        diverging = EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return PartitionData(
        partition_index=cached.partition, error_code=ErrorCode.NO_ERROR,
        high_watermark=result.high_watermark, last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset, preferred_read_replica=result.preferred_read_replica,
        aborted_transactions=aborted, diverging_epoch=diverging or UNSET, records=records)


def _response(broker: BrokerServices, partitions: list[CachedPartition], results: list[LogReadResult],
              session: FetchSession | None, incremental: bool, isolation: int, uses_ids: bool,
              denied: list[CachedPartition]) -> FetchResponse:
    topics: dict[object, FetchableTopicResponse] = {}
    for cached in denied:  # Kafka's erroneous partitions: answered in every response, incremental or not
        key = cached.topic_id if uses_ids else cached.topic
        topic = topics.get(key)
        if topic is None:
            topic = topics[key] = FetchableTopicResponse(topic=cached.topic, topic_id=cached.topic_id, partitions=[])
        topic.partitions.append(_error_partition(cached.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    for cached, result in zip(partitions, results, strict=True):
        has_records = result.info is not None and result.info.size > 0
        send = cached.needs_response(result.error_code, has_records, result.high_watermark,
                                     result.last_stable_offset, result.log_start_offset)
        send = send or result.diverging_epoch is not None or result.preferred_read_replica >= 0
        if incremental and not send:
            continue
        key = cached.topic_id if uses_ids else cached.topic
        topic = topics.get(key)
        if topic is None:
            topic = topics[key] = FetchableTopicResponse(topic=cached.topic, topic_id=cached.topic_id, partitions=[])
        topic.partitions.append(_partition_data(broker, cached, result, isolation, uses_ids))
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR,
                         session_id=session.session_id if session else INVALID_SESSION_ID,
                         responses=list(topics.values()))


def handle(ctx: RequestContext, broker: BrokerServices, request: FetchRequest
           ) -> FetchResponse | Awaitable[FetchResponse]:
    """Decode and resolve the session → ``ReplicaManager.fetch_messages`` → encode.

    Answers at once when the replica manager did (no task); else when its long poll ends.
    """
    version = ctx.api_version
    uses_ids = version >= 13
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    try:
        session, partitions, incremental = _resolve_session(broker, request, uses_ids)
    except FetchSessionError as exc:
        return FetchResponse(throttle_time_ms=0, error_code=exc.error_code, session_id=0, responses=[])
    denied: list[CachedPartition] = []
    if broker.authorizer is not None:
        partitions, denied = _authorized(ctx, broker, partitions, replica_id)
    # The broker's fetch.max.bytes caps what any fetch asks for, its min_bytes too (Kafka's handleFetchRequest).
    max_bytes = min(request.max_bytes, broker.config.fetch_max_bytes)
    params = FetchParams(replica_id=replica_id, max_wait_ms=request.max_wait_ms,
                         min_bytes=min(request.min_bytes, max_bytes), max_bytes=max_bytes,
                         isolation_level=request.isolation_level,
                         hard_max_bytes_limit=version <= 2,
                         client_rack=request.rack_id if version >= CLIENT_METADATA_MIN_VERSION else None)
    results = broker.replica_manager.fetch_messages(params, partitions)
    if isinstance(results, list):
        response = _response(broker, partitions, results, session, incremental, params.isolation_level, uses_ids,
                             denied)
        return response if version >= ZSTD_MIN_VERSION else _for_old_version(broker, version, response, partitions)
    return _answer_later(broker, version, results, partitions, session, incremental, params.isolation_level,
                         uses_ids, denied)


def _authorized(ctx: RequestContext, broker: BrokerServices, partitions: list[CachedPartition], replica_id: int
                ) -> tuple[list[CachedPartition], list[CachedPartition]]:
    """(allowed, denied): a follower's fetch needs CLUSTER_ACTION on the cluster, a consumer's READ on
    each topic (Kafka's handleFetchRequest)."""
    if replica_id >= 0:
        allowed = authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION)
        return (partitions, []) if allowed else ([], partitions)
    readable = authorized_names(ctx, broker, AclOperation.READ, ResourceType.TOPIC, (p.topic for p in partitions))
    readable.add("")  # a topic id not known here: answered UNKNOWN_TOPIC_ID, as before authorization
    return [p for p in partitions if p.topic in readable], [p for p in partitions if p.topic not in readable]


async def _answer_later(broker: BrokerServices, version: int, pending: Awaitable[list[LogReadResult]],
                        partitions: list[CachedPartition], session: FetchSession | None, incremental: bool,
                        isolation: int, uses_ids: bool, denied: list[CachedPartition]) -> FetchResponse:
    response = _response(broker, partitions, await pending, session, incremental, isolation, uses_ids, denied)
    if version >= ZSTD_MIN_VERSION:
        return response
    answer = _for_old_version(broker, version, response, partitions)
    return answer if isinstance(answer, FetchResponse) else await answer


# -- Fetch v0-v9: Kafka 3.9's maybeConvertFetchedData ------------------------------------------------


def _error_partition(index: int, code: int) -> PartitionData:
    """A partition answered with an error alone (Kafka's FetchResponse.partitionResponse)."""
    return PartitionData(partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1,
                         log_start_offset=-1, preferred_read_replica=-1, aborted_transactions=None, records=b"")


def _stored_bytes(records: FileRange) -> bytes:
    """The stored batches of a partition's answer (a copy: this path converts them)."""
    try:
        return os.pread(records.file.fileno(), records.length, records.offset)
    except (OSError, ValueError):  # the segment was deleted meanwhile: the consumer fetches again
        return b""


def _convert(stored_range: FileRange, magic: int, fetch_offset: int) -> bytearray | ErrorCode:
    try:
        return down_convert_fetched(_stored_bytes(stored_range), magic, fetch_offset)
    except UnsupportedCompressionError:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    except CorruptRecordError as exc:
        log.error("cannot down-convert stored records at offset %d: %s", fetch_offset, exc)
        return ErrorCode.CORRUPT_MESSAGE


#: One partition to down-convert: (its topic's partition list, index in it, stored range, fetch offset).
_Conversion = tuple[list[PartitionData], int, FileRange, int]


def _for_old_version(broker: BrokerServices, version: int, response: FetchResponse,
                     partitions: list[CachedPartition]) -> FetchResponse | Awaitable[FetchResponse]:
    """Apply what Kafka 3.9 did to a fetch answer below v10: the zstd-topic rule, the storage
    error old clients do not know, and below v4 down-conversion (off the loop when large)."""
    magic = DOWN_CONVERSION_MAGIC.get(version)
    fetch_offsets = {(p.topic, p.partition): p.fetch_offset for p in partitions} if magic is not None else {}
    replica_manager = broker.replica_manager
    conversions: list[_Conversion] = []
    for topic in response.responses:
        answers = topic.partitions
        for i, data in enumerate(answers):
            config = replica_manager.get_log_config((topic.topic, data.partition_index))
            if config is not None and config.compression_type == "zstd":
                answers[i] = _error_partition(data.partition_index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
                continue
            if data.error_code == ErrorCode.KAFKA_STORAGE_ERROR and version <= STORAGE_ERROR_MAX_VERSION:
                data.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            if magic is not None and data.error_code == ErrorCode.NO_ERROR:
                stored = data.records
                data.records = b""
                if isinstance(stored, FileRange) and stored.length:
                    conversions.append((answers, i, stored, fetch_offsets[(topic.topic, data.partition_index)]))
    if magic is None or not conversions:
        return response
    # Reading and converting both go to the worker thread for large answers.
    if sum(stored.length for _, _, stored, _ in conversions) <= CONVERT_ON_LOOP_MAX_BYTES:
        _apply(conversions, [_convert(stored, magic, offset) for _, _, stored, offset in conversions])
        return response
    return _convert_off_loop(response, conversions, magic)


def _apply(conversions: list[_Conversion], converted: list[bytearray | ErrorCode]) -> None:
    for (answers, i, _, _), records in zip(conversions, converted, strict=True):
        if isinstance(records, ErrorCode):
            answers[i] = _error_partition(answers[i].partition_index, records)
        else:
            answers[i].records = records


def _convert_all(conversions: list[tuple[FileRange, int]], magic: int) -> list[bytearray | ErrorCode]:
    return [_convert(stored, magic, offset) for stored, offset in conversions]


async def _convert_off_loop(response: FetchResponse, conversions: list[_Conversion], magic: int) -> FetchResponse:
    # A worker thread, not the append thread: a conversion must not hold up appends.
    work = [(stored, offset) for _, _, stored, offset in conversions]
    _apply(conversions, await asyncio.to_thread(_convert_all, work, magic))
    return response
