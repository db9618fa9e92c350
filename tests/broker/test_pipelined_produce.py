"""Pipelined Produce on one connection, some appends inline and some on the append
thread (segment rolls), then pipelined Fetch larger than the socket takes at once:
every batch lands once, in request order, and comes back byte for byte."""

from __future__ import annotations

import os
import socket
import time

from client import AdminClient, KafkaClient, NewTopic
from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.record_batch import iter_batch_headers, validate_batch
from protocol.records import Record, build_batch, iter_records
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import read_frame

TOPIC = "pipelined"
BATCHES = 300  # of ~20 KiB: six 1 MiB segments
IN_FLIGHT = 16


def _pipeline(sock: socket.socket, api_key: int, version: int, bodies: list) -> list:  # type: ignore[type-arg]
    responses, sent = [], 0
    while len(responses) < len(bodies):
        while sent < len(bodies) and sent - len(responses) < IN_FLIGHT:
            sock.sendall(join_chunks(encode_request(api_key, version, sent, "test", bodies[sent])))
            sent += 1
        correlation_id, body = decode_response(api_key, version, read_frame(sock))
        assert correlation_id == len(responses)
        responses.append(body)
    return responses


def test_pipelined_produce_then_fetch_keeps_order_across_rolls() -> None:
    # Small segments: every ~50 batches an append rolls (and goes to the append thread).
    with BrokerProcess() as broker:
        with KafkaClient(broker.bootstrap) as client:
            AdminClient(client).create_topics([NewTopic(TOPIC, 1, 1, {"segment.bytes": str(1 << 20)})])
        now = int(time.time() * 1000)
        batches = [build_batch([Record(offset=i, timestamp=now, key=None, value=b"%05d" % n + os.urandom(2000))
                                for i in range(10)]) for n in range(BATCHES)]
        produce = [ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(name=TOPIC, partition_data=[
            PartitionProduceData(index=0, records=batch)])]) for batch in batches]
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            answers = _pipeline(sock, 0, 9, produce)
            offsets = []
            for answer in answers:
                part = answer.responses[0].partition_responses[0]
                assert part.error_code == ErrorCode.NO_ERROR
                offsets.append(part.base_offset)
            assert offsets == [10 * n for n in range(BATCHES)]

            # Fetches of up to 1 MiB from every 5th batch, pipelined: together more than a
            # loopback socket takes at once, so later answers queue behind sendfiles.
            starts = list(range(0, BATCHES, 5))
            fetch = [FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[FetchTopic(
                topic=TOPIC, partitions=[FetchPartition(partition=0, fetch_offset=10 * n, partition_max_bytes=1 << 20)])])
                for n in starts]
            seen: set[int] = set()
            for n, answer in zip(starts, _pipeline(sock, 1, 12, fetch), strict=True):
                _check_answer(answer, n, batches, seen)
            # A read stops at its segment's end: what the gaps left, fetched one by one.
            missing = sorted(set(range(BATCHES)) - seen)
            assert len(missing) < BATCHES // 2
            fetch = [FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[FetchTopic(
                topic=TOPIC, partitions=[FetchPartition(partition=0, fetch_offset=10 * n, partition_max_bytes=1)])])
                for n in missing]
            for n, answer in zip(missing, _pipeline(sock, 1, 12, fetch), strict=True):
                _check_answer(answer, n, batches, seen)
    assert seen == set(range(BATCHES))


def _check_answer(answer, n: int, batches: list[bytearray], seen: set[int]) -> None:  # type: ignore[no-untyped-def]
    """Whole batches from batch ``n`` on, each holding exactly the values produced in it."""
    records = answer.responses[0].partitions[0].records
    headers = list(iter_batch_headers(records))
    assert headers and headers[0][1].base_offset == 10 * n
    for pos, header in headers:
        validate_batch(records, pos)
        index = header.base_offset // 10
        batch = memoryview(records)[pos : pos + header.size_in_bytes]
        values = [r.value for r in iter_records(batch)]
        assert values == [r.value for r in iter_records(memoryview(batches[index]))]
        seen.add(index)
