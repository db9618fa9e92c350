"""Where pafka spends its CPU under load: py-spy profiles of the produce and fetch paths.

For each load, a fresh pafka broker is driven for ``--seconds`` while
``py-spy record --format raw`` samples it; the folded stacks are then reduced
to the top functions by *self* samples (the function was on top of the stack)
and by *inclusive* samples (anywhere on the stack, once per sample). Loads:

* the ceiling client's pipelined Produce of 1 MiB and 16 KiB batches (acks=1)
  and pipelined Fetch of 1 MiB and 16 KiB batches (``broker_ceiling.py``);
* confluent-kafka producing 100 B records to 6 partitions (acks=1, linger 5 ms)
  and a consumer reading them back;
* the scale benchmark's producer spreading 100 B records over 1,000 partitions
  (100 topics x 10, ``scale_clients.produce_spread``), where every partition
  batch carries a few records and the broker's cost per batch is what counts.

Samples are of the broker's busy threads only (py-spy drops idle ones), so
"% of samples" is the share of the broker's own work; "% busy" is samples over
the load's seconds × rate, a rough share of one core.

    python benchmarks/suite/profiles.py [--quick] [--seconds 10] [--loads ceiling-produce-1MiB,...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from benchmarks.suite import ceiling_client as ceiling
from benchmarks.suite.bench_brokers import BenchBroker, remove_data, start_pafka
from testing.topics import create_topic, create_topics

PY_SPY = Path(sys.executable).parent / "py-spy"
RATE_HZ = 100
#: A py-spy raw frame: "function (file.py)" with --nolineno; threads may add a prefix.
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*)\)$")


@dataclass
class Profile:
    load: str
    seconds: float
    samples: int
    self_counts: collections.Counter
    inclusive_counts: collections.Counter
    work: str = ""  # what the load did meanwhile (MB/s, records/s)


def fold(raw_lines: list[str]) -> tuple[int, collections.Counter, collections.Counter]:
    """(total samples, self counts, inclusive counts) from py-spy's folded stacks."""
    total, self_counts, inclusive = 0, collections.Counter(), collections.Counter()
    for line in raw_lines:
        stack, _, count_text = line.rstrip().rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [short_frame(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    return total, self_counts, inclusive


def short_frame(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    path = match["file"]
    for marker in ("/work/main/", "site-packages/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{match['func']} ({path})"


def record(pid: int, seconds: float, out: Path) -> None:
    subprocess.run([str(PY_SPY), "record", "-p", str(pid), "-d", str(int(seconds)), "-r", str(RATE_HZ),
                    "-f", "raw", "--nolineno", "--nonblocking", "-o", str(out)],
                   check=True, capture_output=True, timeout=seconds + 60)


# -- loads: each runs until ``stop`` is set, bounded by its own count ------------------------


def ceiling_produce(batch_bytes: int) -> Callable[[BenchBroker, threading.Event], str]:
    def load(broker: BenchBroker, stop: threading.Event) -> str:
        target = ceiling.Target.negotiate(broker.host, broker.port)
        create_topic(broker.bootstrap, "profile-produce", 1, ceiling.TOPIC_CONFIGS)
        batch = ceiling.build_sized_batch(batch_bytes, ceiling.records_per_batch(batch_bytes))
        per_round = max(1, (64 << 20) // batch_bytes)
        sent, started = 0, time.monotonic()
        for _ in range(1000):
            if stop.is_set():
                break
            sent += ceiling.produce_partitions(target, "profile-produce", batch, 1, per_round, 1, 8)
        elapsed = time.monotonic() - started
        return f"{sent * batch_bytes / elapsed / 1e6:,.0f} MB/s, {sent / elapsed:,.0f} req/s"
    return load


def ceiling_fetch(batch_bytes: int) -> Callable[[BenchBroker, threading.Event], str]:
    def load(broker: BenchBroker, stop: threading.Event) -> str:
        target = ceiling.Target.negotiate(broker.host, broker.port)
        create_topic(broker.bootstrap, "profile-fetch", 1, ceiling.TOPIC_CONFIGS)
        batch = ceiling.build_sized_batch(batch_bytes, ceiling.records_per_batch(batch_bytes))
        count = (128 << 20) // batch_bytes
        ceiling.produce_partitions(target, "profile-fetch", batch, 1, count, 1, 8)
        plan = ceiling.FetchPlan(0, count, ceiling.records_per_batch(batch_bytes), len(batch),
                                 max(1, (4 << 20) // batch_bytes))
        started = time.monotonic()
        for _ in range(1000):
            if stop.is_set():
                break
            ceiling.fetch_partitions(target, "profile-fetch", [plan], 1, 8)
        elapsed = time.monotonic() - started
        return f"{plan.bytes / elapsed / 1e6:,.0f} MB/s, {plan.requests / elapsed:,.0f} req/s"
    return load


def kafka_produce(broker: BenchBroker, stop: threading.Event) -> str:
    from confluent_kafka import Producer

    create_topic(broker.bootstrap, "profile-kafka", 6, ceiling.TOPIC_CONFIGS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, "partitioner": "consistent_random"})
    value, sent, started = b"x" * 100, 0, time.monotonic()
    while not stop.is_set() and sent < 50_000_000:
        for _ in range(10_000):
            try:
                producer.produce("profile-kafka", value)
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
    producer.flush(60)
    return f"{sent / (time.monotonic() - started):,.0f} records/s"


def kafka_consume(total: int) -> Callable[[BenchBroker, threading.Event], str]:
    return lambda broker, stop: _kafka_consume(broker, stop, total)


def _kafka_consume(broker: BenchBroker, stop: threading.Event, total: int) -> str:
    from confluent_kafka import Consumer, Producer

    create_topic(broker.bootstrap, "profile-consume", 6, ceiling.TOPIC_CONFIGS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 2_097_152})
    for _ in range(total):
        while True:
            try:
                producer.produce("profile-consume", b"y" * 100)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    consumed, started, rounds = 0, time.monotonic(), 0
    while not stop.is_set() and rounds < 100:  # re-read the topic from the start in new groups
        rounds += 1
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"profile-{rounds}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                             "queued.min.messages": 1_000_000})
        consumer.subscribe(["profile-consume"])
        got = 0
        while got < total and not stop.is_set():
            for message in consumer.consume(10_000, 1.0):
                if message.error() is None:
                    got += 1
        consumed += got
        consumer.close()
    return f"{consumed / (time.monotonic() - started):,.0f} records/s"


def kafka_produce_1000_partitions(broker: BenchBroker, stop: threading.Event) -> str:
    from benchmarks.suite.scale_clients import produce_spread

    names = [f"profile-p1000-{i:03d}" for i in range(100)]
    create_topics(broker.bootstrap, names, 10, timeout_s=120)
    partitions = [(t, p) for t in names for p in range(10)]
    sent, busy_s = 0, 0.0
    for _ in range(100):  # rounds of 1M records until sampling ends
        if stop.is_set():
            break
        meter, _ = produce_spread(broker, partitions, 1_000_000, 100)
        sent, busy_s = sent + 1_000_000, busy_s + meter.wall_s
    return f"{sent / busy_s:,.0f} records/s" if busy_s else "?"


def loads(quick: bool) -> dict[str, Callable[[BenchBroker, threading.Event], str]]:
    return {
        "ceiling-produce-1MiB": ceiling_produce(1 << 20),
        "ceiling-produce-16KiB": ceiling_produce(16 << 10),
        "ceiling-fetch-1MiB": ceiling_fetch(1 << 20),
        "ceiling-fetch-16KiB": ceiling_fetch(16 << 10),
        "kafka-produce-100B-p6": kafka_produce,
        "kafka-consume-100B-p6": kafka_consume(200_000 if quick else 2_000_000),
        "kafka-produce-100B-p1000": kafka_produce_1000_partitions,
    }


LOADS = loads(quick=False)
#: Seconds a load gets to set itself up (topic, data to fetch) before sampling starts.
WARMUP_S = {"ceiling-fetch-1MiB": 3.0, "ceiling-fetch-16KiB": 3.0, "kafka-consume-100B-p6": 12.0,
            "kafka-produce-100B-p1000": 3.0}
QUICK_WARMUP_S = {"ceiling-fetch-1MiB": 2.0, "ceiling-fetch-16KiB": 2.0, "kafka-consume-100B-p6": 3.0,
                  "kafka-produce-100B-p1000": 3.0}


def run_profile(name: str, seconds: float, keep: Path | None, quick: bool = False) -> Profile:
    load = loads(quick)[name]
    broker = start_pafka()
    stop, outcome = threading.Event(), {}

    def drive() -> None:
        try:
            outcome["work"] = load(broker, stop)
        except BaseException as exc:  # reported below
            outcome["error"] = exc

    thread = threading.Thread(target=drive, daemon=True)
    try:
        thread.start()
        time.sleep((QUICK_WARMUP_S if quick else WARMUP_S).get(name, 1.0))
        out = (keep or Path(tempfile.gettempdir())) / f"profile-{name}.txt"
        record(broker.pid, seconds, out)
        stop.set()
        thread.join(180)
        if "error" in outcome:
            raise outcome["error"]
        total, self_counts, inclusive = fold(out.read_text().splitlines())
        if keep is None:
            out.unlink()
        return Profile(name, seconds, total, self_counts, inclusive, outcome.get("work", "?"))
    finally:
        stop.set()
        broker.stop()
        remove_data(broker)


def print_profile(profile: Profile, top: int) -> None:
    busy = profile.samples / (profile.seconds * RATE_HZ) * 100
    print(f"\n### {profile.load}: {profile.samples} samples in {profile.seconds:.0f} s "
          f"(broker busy ≈ {busy:.0f}% of one core); load: {profile.work}\n")
    print("| self % | function | | inclusive % | function |")
    print("|---:|---|---|---:|---|")
    selfs = profile.self_counts.most_common(top)
    inclusive = top_inclusive(profile, top)
    for i in range(top):
        s = selfs[i] if i < len(selfs) else ("", 0)
        n = inclusive[i] if i < len(inclusive) else ("", 0)
        print(f"| {_pct(s[1], profile.samples)} | `{s[0]}` | | {_pct(n[1], profile.samples)} | `{n[0]}` |")


#: Frames under which everything runs (the CLI, the event loop's runner, worker
#: threads' bootstrap): inclusive figures for them say nothing.
ROOT_FILES = ("click/", "<frozen runpy>", "asyncio/runners.py", "uvloop/__init__.py", "tools/__main__.py", "tools/cli.py",
              "broker/broker_command.py", "threading.py", "concurrent/futures/thread.py")


def top_inclusive(profile: Profile, top: int) -> list[tuple[str, int]]:
    return [(frame, n) for frame, n in profile.inclusive_counts.most_common()
            if not any(root in frame for root in ROOT_FILES)][:top]


def _pct(count: int, total: int) -> str:
    return f"{count / total * 100:.1f}" if total and count else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 s per load")
    parser.add_argument("--repeats", type=int, default=1, help="profiles per load (merged)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--loads", help="comma-separated: " + ", ".join(LOADS))
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--keep", type=Path, help="keep the raw py-spy output in this directory")
    parser.add_argument("--from-raw", type=Path,
                        help="only fold the profile-LOAD.txt files a --keep run left in this directory")
    args = parser.parse_args(argv)
    if args.from_raw:
        for raw in sorted(args.from_raw.glob("profile-*.txt")):
            total, selfs, inclusive = fold(raw.read_text().splitlines())
            print_profile(Profile(raw.stem.removeprefix("profile-"), args.seconds, total, selfs, inclusive, "?"),
                          args.top)
        return 0
    seconds = 3.0 if args.quick else args.seconds
    names = args.loads.split(",") if args.loads else list(LOADS)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    profiles = []
    for name in names:
        merged = None
        for _ in range(max(1, args.repeats)):
            p = run_profile(name, seconds, args.keep, args.quick)
            if merged is None:
                merged = p
            else:
                merged.samples += p.samples
                merged.seconds += p.seconds
                merged.self_counts.update(p.self_counts)
                merged.inclusive_counts.update(p.inclusive_counts)
        assert merged is not None
        profiles.append(merged)
        print_profile(merged, args.top)
    print(json.dumps({"benchmark": "profiles", "rate_hz": RATE_HZ, "profiles": [
        {"load": p.load, "seconds": p.seconds, "samples": p.samples, "work": p.work,
         "self": p.self_counts.most_common(args.top),
         "inclusive": top_inclusive(p, args.top)}
        for p in profiles]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
