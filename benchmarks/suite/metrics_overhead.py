"""What the Prometheus endpoint costs the broker (not a test).

    python benchmarks/suite/metrics_overhead.py [--records 1000000] [--repeats 3] [--consume-passes 5]
                                                [--scrape-partitions 1000] [--part all|overhead|scrape]

Two brokers in the same run: one with the endpoint on and scraped every second by a thread of this
process, one with ``prometheus.metrics.enable=false``. Each repeat produces ``--records`` 100 B
records to a fresh 6-partition topic of each broker (alternating which goes first) and consumes
them back ``--consume-passes`` times (each pass a new consumer from offset 0: the broker sends
records with sendfile, so one pass costs it too little CPU to measure well); the figure is the
broker's CPU time (its threads' schedstat run time, in ns) per record, produce and consume apart,
medians over the repeats, and the on/off ratio of each repeat. Then the 'on' broker, not scraped
by the thread any more, is scraped 50 times back to back: its CPU per scrape. Then a broker with
``--scrape-partitions`` partitions (100 topics) and 50 groups (each with committed offsets on 20
partitions) is scraped 50 times: CPU per scrape and the wall time of one, as Prometheus would wait.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.suite.bench_brokers import schedstat_cpu_seconds
from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic, create_topics

VALUE = b"x" * 100
PARTITIONS = 6
SCRAPE_INTERVAL_S = 1.0
GROUPS = 50
SCRAPES = 50
#: The most one phase (produce, or all consume passes) may take.
PHASE_DEADLINE_S = 600.0


class Scraper:
    """Scrapes one URL every second until stopped (a thread owned by the benchmark)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(SCRAPE_INTERVAL_S):
            with urllib.request.urlopen(self.url, timeout=10) as answer:
                answer.read()
            self.scrapes += 1


def cpu_during(broker: BrokerProcess, work: Callable[[], None]) -> float:
    assert broker.pid is not None
    before = schedstat_cpu_seconds(broker.pid)
    work()
    return schedstat_cpu_seconds(broker.pid) - before


def produce(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 16384,
                         "queue.buffering.max.messages": 1_000_000})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0


def consume(bootstrap: str, topic: str, records: int, passes: int) -> None:
    """Read the topic from the start ``passes`` times, each with a consumer of its own."""
    deadline = time.monotonic() + PHASE_DEADLINE_S
    for _ in range(passes):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        read = 0
        while read < records and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    read += 1
        consumer.close()
        assert read == records, f"read {read} of {records}"


def one_pass(broker: BrokerProcess, records: int, passes: int) -> tuple[float, float]:
    """Broker CPU µs per record: (produce, consume)."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    started = time.monotonic()
    produced = cpu_during(broker, lambda: produce(broker.bootstrap, topic, records))
    middle = time.monotonic()
    consumed = cpu_during(broker, lambda: consume(broker.bootstrap, topic, records, passes))
    print(f"  produce {middle - started:.1f} s, consume {time.monotonic() - middle:.1f} s", flush=True)
    return produced / records * 1e6, consumed / (records * passes) * 1e6


def overhead(records: int, repeats: int, passes: int) -> None:
    with BrokerProcess() as on, BrokerProcess("prometheus.metrics.enable=false") as off:
        runs: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        with Scraper(on.metrics_url) as scraper:
            for repeat in range(repeats):
                order = [("on", on), ("off", off)] if repeat % 2 == 0 else [("off", off), ("on", on)]
                for name, broker in order:
                    runs[name].append(one_pass(broker, records, passes))
                    print(f"repeat {repeat + 1} {name}: produce {runs[name][-1][0]:.4f} µs/record, "
                          f"consume {runs[name][-1][1]:.4f} µs/record", flush=True)
        print(f"scrapes of the 'on' broker: {scraper.scrapes}")
        per_scrape, body = scrape_cpu(on)
        lines = body.count(b"\n")
        print(f"the 'on' broker after the run ({lines} lines, {len(body)} bytes): "
              f"broker CPU {per_scrape:.3f} ms per scrape (mean of {SCRAPES} back to back)")
    print_overhead(runs)


def print_overhead(runs: dict[str, list[tuple[float, float]]]) -> None:
    print("| | produce, broker CPU µs/record | consume, broker CPU µs/record |")
    print("|---|---|---|")
    for name, label in (("off", "endpoint off"), ("on", "endpoint on, scraped every second")):
        cells = []
        for phase in (0, 1):
            values = [r[phase] for r in runs[name]]
            cells.append(f"{statistics.median(values):.4f} ({min(values):.4f}-{max(values):.4f})")
        print(f"| {label} | {cells[0]} | {cells[1]} |")
    cells = []
    for phase in (0, 1):
        ratios = [on[phase] / off[phase] for on, off in zip(runs["on"], runs["off"], strict=True)]
        cells.append(f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    print(f"| on / off, per repeat: median (range) | {cells[0]} | {cells[1]} |")


def scrape_cpu(broker: BrokerProcess) -> tuple[float, bytes]:
    """The broker's CPU ms per scrape over ``SCRAPES`` scrapes back to back, and the last answer."""
    assert broker.pid is not None
    body = b""
    before = schedstat_cpu_seconds(broker.pid)
    for _ in range(SCRAPES):
        with urllib.request.urlopen(broker.metrics_url, timeout=30) as answer:
            body = answer.read()
    return (schedstat_cpu_seconds(broker.pid) - before) / SCRAPES * 1000, body


def scrape_time(partitions: int, baseline: Path | None) -> None:
    """Scrapes of a broker with ``partitions`` partitions and 50 groups; with ``baseline`` (another
    checkout), of its broker too, built the same way, the scrapes of the two alternating."""
    with contextlib.ExitStack() as stack:
        brokers = {"this tree": stack.enter_context(BrokerProcess())}
        if baseline is not None:
            brokers[f"baseline {baseline}"] = stack.enter_context(BrokerProcess(tree=baseline))
        for broker in brokers.values():
            fill_for_scrape(broker, partitions)
        figures: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in brokers}
        bodies = dict.fromkeys(brokers, b"")
        for _ in range(SCRAPES):
            for name, broker in brokers.items():
                bodies[name] = timed_scrape(broker, *figures[name])
        for name, (times, cpu) in figures.items():
            body = bodies[name]
            lines = body.count(b"\n")
            print(f"{name}: scrape of {partitions} partitions, {GROUPS} groups ({len(body)} bytes, "
                  f"{lines} lines): wall median {statistics.median(times):.1f} ms, min {min(times):.1f} ms, "
                  f"max {max(times):.1f} ms; broker CPU median {statistics.median(cpu):.2f} ms per scrape "
                  f"(mean {statistics.mean(cpu):.2f}, {SCRAPES} scrapes)")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def fill_for_scrape(broker: BrokerProcess, partitions: int) -> None:
    topics = [f"scrape-{i:03d}" for i in range(100)]
    create_topics(broker.bootstrap, topics, partitions // len(topics))
    produce_one_each(broker.bootstrap, topics, partitions // len(topics))
    for group in range(GROUPS):
        commit_offsets(broker.bootstrap, f"group-{group:02d}", topics[2 * group % 100:2 * group % 100 + 2],
                       partitions // len(topics))


def timed_scrape(broker: BrokerProcess, times: list[float], cpu: list[float]) -> bytes:
    """One scrape: its wall time and the broker's CPU time (ms) appended; the answer returned."""
    assert broker.pid is not None
    started, cpu_before = time.perf_counter(), schedstat_cpu_seconds(broker.pid)
    with urllib.request.urlopen(broker.metrics_url, timeout=30) as answer:
        body: bytes = answer.read()
    times.append((time.perf_counter() - started) * 1000)
    cpu.append((schedstat_cpu_seconds(broker.pid) - cpu_before) * 1000)
    return body


def produce_one_each(bootstrap: str, topics: list[str], per_topic: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for topic in topics:
        for partition in range(per_topic):
            producer.produce(topic, value=VALUE, partition=partition)
    assert producer.flush(60) == 0


def commit_offsets(bootstrap: str, group: str, topics: list[str], per_topic: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(t, p, 0) for t in topics for p in range(per_topic)], asynchronous=False)
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--consume-passes", type=int, default=5)
    parser.add_argument("--scrape-partitions", type=int, default=1000)
    parser.add_argument("--part", choices=("all", "overhead", "scrape"), default="all")
    parser.add_argument("--baseline", type=Path, help="another checkout whose broker the scrape part also scrapes")
    args = parser.parse_args()
    if args.part in ("all", "overhead"):
        overhead(args.records, args.repeats, args.consume_passes)
    if args.part in ("all", "scrape"):
        scrape_time(args.scrape_partitions, args.baseline)


if __name__ == "__main__":
    main()
