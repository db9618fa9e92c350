"""Where a confluent-kafka consumer spends its time, against pafka and the peer (not a test).

    python benchmarks/suite/consume_only.py [--records 1000000] [--partitions 6] [--repeats 3]
                                      [--prequeue-s 0] [--client-config '{"fetch.max.bytes": 4194304}']

Both brokers get the same records once (client_throughput's values and producer settings);
then each repeat starts a fresh consumer process per broker, alternating, with
client_throughput's consumer settings, and reads every record back with the same clock
(first batch to last). Besides the rate it reports, per client thread (the application
thread and librdkafka's broker thread, the fetcher), CPU seconds, minor page faults and
voluntary context switches, plus the Fetch responses the client received. ``--prequeue-s``
lets the fetcher run that long before the clock starts, so the rate measures the
application thread alone; ``--client-config`` changes consumer settings for both brokers.

Each child also reports its peak RSS and what faulting in a fresh page of memory costs on
this machine at that moment (``touch_us_per_page``, from touching 16 MiB before the consumer
starts): on this VM it is microseconds, not the fraction of one bare metal shows, so how
much memory the client's read-ahead takes shows in its rate.
"""

from __future__ import annotations

import argparse
import gc
import json
import mmap
import os
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from confluent_kafka import Consumer, TopicPartition

from benchmarks.suite.bench_brokers import CLOCK_TICKS, BenchBroker, alternate, median, proc_status_kb, ratio
from benchmarks.suite.client_common import broker_pair, log
from benchmarks.suite.client_throughput import (
    Scenario,
    build_values,
    consumer_config,
    produce_phase,
    read_timed,
)
from testing.topics import create_topic

THREAD_KEYS = ("cpu_s", "minflt", "voluntary_switches")
#: The two threads every report names; other threads are listed only when they were busy.
REPORTED_THREADS = ("application", "fetcher")
PAGE = mmap.PAGESIZE
FILL_TIMEOUT_S = 120.0
#: How much fresh memory a child touches to measure what a page fault costs.
TOUCH_PROBE_MB = 16


def thread_counters() -> dict[str, tuple[float, int, int]]:
    """CPU seconds, minor faults and voluntary switches of each thread of this process."""
    counters: dict[str, tuple[float, int, int]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            task = Path("/proc/self/task", tid)
            stat = (task / "stat").read_text().rsplit(")", 1)[1].split()
            status = (task / "status").read_text()
            name = "application" if int(tid) == os.getpid() else (task / "comm").read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        switches = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
        counters[f"{name}#{tid}"] = ((int(stat[11]) + int(stat[12])) / CLOCK_TICKS, int(stat[7]), switches)
    return counters


def thread_deltas(before: dict, after: dict) -> dict[str, dict[str, float]]:
    """Per thread name (librdkafka's broker threads summed as the fetcher): what changed.

    CPU time comes in clock ticks (10 ms), so a short run's thread may show none."""
    deltas: dict[str, dict[str, float]] = {}
    for key, values in after.items():
        name = key.split("#")[0]
        name = "fetcher" if name.startswith("rdk:broker") else name
        old = before.get(key, (0.0, 0, 0))
        slot = deltas.setdefault(name, dict.fromkeys(THREAD_KEYS, 0))
        for k, new, was in zip(THREAD_KEYS, values, old, strict=True):
            slot[k] += new - was
    return {name: {k: round(v, 3) for k, v in d.items()} for name, d in deltas.items()
            if name in REPORTED_THREADS or d["cpu_s"] > 0.005}


def touch_fresh_memory(megabytes: int) -> float:
    """Touch ``megabytes`` MiB of never-used anonymous memory, release it, and return the
    microseconds one page took to fault in."""
    size = megabytes << 20
    region = mmap.mmap(-1, size)
    started = time.perf_counter()
    for offset in range(0, size, PAGE):
        region[offset] = 1
    elapsed = time.perf_counter() - started
    region.close()
    return elapsed / (size // PAGE) * 1e6


def consume_child(args: argparse.Namespace) -> None:
    """One consumer in this fresh process; prints one JSON line."""
    gc.disable()  # as client_throughput: the loop makes millions of objects
    touch_us = touch_fresh_memory(TOUCH_PROBE_MB)
    scenario = scenario_of(args)
    stats: dict[str, str] = {}
    host, port = args.bootstrap.rsplit(":", 1)
    config = consumer_config(BenchBroker("child", host, int(port), pid=0), scenario)
    config.update(json.loads(args.client_config), **{"statistics.interval.ms": 200,
                                                     "stats_cb": lambda j: stats.update(last=j)})
    consumer = Consumer(config)
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    time.sleep(args.prequeue_s)
    before, started = thread_counters(), time.perf_counter()
    read = read_timed(consumer, args.records, scenario.size, args.timeout)
    threads = thread_deltas(before, thread_counters())
    consumer.poll(0.5)  # one more statistics callback, after the last response
    brokers = [b for b in json.loads(stats.get("last", "{}")).get("brokers", {}).values() if b["nodeid"] >= 0]
    elapsed = read.elapsed
    print(json.dumps({
        "received": len(read.kept), "msgs_s": read.timed / elapsed if elapsed else None,
        "startup_s": read.startup_s(started), "threads": threads,
        "peak_rss_mb": round(proc_status_kb(os.getpid(), "VmHWM") / 1024, 1), "touch_us_per_page": round(touch_us, 2),
        "fetch_responses": sum(b["rx"] for b in brokers), "fetched_MB": sum(b["rxbytes"] for b in brokers) / 1e6}))
    os._exit(0)  # skip freeing a million messages


def fill(broker: BenchBroker, scenario: Scenario, values: list[bytes]) -> str:
    topic = "consume-only-" + uuid.uuid4().hex[:8]
    create_topic(broker.bootstrap, topic, scenario.partitions)
    produced = produce_phase(broker, scenario, topic, values, FILL_TIMEOUT_S)
    if produced["acked"] != len(values):
        raise RuntimeError(f"{broker.name}: {produced['acked']} of {len(values)} records acknowledged, "
                           f"first error: {produced['first_produce_error']}")
    return topic


def consume_once(broker: BenchBroker, topic: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", "--bootstrap", broker.bootstrap, "--topic", topic,
               "--records", str(args.records), "--partitions", str(args.partitions),
               "--prequeue-s", str(args.prequeue_s), "--client-config", args.client_config,
               "--timeout", str(args.timeout)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout + 30, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(runs: list[dict]) -> dict:
    threads = {name: {k: median([r["threads"].get(name, {}).get(k) for r in runs]) for k in THREAD_KEYS}
               for name in REPORTED_THREADS}
    return {"msgs_s": median([r["msgs_s"] for r in runs]), "startup_s": median([r["startup_s"] for r in runs]),
            "fetch_responses": median([r["fetch_responses"] for r in runs]), "threads": threads,
            "peak_rss_mb": median([r["peak_rss_mb"] for r in runs]),
            "touch_us_per_page": median([r["touch_us_per_page"] for r in runs]),
            "complete": all(r["received"] == runs[0]["received"] for r in runs)}


def scenario_of(args: argparse.Namespace) -> Scenario:
    return replace(Scenario("consume-only", args.records), partitions=args.partitions)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prequeue-s", type=float, default=0.0)
    parser.add_argument("--client-config", default="{}", help="JSON of consumer settings for both brokers")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    if args.child:
        consume_child(args)
        return
    scenario = scenario_of(args)
    values = build_values(args.records, scenario.size)
    with broker_pair() as (pafka, peer):
        topics = {b.name: fill(b, scenario, values) for b in (pafka, peer)}
        runs: dict[str, list[dict]] = {"pafka": [], "peer": []}
        for broker in alternate(pafka, peer, args.repeats):
            run = consume_once(broker, topics[broker.name], args)
            log(f"{broker.name}: {run['msgs_s']:,.0f} msg/s, {run['fetch_responses']} responses, "
                f"peak RSS {run['peak_rss_mb']} MB, touch {run['touch_us_per_page']} us/page, {run['threads']}")
            runs[broker.name].append(run)
    result = {name: summary(r) for name, r in runs.items()}
    result["ratio_msgs_s"] = ratio(result["pafka"]["msgs_s"], result["peer"]["msgs_s"])
    print(json.dumps({"part": "consume_only", "records": args.records, "partitions": args.partitions,
                      "prequeue_s": args.prequeue_s, "client_config": json.loads(args.client_config),
                      "result": result}))


if __name__ == "__main__":
    main()
