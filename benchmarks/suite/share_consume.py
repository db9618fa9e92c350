"""Share consumers against a classic consumer on one partition, same broker, same records (not a test).

    python benchmarks/suite/share_consume.py [--records 1000000] [--size 100] [--consumers 1,2,4]

One pafka broker with share groups on (``group.coordinator.rebalance.protocols=classic,consumer,share``);
one topic of one partition gets ``--records`` records of ``--size`` bytes once, in batches of
at most 16 KiB (the Java producer's ``batch.size``). Then, in this order:

* **classic**: one confluent-kafka ``Consumer`` in a classic group of 1 reads every record (first record
  to last);
* **share N**: N confluent-kafka ``ShareConsumer`` processes of a fresh share group
  (``share.auto.offset.reset=earliest`` through IncrementalAlterConfigs on the GROUP) read and acknowledge
  (ACCEPT, implicit mode: each poll's records are acknowledged with the next poll, piggy-backed on
  ShareFetch) until together they acknowledged every record. The clock runs from the first record any
  of them got to the last.

Each run reports records/s, the ratio to the classic consumer, and the broker's CPU µs per record
(its CPU over the run, idle included, divided by the records: for share groups, per acknowledged record),
the consumer processes' CPU µs per record (all their threads, from their first poll), the machine's busy
cores over the run (``/proc/stat``: every process, other jobs included) and the load average after it.
Every consumer is a process of its own; on 2 shared cores, clients and broker compete for CPU.
Prints a markdown table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from benchmarks.suite.bench_brokers import BenchBroker, remove_data, start_pafka
from benchmarks.suite.heartbeat_cpu import cpu_seconds
from testing.topics import create_topic

SWITCH = "group.coordinator.rebalance.protocols=classic,consumer,share"
TOPIC = "share-bench"
ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 900.0
REPORT_EVERY_S = 0.2
BATCH_BYTES = 16_384


@dataclass
class Run:
    name: str
    consumers: int
    records: int
    seconds: float
    per_s: float
    broker_cpu_us_per_record: float
    #: The consumer processes' CPU (every thread, from their first poll on) per record.
    client_cpu_us_per_record: float
    #: The machine's busy cores over the run (/proc/stat, every process), and the load average after it.
    machine_busy_cores: float
    load_average: float
    vs_classic: float | None = None


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def produce(bootstrap: str, records: int, size: int) -> None:
    from confluent_kafka import Producer

    # The Java producer's batch size (16 KiB, about 140 records of 100 B): a share group acquires whole
    # batches, so librdkafka's 1 MB batches would hand each consumer 10,000 records at a time.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": BATCH_BYTES,
                         "compression.type": "none", "acks": "1"})
    value = b"x" * size
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0


def configure_share_group(bootstrap: str, group: str) -> None:
    from confluent_kafka import admin

    entry = admin.ConfigEntry("share.auto.offset.reset", "earliest",
                              incremental_operation=admin.AlterConfigOpType.SET)
    resource = admin.ConfigResource(admin.ResourceType.GROUP, group, incremental_configs=[entry])
    client = admin.AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer
    for future in client.incremental_alter_configs([resource]).values():
        future.result(30)


# -- the consumer processes ----------------------------------------------------------------------

def child(args: argparse.Namespace) -> None:
    """Consume until the stop file exists, writing ``<count> <first ms> <last ms>`` to the report file."""
    import confluent_kafka

    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group}
    consumer: Any
    if args.kind == "share":
        consumer = confluent_kafka.ShareConsumer(config)
    else:
        consumer = confluent_kafka.Consumer({**config, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    count, first, last, reported = 0, 0.0, 0.0, 0.0
    cpu0 = time.process_time()  # every thread of the process: librdkafka's included
    stop = Path(args.stop)
    while not stop.exists():
        if args.kind == "share":
            batch = consumer.poll(0.2) or []
        else:
            batch = consumer.consume(10_000, 0.2)
        got = sum(1 for m in batch if m.error() is None)
        if got:
            last = time.time()
            first = first or last
            count += got
        if time.monotonic() - reported > REPORT_EVERY_S:
            reported = time.monotonic()
            Path(args.report + ".tmp").write_text(f"{count} {first} {last} {time.process_time() - cpu0}")
            os.replace(args.report + ".tmp", args.report)
    if args.kind == "share":
        consumer.poll(0.5)  # sends the last batch's implicit acknowledgement
    consumer.close()


def read_report(path: Path) -> tuple[int, float, float, float]:
    """(records, first record's time, last record's time, the process's CPU seconds so far)."""
    try:
        count, first, last, cpu = path.read_text().split()
    except (OSError, ValueError):
        return 0, 0.0, 0.0, 0.0
    return int(count), float(first), float(last), float(cpu)


def machine_busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of every core since boot, from the first line of /proc/stat."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def start_profiler(pid: int, out: Path | None) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the broker in collapsed-stack text (``--profile DIR``), stopped by SIGINT after the run."""
    if out is None:
        return None
    py_spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen([str(py_spy), "record", "-p", str(pid), "-r", "200", "-f", "raw", "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_profiler(profiler: subprocess.Popen[bytes] | None) -> None:
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(60)


def timed_group(broker: BenchBroker, kind: str, consumers: int, records: int, work: Path,
                profile: Path | None = None) -> Run:
    group = f"{kind}-{consumers}-{time.monotonic_ns()}"
    if kind == "share":
        configure_share_group(broker.bootstrap, group)
    stop = work / f"{group}.stop"
    reports = [work / f"{group}-{i}.report" for i in range(consumers)]
    assert broker.pid is not None
    profiler = start_profiler(broker.pid, None if profile is None else profile / f"{kind}-{consumers}.txt")
    cpu0 = cpu_seconds(broker.pid)
    busy0, total0 = machine_busy_jiffies()
    children = [subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child", "--kind", kind, "--bootstrap", broker.bootstrap,
         "--group", group, "--stop", str(stop), "--report", str(report)], cwd=ROOT) for report in reports]
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while sum(read_report(r)[0] for r in reports) < records:
            assert time.monotonic() < deadline, f"{kind} x{consumers} did not read {records} records"
            assert all(c.poll() is None for c in children), "a consumer exited"
            time.sleep(0.1)
        cpu = cpu_seconds(broker.pid) - cpu0
        busy1, total1 = machine_busy_jiffies()
        time.sleep(REPORT_EVERY_S * 2)  # the consumers' last reports, with their CPU, are written
    finally:
        stop_profiler(profiler)
        stop.touch()
        for process in children:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    seen = [read_report(r) for r in reports]
    total = sum(s[0] for s in seen)
    seconds = max(s[2] for s in seen) - min(s[1] for s in seen if s[1])
    name = "classic group of 1" if kind == "classic" else f"share group of {consumers}"
    client_cpu = sum(s[3] for s in seen)
    busy_cores = (busy1 - busy0) / max(total1 - total0, 1) * (os.cpu_count() or 1)
    return Run(name, consumers, total, seconds, total / seconds, cpu / total * 1e6, client_cpu / total * 1e6,
               busy_cores, os.getloadavg()[0])


def print_table(runs: Sequence[Run]) -> None:
    print("| consumers | records | seconds | records/s | × classic | broker CPU µs/record "
          "| clients' CPU µs/record | machine busy cores | load average |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        ratio = "" if run.vs_classic is None else f"{run.vs_classic:.2f}"
        print(f"| {run.name} | {run.records:,} | {run.seconds:.1f} | {run.per_s:,.0f} | {ratio} "
              f"| {run.broker_cpu_us_per_record:.2f} | {run.client_cpu_us_per_record:.2f} "
              f"| {run.machine_busy_cores:.2f} | {run.load_average:.1f} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--consumers", default="1,2,4")
    for option in ("--kind", "--bootstrap", "--group", "--stop", "--report"):
        parser.add_argument(option)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--profile", type=Path, help="a directory for py-spy's collapsed stacks of the broker")
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    broker = start_pafka(overrides=[SWITCH])
    try:
        create_topic(broker.bootstrap, TOPIC, 1)
        produce(broker.bootstrap, args.records, args.size)
        log(f"{args.records} records of {args.size} B produced")
        with tempfile.TemporaryDirectory() as work:
            runs = [timed_group(broker, "classic", 1, args.records, Path(work), args.profile)]
            log(f"{runs[0]}")
            for n in (int(c) for c in args.consumers.split(",")):
                runs.append(timed_group(broker, "share", n, args.records, Path(work), args.profile))
                runs[-1].vs_classic = runs[-1].per_s / runs[0].per_s
                log(f"{runs[-1]}")
    finally:
        remove_data(broker)
    print_table(runs)
    print(json.dumps([asdict(r) for r in runs]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
