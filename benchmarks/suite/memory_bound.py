"""The broker's memory under many large fetches and clients that never read their sockets.

One pafka broker (a subprocess) with a topic of ``--topic-mb`` MB; then, for ``--duration`` s:

* ``--consumers`` connections, spread over ``--processes`` processes, each asking again and
  again for ``--fetch-max-bytes`` (50 MB: a consumer's ``fetch.max.bytes``) from a random
  offset of its partition and reading the whole answer (its bytes are discarded in chunks);
* ``--non-readers`` connections that send Fetch requests of the same size until their
  socket takes no more, and never read anything;
* a probe connection timing ApiVersions round trips, measured first on the quiet broker.

The broker's RSS (``VmRSS`` in /proc) is sampled every 0.25 s. Printed: the RSS before the
load and its maximum during it, the probe's p50/p99 quiet and loaded, and the bytes the
consumers received. Run:

    .venv/bin/python -m benchmarks.suite.memory_bound --consumers 1000 --processes 4 \\
        --non-readers 100 --topic-mb 1024 --duration 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import socket
import threading
import time
from dataclasses import dataclass, field

from benchmarks.suite.scale_wire import FETCH, WireClient, pipelined_produce, record_batch
from protocol.api import encode_request
from protocol.buffers import join_chunks
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic

TOPIC = "memory-bound"
FETCH_VERSION = 12
RECORDS_PER_BATCH = 1000
VALUE_SIZE = 1000


def fetch_frame(partition: int, offset: int, max_bytes: int, correlation_id: int = 1) -> bytes:
    """A whole Fetch v12 request frame (size prefix included) for one partition."""
    body = FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchTopic(topic=TOPIC, partitions=[
                            FetchPartition(partition=partition, fetch_offset=offset,
                                           partition_max_bytes=max_bytes)])])
    return join_chunks(encode_request(FETCH, FETCH_VERSION, correlation_id, "memory-bound", body))


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class RssSampler:
    """The maximum RSS of one process, sampled on a thread until stopped."""

    pid: int
    interval_s: float = 0.25
    samples: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> RssSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(rss_bytes(self.pid))

    def stop(self) -> int:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return max(self.samples, default=rss_bytes(self.pid))


def fill_topic(host: str, port: int, partitions: int, megabytes: int) -> int:
    """Produce ``megabytes`` MB spread over the partitions; the records per partition."""
    batch = record_batch(RECORDS_PER_BATCH, VALUE_SIZE)
    batches = max(partitions, megabytes * (1 << 20) // len(batch))
    with WireClient(host, port, "memory-bound") as client:
        client.negotiate()
        frames = [client.produce_frame(TOPIC, [(p, bytes(batch))]) for p in range(partitions)]
        _, errors = pipelined_produce(client, [frames[i % partitions] for i in range(batches)], in_flight=16)
    if errors:
        raise RuntimeError(f"{errors} produce errors while filling the topic")
    return batches // partitions * RECORDS_PER_BATCH


# -- readers and non-readers ------------------------------------------------------------------
async def _consume(host: str, port: int, partitions: int, records: int, max_bytes: int, deadline: float,
                   scratch: bytearray) -> int:
    """One consumer: fetch, read the whole answer, again, until the deadline; the bytes read."""
    loop = asyncio.get_running_loop()
    sock = socket.create_connection((host, port))
    sock.setblocking(False)
    received, view = 0, memoryview(scratch)
    try:
        while time.monotonic() < deadline:
            frame = fetch_frame(random.randrange(partitions), random.randrange(records), max_bytes)
            await loop.sock_sendall(sock, frame)
            header = await loop.sock_recv(sock, 4)
            while len(header) < 4:
                more = await loop.sock_recv(sock, 4 - len(header))
                if not more:
                    return received
                header += more
            left = int.from_bytes(header, "big")
            while left:
                n = await loop.sock_recv_into(sock, view[:min(left, len(view))])
                if not n:
                    return received
                left -= n
                received += n
    finally:
        sock.close()
    return received


def consumer_process(host: str, port: int, count: int, partitions: int, records: int, max_bytes: int,
                     duration_s: float, out: multiprocessing.Queue[int]) -> None:
    async def run() -> int:
        deadline = time.monotonic() + duration_s
        scratch = bytearray(1 << 20)  # shared by this process's consumers: the bytes are discarded
        results = await asyncio.gather(*(_consume(host, port, partitions, records, max_bytes, deadline, scratch)
                                         for _ in range(count)), return_exceptions=True)
        return sum(r for r in results if isinstance(r, int))

    out.put(asyncio.run(run()))


def open_non_readers(host: str, port: int, count: int) -> list[socket.socket]:
    """Connections that will send Fetch requests until their socket is full, and never read."""
    socks = []
    for _ in range(count):
        sock = socket.create_connection((host, port))
        sock.setblocking(False)
        socks.append(sock)
    return socks


def push_non_readers(socks: list[socket.socket], partitions: int, max_bytes: int) -> int:
    """Send each non-reader Fetch requests until its socket takes no more; the requests sent."""
    sent = 0
    for i, sock in enumerate(socks):
        frame = fetch_frame(i % partitions, 0, max_bytes)
        try:
            while True:
                n = sock.send(frame)
                if n < len(frame):
                    sock.setblocking(True)
                    sock.settimeout(0.01)
                    try:
                        sock.sendall(frame[n:])
                    except (TimeoutError, BlockingIOError):
                        break  # a partial frame waits in the socket: the broker reads no further
                    finally:
                        sock.setblocking(False)
                sent += 1
        except (BlockingIOError, ConnectionError):
            continue
    return sent


# -- the probe ----------------------------------------------------------------------------------
def probe_latencies(host: str, port: int, seconds: float) -> list[float]:
    """ApiVersions round trips, back to back with 20 ms between them, for ``seconds``."""
    times: list[float] = []
    with WireClient(host, port, "memory-bound-probe", timeout=60) as client:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.perf_counter()
            client.negotiate()
            times.append(time.perf_counter() - started)
            time.sleep(0.02)
    return sorted(times)


def _pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(p * len(values)))] * 1000 if values else float("nan")


@dataclass
class Figures:
    rss_before_mb: float
    rss_max_mb: float
    quiet_p50_ms: float
    quiet_p99_ms: float
    loaded_p50_ms: float
    loaded_p99_ms: float
    consumed_mb: float
    non_reader_requests: int


def run(args: argparse.Namespace) -> Figures:
    overrides = [f"queued.max.request.bytes={args.queued_max_request_bytes}", "log.segment.bytes=268435456",
                 *args.override]
    with BrokerProcess(*overrides) as broker:
        assert broker.pid is not None
        create_topic(broker.bootstrap, TOPIC, args.partitions)
        records = fill_topic(broker.host, broker.port, args.partitions, args.topic_mb)
        quiet = probe_latencies(broker.host, broker.port, 5.0)
        rss_before = rss_bytes(broker.pid)
        sampler = RssSampler(broker.pid).start()
        out: multiprocessing.Queue[int] = multiprocessing.Queue()
        per = -(-args.consumers // args.processes)
        workers = [multiprocessing.Process(target=consumer_process, args=(
            broker.host, broker.port, min(per, args.consumers - i * per), args.partitions, records,
            args.fetch_max_bytes, args.duration, out)) for i in range(args.processes)]
        for worker in workers:
            worker.start()
        non_readers = open_non_readers(broker.host, broker.port, args.non_readers)
        pushed = push_non_readers(non_readers, args.partitions, args.fetch_max_bytes)
        loaded = probe_latencies(broker.host, broker.port, args.duration * 0.8)
        pushed += push_non_readers(non_readers, args.partitions, args.fetch_max_bytes)
        consumed = sum(out.get(timeout=args.duration + 120) for _ in workers)
        for worker in workers:
            worker.join()
        rss_max = sampler.stop()
        for sock in non_readers:
            sock.close()
    mb = 1 << 20
    return Figures(rss_before / mb, rss_max / mb, _pct(quiet, 0.5), _pct(quiet, 0.99), _pct(loaded, 0.5),
                   _pct(loaded, 0.99), consumed / mb, pushed)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--consumers", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--non-readers", type=int, default=100)
    parser.add_argument("--topic-mb", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--fetch-max-bytes", type=int, default=52428800)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--queued-max-request-bytes", type=int, default=-1)
    parser.add_argument("--override", action="append", default=[], help="key=value for the broker")
    args = parser.parse_args(argv)
    print(json.dumps(run(args).__dict__, indent=2))


if __name__ == "__main__":
    main()
