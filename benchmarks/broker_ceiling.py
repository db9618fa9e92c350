"""Broker-side ceiling: how many MB/s and requests/s a broker sustains, client cost aside.

A client built on pafka's own protocol code (``protocol.api.encode_request`` /
``decode_response``, ``protocol.record_batch``) sends pre-built requests over
plain blocking sockets, several in flight per connection, as fast as the
broker answers:

* produce: one RecordBatch v2 of 1 MiB (or 16 KiB) per ProduceRequest, built
  once before the clock (random, incompressible values, no producer id), with
  acks=1 and acks=all; only the 4-byte correlation id is patched per send;
* fetch: the data is produced first (untimed), then read back with pipelined
  FetchRequests whose ``max_bytes`` covers several batches; every response is
  checked (error code, whole batches starting at the requested offset, CRC32C
  of its first batch) and only distinct batches count, so a broker that answers
  with less pays with the extra round trips needed to get the rest.

Each load runs against pafka and the peer broker alternately (medians of
``--repeats``), both with the topic config ``max.message.bytes`` set to 2 MiB.
Broker CPU seconds cover the timed phase only. Before each timed phase the
page cache's dirty pages are written back (``sync``), for both brokers alike.

    python benchmarks/broker_ceiling.py [--quick] [--repeats 3] [--loads produce-1m-acks1,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_brokers import (  # noqa: E402
    BenchBroker,
    ResourceMeter,
    alternate,
    median,
    ratio,
    remove_data,
    start_pafka,
    start_peer,
)
from broker.client.connection import BrokerConnection  # noqa: E402
from protocol.api import decode_response, encode_request  # noqa: E402
from protocol.buffers import join_chunks  # noqa: E402
from protocol.errors import ErrorCode  # noqa: E402
from protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest  # noqa: E402
from protocol.messages.delete_topics import DeleteTopicsRequest  # noqa: E402
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic  # noqa: E402
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData  # noqa: E402
from protocol.record_batch import iter_batch_headers, validate_batch  # noqa: E402
from protocol.records import Record, build_batch  # noqa: E402

PRODUCE, FETCH, METADATA, CREATE_TOPICS, DELETE_TOPICS = 0, 1, 3, 19, 20
#: Highest versions the ceiling client uses: topics by name (Fetch v13+ and
#: Produce v13 address topics by id), the same on both brokers.
MAX_PRODUCE_VERSION, MAX_FETCH_VERSION = 11, 12
CLIENT_ID = "pafka-ceiling"
TOPIC_MAX_MESSAGE_BYTES = 2 << 20
MIB = 1 << 20
_CORRELATION = struct.Struct(">i")
_SIZE = struct.Struct(">i")
#: Bound on each socket wait and on one run: a stuck broker fails the run.
SOCKET_TIMEOUT_S = 30.0
RUN_DEADLINE_S = 300.0


@dataclass(frozen=True)
class Load:
    name: str
    kind: str  # "produce" or "fetch"
    batch_bytes: int
    acks: int = 1
    #: Data per partition: produce sends this much; fetch produces it (untimed)
    #: and then reads it back ``passes`` times.
    data_bytes: int = 512 * MIB
    passes: int = 1


def standard_loads(quick: bool) -> list[Load]:
    big, small, fetched = (64 * MIB, 16 * MIB, 32 * MIB) if quick else (512 * MIB, 256 * MIB, 128 * MIB)
    passes = 2 if quick else 4
    return [
        Load("produce-1MiB-acks1", "produce", MIB, 1, big),
        Load("produce-1MiB-acksall", "produce", MIB, -1, big),
        Load("produce-16KiB-acks1", "produce", 16 << 10, 1, small),
        Load("produce-16KiB-acksall", "produce", 16 << 10, -1, small),
        Load("fetch-1MiB", "fetch", MIB, 1, fetched, passes),
        Load("fetch-16KiB", "fetch", 16 << 10, 1, fetched, passes),
    ]


@dataclass
class RunResult:
    broker: str
    load: str
    wall_s: float
    bytes: int
    requests: int
    cpu_s: float
    peak_rss_mb: float | None
    retries: int = 0

    @property
    def mb_s(self) -> float:
        return self.bytes / self.wall_s / 1e6

    @property
    def req_s(self) -> float:
        return self.requests / self.wall_s


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


def produce_frame(topic: str, partition: int, batch: bytearray, acks: int, version: int) -> bytearray:
    body = ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])])
    return bytearray(join_chunks(encode_request(PRODUCE, version, 0, CLIENT_ID, body)))


def fetch_frame(topic: str, partition: int, offset: int, max_bytes: int, version: int) -> bytearray:
    body = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchTopic(topic=topic, partitions=[
                            FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])
    return bytearray(join_chunks(encode_request(FETCH, version, 0, CLIENT_ID, body)))


def set_correlation_id(frame: bytearray, correlation_id: int) -> None:
    _CORRELATION.pack_into(frame, 8, correlation_id)  # after size, api key, api version


# -- the pipelined wire loop ---------------------------------------------------------


def recv_exact(sock: socket.socket, view: memoryview) -> None:
    got, want = 0, len(view)
    while got < want:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("broker closed the connection")
        got += n


class ResponseReader:
    """Size-prefixed response frames into one reused buffer (valid until the next read)."""

    def __init__(self, sock: socket.socket, capacity: int = 8 * MIB) -> None:
        self.sock = sock
        self.buf = bytearray(capacity)
        self.size = bytearray(4)

    def next_frame(self) -> memoryview:
        recv_exact(self.sock, memoryview(self.size))
        (size,) = _SIZE.unpack(self.size)
        if size > len(self.buf):
            self.buf = bytearray(size)
        view = memoryview(self.buf)[:size]
        recv_exact(self.sock, view)
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

    @classmethod
    def negotiate(cls, host: str, port: int) -> "Target":
        with BrokerConnection(host, port, client_id=CLIENT_ID) as conn:
            return cls(host, port, conn.version_for(PRODUCE, max_version=MAX_PRODUCE_VERSION),
                       conn.version_for(FETCH, max_version=MAX_FETCH_VERSION))


def create_topic(target: Target, topic: str, partitions: int) -> None:
    with BrokerConnection(target.host, target.port, client_id=CLIENT_ID) as conn:
        configs = [CreatableTopicConfig(name="max.message.bytes", value=str(TOPIC_MAX_MESSAGE_BYTES))]
        response = conn.request(CreateTopicsRequest(timeout_ms=30_000, topics=[CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=1, configs=configs)]))
        code = response.topics[0].error_code
        if code != ErrorCode.NO_ERROR:
            raise RuntimeError(f"CreateTopics {topic}: {ErrorCode(code).name} {response.topics[0].error_message}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # bounded wait until every partition has a leader
            meta = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]))
            parts = [p for t in meta.topics if t.name == topic for p in t.partitions]
            if len(parts) == partitions and all(p.leader_id >= 0 for p in parts):
                return
            time.sleep(0.05)
        raise TimeoutError(f"{topic} has no leaders after 30 s")


def delete_topic(target: Target, topic: str) -> None:
    """Free the broker's disk (pafka) or memory (peer) between runs; best effort."""
    try:
        with BrokerConnection(target.host, target.port, client_id=CLIENT_ID) as conn:
            conn.request(DeleteTopicsRequest(topic_names=[topic], timeout_ms=30_000))
    except Exception as exc:  # a leftover topic costs space, not correctness
        print(f"warning: could not delete {topic}: {exc}", file=sys.stderr)


# -- the two loads -------------------------------------------------------------------


def produce_partitions(target: Target, topic: str, batch: bytearray, acks: int, count: int,
                       connections: int, in_flight: int) -> int:
    """Send ``count`` copies of ``batch`` to each partition (one per connection); requests sent."""
    version = target.produce_version
    frames_per_conn = [[produce_frame(topic, p, batch, acks, version)] * count for p in range(connections)]
    sockets = [open_socket(target.host, target.port) for _ in range(connections)]
    deadline = time.monotonic() + RUN_DEADLINE_S

    def check(_: int, response: memoryview) -> None:
        _, body = decode_response(PRODUCE, version, response)
        for topic_response in body.responses:
            for part in topic_response.partition_responses:
                if part.error_code != ErrorCode.NO_ERROR:
                    raise RuntimeError(f"produce failed: {ErrorCode(part.error_code).name} {part.error_message}")

    try:
        run_threads([lambda s=s, f=f: pipeline(s, f, in_flight, check, deadline)
                     for s, f in zip(sockets, frames_per_conn)])
    finally:
        for sock in sockets:
            sock.close()
    return count * connections


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
                pipeline(sock, frames, in_flight, lambda i, r: plan.check(starts[i], r, version), deadline)
                plan.requests += len(frames)
            if plan.missing_starts():
                raise RuntimeError(f"partition {plan.partition}: batches still missing after 8 rounds")

    try:
        run_threads([lambda s=s, p=p: read_partition(s, p) for s, p in zip(sockets, plans)])
    finally:
        for sock in sockets:
            sock.close()
    return retries


def settle_page_cache() -> None:
    """Write back earlier runs' dirty pages first (untimed, before either broker's run):
    otherwise the kernel's writeback of run N competes with run N+1, whichever broker
    that is. Runs of 0.5 GB stay below the background writeback threshold
    (vm.dirty_background_ratio) on their own, so a run measures its own writes."""
    os.sync()


def run_load(broker: BenchBroker, target: Target, load: Load, run: int, *, connections: int, in_flight: int,
             fetch_bytes: int, batch: bytearray) -> RunResult:
    topic = f"ceiling-{load.name}-{run}".lower()
    create_topic(target, topic, connections)
    count = max(1, load.data_bytes // load.batch_bytes)
    try:
        if load.kind == "produce":
            settle_page_cache()
            with ResourceMeter(broker) as meter:
                requests = produce_partitions(target, topic, batch, load.acks, count, connections, in_flight)
            return RunResult(broker.name, load.name, meter.wall_s, requests * len(batch), requests,
                             meter.cpu_s, meter.peak_rss_mb)
        produce_partitions(target, topic, batch, 1, count, connections, in_flight)  # untimed
        settle_page_cache()
        per_fetch = max(1, fetch_bytes // load.batch_bytes)
        plans = [FetchPlan(p, count, records_per_batch(load.batch_bytes), len(batch), per_fetch)
                 for p in range(connections)]
        with ResourceMeter(broker) as meter:
            retries = fetch_partitions(target, topic, plans, load.passes, in_flight)
        return RunResult(broker.name, load.name, meter.wall_s, sum(p.bytes for p in plans),
                         sum(p.requests for p in plans), meter.cpu_s, meter.peak_rss_mb, retries)
    finally:
        delete_topic(target, topic)


# -- the machine's own ceiling -------------------------------------------------------


def machine_ceiling(load: Load, batch: bytearray, fetch_bytes: int) -> RunResult:
    """The same bytes without a broker: produce as plain ``pwrite`` calls of one batch
    each into a fresh file, fetch as ``sendfile`` of ``fetch_bytes`` at a time from a
    file to a loopback socket read by a thread (the ceiling client's own reader)."""
    workdir = Path(tempfile.mkdtemp(prefix="pafka-ceiling-machine-"))
    path, count = workdir / "data.bin", max(1, load.data_bytes // load.batch_bytes)
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC)
    try:
        if load.kind == "produce":
            settle_page_cache()
            started = time.perf_counter()
            for i in range(count):
                os.pwrite(fd, batch, i * len(batch))
            wall = time.perf_counter() - started
            return RunResult("machine", load.name, wall, count * len(batch), count, 0.0, None)
        for i in range(count):
            os.pwrite(fd, batch, i * len(batch))
        settle_page_cache()
        size = count * len(batch)
        wall, sends = _sendfile_to_loopback(fd, size, load.passes, fetch_bytes)
        return RunResult("machine", load.name, wall, size * load.passes, sends, 0.0, None)
    finally:
        os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)


def _sendfile_to_loopback(fd: int, size: int, passes: int, chunk: int) -> tuple[float, int]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=SOCKET_TIMEOUT_S)
        server, _ = listener.accept()
    total, sends = size * passes, 0

    def drain() -> None:
        buf, got = memoryview(bytearray(chunk)), 0
        while got < total:
            n = client.recv_into(buf)
            if n == 0:
                raise ConnectionError("loopback peer closed early")
            got += n

    reader = threading.Thread(target=drain, daemon=True)
    try:
        reader.start()
        started = time.perf_counter()
        for _ in range(passes):
            offset = 0
            while offset < size:
                offset += os.sendfile(server.fileno(), fd, offset, min(chunk, size - offset))
                sends += 1
        reader.join(RUN_DEADLINE_S)
        return time.perf_counter() - started, sends
    finally:
        server.close()
        client.close()


# -- report --------------------------------------------------------------------------


def summarize(results: list[RunResult], loads: list[Load], names: list[str]) -> list[dict]:
    rows = []
    for load in loads:
        row: dict = {"load": load.name}
        for name in names:
            mine = [r for r in results if r.load == load.name and r.broker == name]
            row[name] = {
                "mb_s": median([r.mb_s for r in mine]), "req_s": median([r.req_s for r in mine]),
                "cpu_s": median([r.cpu_s for r in mine]),
                "cpu_s_per_gb": median([r.cpu_s / (r.bytes / 1e9) for r in mine if r.bytes]),
                "peak_rss_mb": median([r.peak_rss_mb for r in mine]),
                "retries": sum(r.retries for r in mine), "runs": len(mine),
            }
        if len(names) >= 2 and "machine" not in names[:2]:
            row["ratio_mb_s"] = ratio(row[names[0]]["mb_s"], row[names[1]]["mb_s"])
            row["ratio_cpu_per_gb"] = ratio(row[names[0]]["cpu_s_per_gb"], row[names[1]]["cpu_s_per_gb"])
        rows.append(row)
    return rows


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def print_table(rows: list[dict], names: list[str]) -> None:
    brokers = [n for n in names if n != "machine"]
    pair = len(brokers) == 2
    heads = [f"{n} MB/s | {n} req/s | {n} CPU-s/GB" for n in brokers]
    print("| load | " + " | ".join(heads) + (" | MB/s ratio | CPU/GB ratio" if pair else "")
          + (" | machine MB/s |" if "machine" in names else " |"))
    print("|---" * (1 + 3 * len(brokers) + (2 if pair else 0) + ("machine" in names)) + "|")
    for row in rows:
        cells = []
        for n in brokers:
            r = row[n]
            cells += [_fmt(r["mb_s"]), _fmt(r["req_s"]), _fmt(r["cpu_s_per_gb"], 2)]
        if pair:
            cells += [_fmt(row["ratio_mb_s"], 2), _fmt(row["ratio_cpu_per_gb"], 2)]
        if "machine" in names:
            cells.append(_fmt(row["machine"]["mb_s"]))
        print(f"| {row['load']} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small volumes (< 1 minute)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loads", help="comma-separated load names (default: all)")
    parser.add_argument("--brokers", default="pafka,peer", help="pafka, peer, or both (alternating)")
    parser.add_argument("--connections", type=int, default=1, help="connections, one partition each")
    parser.add_argument("--in-flight", type=int, default=8, help="requests in flight per connection")
    parser.add_argument("--fetch-bytes", type=int, default=4 * MIB, help="max_bytes of each fetch")
    parser.add_argument("--bootstrap", help="drive a running broker (HOST:PORT) instead of starting any")
    parser.add_argument("--data-scale", type=float, default=1.0,
                        help="multiply each load's bytes per partition (e.g. 0.25 with --connections 4)")
    parser.add_argument("--no-machine", action="store_true",
                        help="skip the machine's own ceiling (pwrite / sendfile of the same bytes)")
    args = parser.parse_args(argv)
    loads = [dataclasses.replace(load, data_bytes=max(load.batch_bytes, int(load.data_bytes * args.data_scale)))
             for load in standard_loads(args.quick)]
    if args.loads:
        wanted = args.loads.split(",")
        loads = [load for load in loads if load.name in wanted]
    names = args.brokers.split(",")
    batches = {size: build_sized_batch(size, records_per_batch(size)) for size in {load.batch_bytes for load in loads}}
    brokers = _start(names, args.bootstrap)
    results: list[RunResult] = []
    try:
        targets = {b.name: Target.negotiate(b.host, b.port) for b in brokers}
        pairs = alternate(*brokers, repeats=args.repeats) if len(brokers) == 2 else brokers * args.repeats
        for run, broker in enumerate(pairs):
            for load in loads:
                result = run_load(broker, targets[broker.name], load, run, connections=args.connections,
                                  in_flight=args.in_flight, fetch_bytes=args.fetch_bytes,
                                  batch=batches[load.batch_bytes])
                results.append(result)
                _progress(result)
            if not args.no_machine and run % len(brokers) == len(brokers) - 1:  # after each A B round
                for load in loads:
                    results.append(machine_ceiling(load, batches[load.batch_bytes], args.fetch_bytes))
                    _progress(results[-1])
    finally:
        for broker in brokers:
            if args.bootstrap is None:
                broker.stop()
                remove_data(broker)
    names = [b.name for b in brokers] + ([] if args.no_machine else ["machine"])
    rows = summarize(results, loads, names)
    print(f"connections {args.connections}, {args.in_flight} requests in flight each, "
          f"fetch max_bytes {args.fetch_bytes}, medians of {args.repeats}")
    print_table(rows, names)
    print(json.dumps({"benchmark": "broker_ceiling", "connections": args.connections, "in_flight": args.in_flight,
                      "fetch_bytes": args.fetch_bytes, "repeats": args.repeats, "rows": rows,
                      "runs": [asdict(r) | {"mb_s": r.mb_s, "req_s": r.req_s} for r in results]}))
    return 0


def _progress(result: RunResult) -> None:
    print(f"# {result.broker} {result.load}: {result.mb_s:,.0f} MB/s {result.req_s:,.0f} req/s "
          f"cpu {result.cpu_s:.2f}s retries {result.retries}", file=sys.stderr, flush=True)


def _start(names: list[str], bootstrap: str | None) -> list[BenchBroker]:
    if bootstrap is not None:
        host, _, port = bootstrap.rpartition(":")
        return [BenchBroker("broker", host, int(port), pid=_pid_listening(int(port)))]
    brokers: list[BenchBroker] = []
    try:
        for name in names:
            brokers.append(start_pafka() if name == "pafka" else start_peer())
    except BaseException:
        for broker in brokers:
            broker.stop()
        raise
    return brokers


def _pid_listening(port: int) -> int:
    """PID of the process listening on ``port`` (for its CPU seconds), via /proc."""
    inode = _listening_inode(port)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return int(pid)
        except OSError:
            continue
    raise RuntimeError(f"no process found listening on port {port}")


def _listening_inode(port: int) -> str:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                    return fields[9]
    raise RuntimeError(f"nothing listens on port {port}")


if __name__ == "__main__":
    sys.exit(main())
