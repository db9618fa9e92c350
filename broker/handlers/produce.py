"""Produce (0): batches to disk as the bytes they arrived in.

The records are never parsed: each partition's batch has its header checked
and CRC32C verified, its base offset and leader epoch patched in place, and is
written with one call (see ``storage.log.Log.append_as_leader``). Appends run
on the event loop when they cannot block, else on the append thread (see
``broker.kafka_server``); the response is sent once they are in the log (acks=1)
or in the ISR, which for a lone broker is the same moment (acks=-1). An append
made on the loop answers at once, without a task: the socket server then sends
the answers to every request of one read in one write.

acks=0 gets no response; on an error Kafka closes the connection instead, so
the producer notices, and so do we.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Awaitable

from protocol.errors import ErrorCode, ProtocolError
from protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from protocol.record_batch import parse_batch_header
from replication.partition import Partition
from storage.log_append import AppendOrigin

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer
    from broker.socket_server import RequestContext

log = logging.getLogger(__name__)

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 13
#: Kafka 4 still lists Produce from v0 in ApiVersions (KAFKA-18659): librdkafka
#: derives its message-format and compression features from Produce v0-v2
#: being listed and otherwise refuses to compress. Requests below v3 are
#: refused at decode time, exactly as Kafka 4 refuses them.
ADVERTISED_MIN_VERSION = 0


def _check_one_batch(records: memoryview | None) -> str | None:
    """Kafka 4: a v3+ produce request carries exactly one v2 batch per partition."""
    if records is None or len(records) == 0:
        return "Produce requests with version 3+ must have at least one record batch per partition"
    try:
        header = parse_batch_header(records, 0)
    except ProtocolError as exc:
        return str(exc)
    if header.size_in_bytes != len(records):
        return "Produce requests with version 3+ are only allowed to contain exactly one record batch per partition"
    return None


def _partition_error(index: int, code: int, message: str | None = None) -> PartitionProduceResponse:
    return PartitionProduceResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                    log_start_offset=-1, error_message=message)


Append = tuple[Partition, "memoryview | bytearray"]


def handle(ctx: "RequestContext", server: "KafkaServer", request: ProduceRequest
           ) -> ProduceResponse | None | Awaitable[ProduceResponse | None]:
    by_topic_id = ctx.api_version >= 13
    acks = request.acks
    responses: list[TopicProduceResponse] = []
    appends: list[Append] = []
    slots: list[PartitionProduceResponse] = []  # response entries awaiting an append result
    bad_acks = acks not in (-1, 0, 1)
    # Looked up once: this loop runs once per partition batch, 1,000 times a request
    # when one producer writes to 1,000 partitions.
    get_partition = server.replica_manager.get_partition
    for topic_data in request.topic_data:
        entries: list[PartitionProduceResponse] = []
        responses.append(TopicProduceResponse(name=topic_data.name, topic_id=topic_data.topic_id,
                                              partition_responses=entries))
        if by_topic_id:
            meta = server.metadata.by_id(topic_data.topic_id)
            name = meta.name if meta is not None else None
            unknown = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            name, unknown = topic_data.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for data in topic_data.partition_data:
            partition = get_partition(name, data.index) if name is not None else None
            if bad_acks:
                entry = _partition_error(data.index, ErrorCode.INVALID_REQUIRED_ACKS)
            elif partition is None:
                entry = _partition_error(data.index, unknown)
            elif (problem := _check_one_batch(data.records)) is not None:
                entry = _partition_error(data.index, ErrorCode.INVALID_RECORD, problem)
            else:
                records = data.records
                if records.readonly:  # offsets are patched in place
                    records = bytearray(records)
                appends.append((partition, records))
                entry = PartitionProduceResponse(index=data.index)
                slots.append(entry)
            entries.append(entry)

    if appends:
        results = None
        if server.append_thread_idle:
            results = server.replica_manager.try_append_without_blocking(appends, AppendOrigin.CLIENT)
        if results is None:
            # Submitted now, not when a task first runs: a later request handled
            # synchronously must see the append thread busy and queue behind it.
            pending = server.run_append(server.replica_manager.append_records, appends, AppendOrigin.CLIENT)
            return _answer_after_thread(ctx, server, pending, acks, responses, appends, slots)
        _fill_results(server, appends, slots, results)
    return _response(ctx, acks, responses)


async def _answer_after_thread(ctx: "RequestContext", server: "KafkaServer", pending: Awaitable[list],
                               acks: int, responses: list[TopicProduceResponse], appends: list[Append],
                               slots: list[PartitionProduceResponse]) -> ProduceResponse | None:
    results = await pending
    _fill_results(server, appends, slots, results)
    return _response(ctx, acks, responses)


def _fill_results(server: "KafkaServer", appends: list[Append], slots: list[PartitionProduceResponse],
                  results: list) -> None:
    notify = server.fetch_purgatory.notify
    for (partition, _), entry, result in zip(appends, slots, results):
        entry.error_code = result.error_code
        info = result.info
        if info is not None:
            entry.base_offset = info.first_offset
            entry.log_append_time_ms = info.log_append_time
            entry.log_start_offset = info.log_start_offset
            notify((partition.topic, partition.partition_index))
        else:
            entry.base_offset, entry.log_append_time_ms, entry.log_start_offset = -1, -1, -1
            entry.error_message = result.error_message


def _response(ctx: "RequestContext", acks: int, responses: list[TopicProduceResponse]) -> ProduceResponse | None:
    if acks == 0:
        if any(e.error_code for t in responses for e in t.partition_responses):
            log.info("closing %s: acks=0 produce failed", ctx.connection.peer)
            ctx.connection.close()
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
