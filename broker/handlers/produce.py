"""Produce (0): batches to disk as the bytes they arrived in.

The records are never parsed: each partition's batch has its header checked
and CRC32C verified, its base offset and leader epoch patched in place, and is
written with one call (see ``storage.log.Log.append_as_leader``). The handler
decodes and checks the request, makes one ``ReplicaManager.append_records`` call
(which picks the event loop or the append thread, and waits for the ISR when
acks=-1) and encodes its results. An append made on the loop answers at once,
without a task: the socket server then sends the answers to every request of
one read in one write.

acks=0 gets no response; on an error Kafka closes the connection instead, so
the producer notices, and so do we.

A transactional produce (one with a transactional id) is verified with the
transaction coordinator, where its producer has no transaction open on a
partition yet, before it is appended (KIP-890 part 1; see
``replication.txn_verification``).

Produce v0-v2 (clients older than Kafka 0.11) carry message sets of format
v0/v1, which Kafka 3.x up-converts to v2 batches on append, and so does pafka
(``storage.log_conversion``): those requests take their own path
(``_handle_legacy``), so the v3+ path pays nothing for them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize, authorized_names
from protocol import compression
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode, ProtocolError
from protocol.legacy_record import message_set_magic
from protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from protocol.record_batch import COMPRESSION_MASK, CURRENT_MAGIC, parse_batch_header
from replication.replica_manager import PartitionAppendResult
from replication.txn_verification import TransactionalProduce
from storage.log_append import AppendOrigin
from storage.log_conversion import convert_for_append

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

log = logging.getLogger(__name__)

API_KEY = 0
MIN_VERSION = 0
MAX_VERSION = 13
#: KIP-110: zstd batches need Produce v7.
_FIRST_ZSTD_VERSION = 7
#: KIP-890: from v11 a producer handles TRANSACTION_ABORTABLE (older ones get INVALID_TXN_STATE).
_FIRST_ABORTABLE_VERSION = 11
#: KIP-890 part 2: a v12+ produce within a transaction comes from a transaction version 2 client, and
#: its first write to a partition also does AddPartitionsToTxn's work (older clients add explicitly
#: and may not send v12+ within a transaction).
IMPLICIT_ADD_VERSION = 12


def _check_one_batch(records: memoryview | bytearray | None, version: int) -> tuple[ErrorCode, str] | None:
    """Kafka's ProduceRequest.validateRecords: a v3+ produce request carries exactly one v2
    batch per partition, and zstd only from v7 (read from the header's attributes)."""
    if records is None or len(records) == 0:
        return ErrorCode.INVALID_RECORD, "Produce requests with version 3+ must have at least one record batch per partition"
    try:
        header = parse_batch_header(records, 0)
    except ProtocolError as exc:
        return ErrorCode.INVALID_RECORD, str(exc)
    if version < _FIRST_ZSTD_VERSION and header.attributes & COMPRESSION_MASK == compression.ZSTD:
        return (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"Produce requests with version {version} are not allowed to use ZStandard compression")
    if header.size_in_bytes != len(records):
        return (ErrorCode.INVALID_RECORD,
                "Produce requests with version 3+ are only allowed to contain exactly one record batch per partition")
    return None


def _partition_error(index: int, code: int, message: str | None = None) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                    log_start_offset=-1, error_message=message)


def handle(ctx: RequestContext, broker: BrokerServices, request: ProduceRequest
           ) -> ProduceResponse | Awaitable[ProduceResponse | None] | None:
    """Decode → ``ReplicaManager.append_records`` → encode; answers at once when the append did."""
    version = ctx.api_version
    if version < 3:
        return _handle_legacy(ctx, broker, request)
    by_topic_id = version >= 13
    denied = None if broker.authorizer is None else _unauthorized(ctx, broker, request, by_topic_id)
    if denied is TRANSACTIONAL_ID_DENIED:
        return _all_failed(ctx, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    acks = request.acks
    responses: list[TopicProduceResponse] = []
    appends: list[tuple[str, int, memoryview | bytearray]] = []
    slots: list[PartitionProduceResponse] = []  # response entries awaiting an append result
    bad_acks = acks not in (-1, 0, 1)
    for topic_data in request.topic_data:
        entries: list[PartitionProduceResponse] = []
        responses.append(TopicProduceResponse(name=topic_data.name, topic_id=topic_data.topic_id,
                                              partition_responses=entries))
        if by_topic_id:
            meta = broker.metadata.by_id(topic_data.topic_id)
            name = meta.name if meta is not None else None
        else:
            name = topic_data.name
        for data in topic_data.partition_data:
            if bad_acks:
                entry = _partition_error(data.index, ErrorCode.INVALID_REQUIRED_ACKS)
            elif name is None:
                entry = _partition_error(data.index, ErrorCode.UNKNOWN_TOPIC_ID)
            elif denied and name in denied:
                entry = _partition_error(data.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            # A decoded request's records are a memoryview of its frame; the field's type is what encoders accept.
            elif (problem := _check_one_batch(data.records, version)) is not None:  # type: ignore[arg-type]
                entry = _partition_error(data.index, *problem)
            else:
                appends.append((name, data.index, data.records))  # type: ignore[arg-type]  # checked above
                entry = PartitionProduceResponse(index=data.index)
                slots.append(entry)
            entries.append(entry)

    if appends:
        tid = request.transactional_id
        transactional = None if tid is None else TransactionalProduce(tid, version >= _FIRST_ABORTABLE_VERSION,
                                                                      version >= IMPLICIT_ADD_VERSION)
        results = broker.replica_manager.append_records(appends, acks, request.timeout_ms, AppendOrigin.CLIENT,
                                                        transactional)
        if not isinstance(results, list):
            return _answer_later(ctx, broker, results, acks, responses, slots, appends, by_topic_id)
        _fill_results(broker, slots, appends, results, by_topic_id)
    return _response(ctx, acks, responses)


def _handle_legacy(ctx: RequestContext, broker: BrokerServices, request: ProduceRequest
                   ) -> ProduceResponse | Awaitable[ProduceResponse | None] | None:
    """Produce v0-v2: each partition's message set (format v0/v1, or a v2 batch, which
    Kafka accepts here too) is converted and appended on the append thread.

    Kafka checks nothing of these versions' records at the request level
    (ProduceRequest.validateRecords starts at v3); its LogValidator then refuses
    what ``storage.log_conversion`` refuses, with the same codes. A v2 batch is
    checked as in v3+ (Kafka's validator also takes one batch only), with zstd
    refused below v7 as KIP-110 states for every older version.
    """
    denied = None if broker.authorizer is None else _unauthorized(ctx, broker, request, False)
    if denied is TRANSACTIONAL_ID_DENIED:
        return _all_failed(ctx, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    acks = request.acks
    responses: list[TopicProduceResponse] = []
    appends: list[tuple[str, int, memoryview | bytearray]] = []
    slots: list[PartitionProduceResponse] = []
    bad_acks = acks not in (-1, 0, 1)
    for topic_data in request.topic_data:
        entries: list[PartitionProduceResponse] = []
        responses.append(TopicProduceResponse(name=topic_data.name, partition_responses=entries))
        if denied and topic_data.name in denied:
            entries.extend(_partition_error(d.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                           for d in topic_data.partition_data)
            continue
        for data in topic_data.partition_data:
            # A decoded request's records are a memoryview of its frame (or None: no message at all).
            records: memoryview | bytearray = bytearray() if data.records is None else data.records  # type: ignore[assignment]
            if bad_acks:
                entry = _partition_error(data.index, ErrorCode.INVALID_REQUIRED_ACKS)
            elif (message_set_magic(records) == CURRENT_MAGIC
                  and (problem := _check_one_batch(records, ctx.api_version)) is not None):
                entry = _partition_error(data.index, *problem)
            else:
                appends.append((topic_data.name, data.index, records))
                entry = PartitionProduceResponse(index=data.index)
                slots.append(entry)
            entries.append(entry)
    if appends:
        results = broker.replica_manager.append_converted_records(appends, acks, request.timeout_ms,
                                                                  convert_for_append)
        if not isinstance(results, list):
            return _answer_later(ctx, broker, results, acks, responses, slots, appends, False)
        _fill_results(broker, slots, appends, results, False)
    return _response(ctx, acks, responses)


#: _unauthorized's answer when the producer may not write for its transactional id.
TRANSACTIONAL_ID_DENIED: frozenset[str] = frozenset({"\0transactional-id"})


def _unauthorized(ctx: RequestContext, broker: BrokerServices, request: ProduceRequest,
                  by_topic_id: bool) -> frozenset[str]:
    """The topics the producer may not WRITE to; TRANSACTIONAL_ID_DENIED when a transactional produce
    lacks WRITE on its transactional id (Kafka then fails every partition)."""
    tid = request.transactional_id
    if tid is not None and not authorize(ctx, broker, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return TRANSACTIONAL_ID_DENIED
    if by_topic_id:
        names = [meta.name for t in request.topic_data if (meta := broker.metadata.by_id(t.topic_id)) is not None]
    else:
        names = [t.name for t in request.topic_data]
    allowed = authorized_names(ctx, broker, AclOperation.WRITE, ResourceType.TOPIC, names)
    return frozenset(name for name in names if name not in allowed)


def _all_failed(ctx: RequestContext, request: ProduceRequest, code: ErrorCode) -> ProduceResponse | None:
    responses = [TopicProduceResponse(name=t.name, topic_id=t.topic_id,
                                      partition_responses=[_partition_error(d.index, code) for d in t.partition_data])
                 for t in request.topic_data]
    return _response(ctx, request.acks, responses)


async def _answer_later(ctx: RequestContext, broker: BrokerServices, pending: Awaitable[list[PartitionAppendResult]],
                        acks: int, responses: list[TopicProduceResponse], slots: list[PartitionProduceResponse],
                        appends: list[tuple[str, int, memoryview | bytearray]],
                        by_topic_id: bool) -> ProduceResponse | None:
    _fill_results(broker, slots, appends, await pending, by_topic_id)
    return _response(ctx, acks, responses)


def _fill_results(broker: BrokerServices, slots: list[PartitionProduceResponse],
                  appends: list[tuple[str, int, memoryview | bytearray]], results: list[PartitionAppendResult],
                  by_topic_id: bool) -> None:
    for i, (entry, result) in enumerate(zip(slots, results, strict=True)):
        info = result.info
        if info is not None:
            entry.error_code = result.error_code
            entry.base_offset = info.first_offset
            entry.log_append_time_ms = info.log_append_time
            entry.log_start_offset = info.log_start_offset
        else:
            code = result.error_code
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                # Not hosted here: led elsewhere in a cluster (NOT_LEADER_OR_FOLLOWER), else unknown.
                code = broker.cluster_view.unhosted_error(appends[i][0], appends[i][1])
            if by_topic_id and code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                code = ErrorCode.UNKNOWN_TOPIC_ID  # v13+ names topics by id
            entry.error_code = code
            entry.base_offset, entry.log_append_time_ms, entry.log_start_offset = -1, -1, -1
            entry.error_message = result.error_message
            if result.record_errors:  # encoded from v8 (KIP-467); older versions carry the code alone
                entry.record_errors = [BatchIndexAndErrorMessage(batch_index=e.batch_index,
                                                                 batch_index_error_message=e.message)
                                       for e in result.record_errors]


def _response(ctx: RequestContext, acks: int, responses: list[TopicProduceResponse]) -> ProduceResponse | None:
    if acks == 0:
        if any(e.error_code for t in responses for e in t.partition_responses):
            log.info("closing %s: acks=0 produce failed", ctx.connection.peer)
            ctx.connection.close()
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
