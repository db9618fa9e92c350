"""The broker-side ceiling's client: pafka's own protocol code over plain blocking sockets.

Requests are encoded once (``protocol.api.encode_request``) and only their
correlation id is patched per send; several are kept in flight per connection
and every answer is decoded and checked (``decode_response``). Used by
``broker_ceiling.py`` (the measured loads) and ``profiles.py`` (the loads a
profile samples).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from client.connection import BrokerConnection
from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.errors import ErrorCode
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.record_batch import iter_batch_headers, validate_batch
from protocol.records import Record, build_batch
from testing.sockets import read_exactly_into

PRODUCE, FETCH = 0, 1
#: Highest versions the ceiling client uses: topics by name (Fetch v13+ and
#: Produce v13 address topics by id), the same on both brokers.
MAX_PRODUCE_VERSION, MAX_FETCH_VERSION = 11, 12
CLIENT_ID = "pafka-ceiling"
#: The topics' configs: room for the 1 MiB batches on both brokers.
TOPIC_CONFIGS = {"max.message.bytes": str(2 << 20)}
MIB = 1 << 20
_CORRELATION = struct.Struct(">i")
_SIZE = struct.Struct(">i")
#: Bound on each socket wait and on one run: a stuck broker fails the run.
SOCKET_TIMEOUT_S = 30.0
RUN_DEADLINE_S = 300.0


# -- batches and frames -------------------------------------------------------------


def build_sized_batch(batch_bytes: int, records: int) -> bytearray:
    """A RecordBatch v2 of exactly ``batch_bytes`` bytes: ``records`` random values."""
    now = int(time.time() * 1000)
    value_size = max(1, (batch_bytes - 61) // records - 12)
    values = [os.urandom(value_size) for _ in range(records)]
    for _ in range(4):  # varint widths move with the value sizes: converge on the target
        batch = build_batch([Record(i, now, None, v) for i, v in enumerate(values)])
        missing = batch_bytes - len(batch)
        if missing == 0:
            return batch
        values[-1] = os.urandom(len(values[-1]) + missing)
    raise RuntimeError(f"cannot build a batch of exactly {batch_bytes} bytes")


def records_per_batch(batch_bytes: int) -> int:
    # About 16 KiB per record in 1 MiB batches and 1 KiB in 16 KiB ones.
    return max(1, batch_bytes // (16 << 10)) if batch_bytes >= MIB else max(1, batch_bytes // 1024)


def produce_frame(topic: str, partition: int | range, batch: bytearray, acks: int, version: int) -> bytearray:
    """One ProduceRequest: ``batch`` for ``partition``, or for each partition of a range."""
    indexes = partition if isinstance(partition, range) else [partition]
    body = ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[TopicProduceData(name=topic, partition_data=[
        PartitionProduceData(index=index, records=batch) for index in indexes])])
    return bytearray(join_chunks(encode_request(PRODUCE, version, 0, CLIENT_ID, body)))


def fetch_frame(topic: str, partition: int, offset: int, max_bytes: int, version: int) -> bytearray:
    body = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchTopic(topic=topic, partitions=[
                            FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])
    return bytearray(join_chunks(encode_request(FETCH, version, 0, CLIENT_ID, body)))


def set_correlation_id(frame: bytearray, correlation_id: int) -> None:
    _CORRELATION.pack_into(frame, 8, correlation_id)  # after size, api key, api version


# -- the pipelined wire loop ---------------------------------------------------------


class ResponseReader:
    """Size-prefixed response frames into one reused buffer (valid until the next read)."""

    def __init__(self, sock: socket.socket, capacity: int = 8 * MIB) -> None:
        self.sock = sock
        self.buf = bytearray(capacity)
        self.size = bytearray(4)

    def next_frame(self) -> memoryview:
        read_exactly_into(self.sock, memoryview(self.size))
        (size,) = _SIZE.unpack(self.size)
        if size > len(self.buf):
            self.buf = bytearray(size)
        view = memoryview(self.buf)[:size]
        read_exactly_into(self.sock, view)
        return view


def pipeline(sock: socket.socket, frames: list[bytearray], in_flight: int,
             on_response: Callable[[int, memoryview], None], deadline: float) -> None:
    """Send ``frames`` in order with up to ``in_flight`` unanswered; check each answer.

    Responses come back in request order (Kafka's guarantee per connection), so
    the correlation id of each must be the index of the oldest request.
    """
    reader = ResponseReader(sock)
    sent = received = 0
    total = len(frames)
    while received < total:
        while sent < total and sent - received < in_flight:
            frame = frames[sent]
            set_correlation_id(frame, sent)
            sock.sendall(frame)
            sent += 1
        response = reader.next_frame()
        (correlation_id,) = _CORRELATION.unpack_from(response, 0)
        if correlation_id != received:
            raise RuntimeError(f"response {correlation_id} arrived when {received} was due")
        on_response(received, response)
        received += 1
        if time.monotonic() > deadline:
            raise TimeoutError(f"run exceeded {RUN_DEADLINE_S}s with {total - received} responses due")


def open_socket(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=SOCKET_TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def run_threads(targets: list[Callable[[], None]]) -> None:
    """Run one callable per connection in its own thread; re-raise the first failure."""
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # reported to the caller below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(RUN_DEADLINE_S + SOCKET_TIMEOUT_S)
    if errors:
        raise errors[0]
    if any(thread.is_alive() for thread in threads):
        raise TimeoutError("a connection thread did not finish")


# -- setup: versions, topics ---------------------------------------------------------


@dataclass
class Target:
    """A broker as the ceiling client sees it: address and the versions both sides use."""

    host: str
    port: int
    produce_version: int = 0
    fetch_version: int = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def negotiate(cls, host: str, port: int) -> Target:
        with BrokerConnection(host, port, client_id=CLIENT_ID) as conn:
            return cls(host, port, conn.version_for(PRODUCE, max_version=MAX_PRODUCE_VERSION),
                       conn.version_for(FETCH, max_version=MAX_FETCH_VERSION))


def delete_topic(target: Target, topic: str) -> None:
    """Free the broker's disk (pafka) or memory (peer) between runs; best effort."""
    try:
        with BrokerConnection(target.host, target.port, client_id=CLIENT_ID) as conn:
            conn.request(DeleteTopicsRequest(topic_names=[topic], timeout_ms=30_000))
    except Exception as exc:  # a leftover topic costs space, not correctness
        print(f"warning: could not delete {topic}: {exc}", file=sys.stderr)


# -- the two loads -------------------------------------------------------------------


def _produce_check(version: int, partitions: int) -> Callable[[int, memoryview], None]:
    """A pipeline's answer check: every one of ``partitions`` answered, none with an error."""
    def check(_: int, response: memoryview) -> None:
        _, body = decode_response(PRODUCE, version, response)
        answered = [part for topic_response in body.responses for part in topic_response.partition_responses]
        if len(answered) != partitions:
            raise RuntimeError(f"produce answered {len(answered)} of {partitions} partitions")
        for part in answered:
            if part.error_code != ErrorCode.NO_ERROR:
                raise RuntimeError(f"produce failed: {ErrorCode(part.error_code).name} {part.error_message}")
    return check


def produce_partitions(target: Target, topic: str, batch: bytearray, acks: int, count: int,
                       connections: int, in_flight: int) -> int:
    """Send ``count`` copies of ``batch`` to each partition (one per connection); requests sent."""
    version = target.produce_version
    frames_per_conn = [[produce_frame(topic, p, batch, acks, version)] * count for p in range(connections)]
    sockets = [open_socket(target.host, target.port) for _ in range(connections)]
    deadline = time.monotonic() + RUN_DEADLINE_S
    check = _produce_check(version, 1)

    try:
        run_threads([lambda s=s, f=f: pipeline(s, f, in_flight, check, deadline)
                     for s, f in zip(sockets, frames_per_conn, strict=True)])
    finally:
        for sock in sockets:
            sock.close()
    return count * connections


def produce_spread(target: Target, topic: str, batch: bytearray, acks: int, count: int, partitions: int,
                   in_flight: int) -> int:
    """Send ``count`` requests on one connection, each carrying ``batch`` for every one of
    ``partitions`` partitions (what a producer writing to many partitions sends); requests sent."""
    version = target.produce_version
    frames = [produce_frame(topic, range(partitions), batch, acks, version)] * count
    deadline = time.monotonic() + RUN_DEADLINE_S
    check = _produce_check(version, partitions)
    sock = open_socket(target.host, target.port)
    try:
        pipeline(sock, frames, in_flight, check, deadline)
    finally:
        sock.close()
    return count


@dataclass
class FetchPlan:
    """One partition's data as fetch ranges; what came back, batch by batch."""

    partition: int
    batches: int
    records_per_batch: int
    batch_bytes: int
    batches_per_fetch: int
    received: bytearray = field(init=False)
    bytes: int = 0
    requests: int = 0

    def __post_init__(self) -> None:
        self.received = bytearray(self.batches)

    def start_pass(self) -> None:
        self.received = bytearray(self.batches)

    def missing_starts(self) -> list[int]:
        """The batch index of each fetch still needed: the first missing batch of each gap."""
        starts, index = [], 0
        while index < self.batches:
            if self.received[index]:
                index += 1
                continue
            starts.append(index)
            index += self.batches_per_fetch
        return starts

    def check(self, requested: int, response: memoryview, version: int) -> None:
        _, body = decode_response(FETCH, version, response)
        parts = [p for t in body.responses for p in t.partitions]
        if body.error_code or len(parts) != 1 or parts[0].error_code:
            raise RuntimeError(f"fetch failed: {body.error_code} {[p.error_code for p in parts]}")
        records = parts[0].records
        if records is None or len(records) == 0:
            return
        first = True
        for pos, header in iter_batch_headers(records):
            if first:
                validate_batch(records, pos)  # CRC32C of a sample: the bytes are the batch sent
                if header.base_offset != requested * self.records_per_batch:
                    raise RuntimeError(f"fetch at batch {requested} began at offset {header.base_offset}")
                first = False
            index, rem = divmod(header.base_offset, self.records_per_batch)
            if rem or header.size_in_bytes != self.batch_bytes or index >= self.batches:
                raise RuntimeError(f"unexpected batch at offset {header.base_offset}, {header.size_in_bytes} B")
            if not self.received[index]:
                self.received[index] = 1
                self.bytes += header.size_in_bytes


def fetch_partitions(target: Target, topic: str, plans: list[FetchPlan], passes: int, in_flight: int) -> int:
    """Read every plan's partition ``passes`` times; returns the retry fetches needed."""
    version, retries = target.fetch_version, 0
    sockets = [open_socket(target.host, target.port) for _ in plans]
    deadline = time.monotonic() + RUN_DEADLINE_S

    def read_partition(sock: socket.socket, plan: FetchPlan) -> None:
        nonlocal retries
        max_bytes = plan.batches_per_fetch * plan.batch_bytes
        for _ in range(passes):
            plan.start_pass()
            for round_ in range(8):  # a broker answering with less needs more fetches
                starts = plan.missing_starts()
                if not starts:
                    break
                if round_:
                    retries += len(starts)
                frames = [fetch_frame(topic, plan.partition, s * plan.records_per_batch, max_bytes, version)
                          for s in starts]
                pipeline(sock, frames, in_flight, lambda i, r, starts=starts: plan.check(starts[i], r, version), deadline)
                plan.requests += len(frames)
            if plan.missing_starts():
                raise RuntimeError(f"partition {plan.partition}: batches still missing after 8 rounds")

    try:
        run_threads([lambda s=s, p=p: read_partition(s, p) for s, p in zip(sockets, plans, strict=True)])
    finally:
        for sock in sockets:
            sock.close()
    return retries
