"""Broker-side ceiling: how many MB/s and requests/s a broker sustains, client cost aside.

A client built on pafka's own protocol code (``protocol.api.encode_request`` /
``decode_response``, ``protocol.record_batch``; see ``ceiling_client.py``)
sends pre-built requests over plain blocking sockets, several in flight per
connection, as fast as the broker answers:

* produce: one RecordBatch v2 of 1 MiB (or 16 KiB) per ProduceRequest, built
  once before the clock (random, incompressible values, no producer id), with
  acks=1 and acks=all; only the 4-byte correlation id is patched per send;
* produce spread over 1,000 partitions: each ProduceRequest carries one 3 KiB
  batch for every partition of a 1,000-partition topic, on one connection, as
  a producer writing to many partitions sends them; here requests/s x 1,000 is
  the partition batches per second the broker appends;
* fetch: the data is produced first (untimed), then read back with pipelined
  FetchRequests whose ``max_bytes`` covers several batches; every response is
  checked (error code, whole batches starting at the requested offset, CRC32C
  of its first batch) and only distinct batches count, so a broker that answers
  with less pays with the extra round trips needed to get the rest.

Each load runs against pafka and the peer broker alternately (medians of
``--repeats``), both with the topic config ``max.message.bytes`` set to 2 MiB.
Broker CPU seconds cover the timed phase only. Before each timed phase the
page cache's dirty pages are written back (``sync``), for both brokers alike.

    python benchmarks/suite/broker_ceiling.py [--quick] [--repeats 3] [--loads produce-1MiB-acks1,...]
        [--connections N --data-scale F] [--brokers pafka,peer] [--no-machine]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from benchmarks.suite.bench_brokers import (
    BenchBroker,
    ResourceMeter,
    alternate,
    median,
    ratio,
    remove_data,
    start_pafka,
    start_peer,
)
from benchmarks.suite.ceiling_client import (
    MIB,
    RUN_DEADLINE_S,
    SOCKET_TIMEOUT_S,
    TOPIC_CONFIGS,
    FetchPlan,
    Target,
    build_sized_batch,
    delete_topic,
    fetch_partitions,
    produce_partitions,
    produce_spread,
    records_per_batch,
)
from testing.topics import create_topic


@dataclass(frozen=True)
class Load:
    name: str
    kind: str  # "produce" or "fetch"
    batch_bytes: int
    acks: int = 1
    #: Data per partition: produce sends this much; fetch produces it (untimed)
    #: and then reads it back ``passes`` times. With ``spread``: all partitions' data.
    data_bytes: int = 512 * MIB
    passes: int = 1
    #: Produce only: partitions of one topic that every request carries a batch for,
    #: on one connection (a producer writing to many partitions); 0 = one per connection.
    spread: int = 0


def standard_loads(quick: bool) -> list[Load]:
    big, small, fetched = (64 * MIB, 16 * MIB, 32 * MIB) if quick else (512 * MIB, 256 * MIB, 128 * MIB)
    passes = 2 if quick else 4
    return [
        Load("produce-1MiB-acks1", "produce", MIB, 1, big),
        Load("produce-1MiB-acksall", "produce", MIB, -1, big),
        Load("produce-16KiB-acks1", "produce", 16 << 10, 1, small),
        Load("produce-16KiB-acksall", "produce", 16 << 10, -1, small),
        # What librdkafka sends when one producer writes to 1,000 partitions (about 30
        # records of 100 B per partition batch): the broker's cost per partition batch.
        Load("produce-1000p-3KiB", "produce", 3 << 10, 1, small, spread=1000),
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


def settle_page_cache() -> None:
    """Write back earlier runs' dirty pages first (untimed, before either broker's run):
    otherwise the kernel's writeback of run N competes with run N+1, whichever broker
    that is. Runs of 0.5 GB stay below the background writeback threshold
    (vm.dirty_background_ratio) on their own, so a run measures its own writes."""
    os.sync()


def run_load(broker: BenchBroker, target: Target, load: Load, run: int, *, connections: int, in_flight: int,
             fetch_bytes: int, batch: bytearray) -> RunResult:
    topic = f"ceiling-{load.name}-{run}".lower()
    create_topic(target.bootstrap, topic, load.spread or connections, TOPIC_CONFIGS)
    count = max(1, load.data_bytes // load.batch_bytes)
    try:
        if load.spread:
            count = max(1, count // load.spread)
            settle_page_cache()
            with ResourceMeter(broker) as meter:
                requests = produce_spread(target, topic, batch, load.acks, count, load.spread, in_flight)
            return RunResult(broker.name, load.name, meter.wall_s, requests * load.spread * len(batch), requests,
                             meter.cpu_s, meter.peak_rss_mb)
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
    files = [fd] + [os.open(workdir / f"data-{i}.bin", os.O_CREAT | os.O_RDWR) for i in range(1, load.spread)]
    try:
        if load.kind == "produce":  # batch i to file i mod n, as a spread load's requests do
            settle_page_cache()
            n, size = len(files), len(batch)
            started = time.perf_counter()
            for i in range(count):
                os.pwrite(files[i % n], batch, i // n * size)
            wall = time.perf_counter() - started
            return RunResult("machine", load.name, wall, count * size, count // n, 0.0, None)
        for i in range(count):
            os.pwrite(fd, batch, i * len(batch))
        settle_page_cache()
        size = count * len(batch)
        wall, sends = _sendfile_to_loopback(fd, size, load.passes, fetch_bytes)
        return RunResult("machine", load.name, wall, size * load.passes, sends, 0.0, None)
    finally:
        for opened in files:
            os.close(opened)
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
        for name in names:  # one at a time: those started before a failing start are stopped below
            brokers.append(start_pafka() if name == "pafka" else start_peer())  # noqa: PERF401
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
