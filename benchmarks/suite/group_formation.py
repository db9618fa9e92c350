"""A group of 50 confluent-kafka members on 1,000 partitions: forming from cold, and absorbing one more.

    python benchmarks/suite/group_formation.py [--members 50] [--partitions 1000] [--rounds 3]
                                               [--modes consumer,classic-range,classic-cooperative-sticky]
                                               [--heartbeat-interval-ms N]

One pafka (``group.coordinator.rebalance.protocols=classic,consumer``, otherwise all defaults) and
one topic with a few records per partition. Each round, for each mode in turn (A B C A B C ...):

* **cold**: ``--members`` consumers (one thread each, one process) subscribe to the topic in a new
  group at once; the clock stops when the members' own assignment callbacks show every partition
  owned by exactly one member and every member holding its fair share (n // members or one more).
* **join**: two to seven seconds after that holds (a random delay, ``--seed``: members that formed
  together heartbeat in step, and a join at a fixed delay would always meet the same point of their
  cycle), one more member subscribes; the round reports when its first partitions
  arrived and when the group of ``members + 1`` was complete and balanced again, both from its
  ``subscribe``. A producer writes about ``--rate`` records a second spread over the partitions
  all along, so each member's consumption is observable: the longest gap between two records any of
  the first members consumed, from the join to one second after the group was balanced again, is the
  pause the join caused (the same gap measured over the two seconds before the join is the baseline).

Modes: ``consumer`` (KIP-848, ``group.protocol=consumer``, the broker's default ``uniform``
assignor), and the classic protocol with ``partition.assignment.strategy`` ``range`` or
``roundrobin`` (eager: every member revokes everything at each rebalance) or
``cooperative-sticky`` (incremental). Heartbeats: the consumer protocol's interval is the broker's
``group.consumer.heartbeat.interval.ms`` (Kafka's 5,000 ms unless ``--heartbeat-interval-ms``); the
classic one is the client's ``heartbeat.interval.ms`` (librdkafka's 3,000 ms unless
``--heartbeat-interval-ms``, which then sets both). Prints one table of medians and, last, one JSON
line with every round.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from confluent_kafka import Consumer, Producer

from benchmarks.suite.bench_brokers import BenchBroker, ResourceMeter, remove_data, start_pafka
from testing.topics import create_topic

MODES: dict[str, dict[str, str]] = {
    "consumer": {"group.protocol": "consumer"},
    "classic-range": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
    "classic-roundrobin": {"group.protocol": "classic", "partition.assignment.strategy": "roundrobin"},
    "classic-cooperative-sticky": {"group.protocol": "classic",
                                   "partition.assignment.strategy": "cooperative-sticky"},
}
DEFAULT_MODES = ("consumer", "classic-range", "classic-cooperative-sticky")
#: Bounds of each phase: a mode that never settles fails its round instead of hanging the run.
COLD_TIMEOUT_S = 240.0
JOIN_TIMEOUT_S = 180.0
#: How long after the group is balanced again consumption is still watched for a pause.
SETTLE_S = 1.0
BASELINE_S = 2.0
#: The join comes at a random point this long after the baseline (the longest heartbeat interval used).
JOIN_JITTER_S = 5.0
POLL_S = 0.05
#: A prime near 1,000 x 0.618: coprime with any partition count it does not divide (checked in main).
STRIDE = 617


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Member:
    """One consumer on its own thread; what it owns comes from its own rebalance callbacks."""

    def __init__(self, bootstrap: str, name: str, group: str, topic: str, settings: dict[str, str]) -> None:
        self.name = name
        # the consumer protocol and cooperative-sticky hand out and take back increments; eager, everything
        self.incremental = settings["group.protocol"] == "consumer" or "cooperative" in settings.get(
            "partition.assignment.strategy", "")
        self.owned: set[int] = set()
        self.lock = threading.Lock()
        self.consumed_at: list[float] = []
        self.first_assignment_at: float | None = None
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "error_cb": lambda e: self.errors.append(str(e)), **settings})
        self.subscribed_at = time.monotonic()
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _assigned(self, _consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            if not self.incremental:
                self.owned.clear()  # eager: the whole new assignment
            self.owned.update(tp.partition for tp in partitions)
            if self.owned and self.first_assignment_at is None:
                self.first_assignment_at = time.monotonic()

    def _revoked(self, _consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            if self.incremental:
                self.owned.difference_update(tp.partition for tp in partitions)
            else:
                self.owned.clear()

    def owned_now(self) -> frozenset[int]:
        with self.lock:
            return frozenset(self.owned)

    def _run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(POLL_S)
            if message is not None and not message.error():
                self.consumed_at.append(time.monotonic())
        self.consumer.close()


class SteadyProducer:
    """About ``rate`` records a second over all the partitions, until stopped.

    Record i goes to partition i * STRIDE mod n rather than i mod n: range-like assignors give each
    member a block of neighbouring partitions, which writing in partition order would feed in one
    burst per pass over the partitions (half a second apart at 2,000 records/s), hiding any pause
    shorter than that. A stride near n times the golden ratio's fractional part spreads the records
    of every block evenly through the pass (a stride like 37, where 27 * 37 = 999, would not).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.partitions, self.rate, self.sent = topic, partitions, rate, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                self.producer.produce(self.topic, value=b"x", partition=self.sent * STRIDE % self.partitions)
                self.sent += 1
            self.producer.poll(0.01)
        self.producer.flush(30)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


def balanced(members: Sequence[Member], partitions: int) -> bool:
    """Every partition owned by exactly one member, each member with its fair share."""
    owned = [m.owned_now() for m in members]
    sizes = {len(o) for o in owned}
    fair = {partitions // len(members), -(-partitions // len(members))}
    return sum(len(o) for o in owned) == partitions and len(frozenset().union(*owned)) == partitions \
        and sizes <= fair


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Polls every 20 ms; returns the monotonic time it held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        time.sleep(0.02)
    raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")


def longest_gap(times: Sequence[float], start: float, end: float) -> float:
    window = [t for t in times if start <= t <= end]
    return max(b - a for a, b in zip([start, *window], [*window, end], strict=True))


@dataclass
class Round:
    mode: str
    cold_s: float | None = None
    join_first_s: float | None = None
    join_complete_s: float | None = None
    pause_max_s: float | None = None
    pause_median_s: float | None = None
    baseline_gap_s: float | None = None
    broker_cpu_cold_s: float | None = None
    broker_cpu_join_s: float | None = None
    error: str | None = None
    client_errors: list[str] = field(default_factory=list)


def close_all(members: Sequence[Member]) -> None:
    for member in members:
        member.stop.set()
    for member in members:
        member.thread.join(60)


def run_round(broker: BenchBroker, args: argparse.Namespace, mode: str, settings: dict[str, str],
              rng: random.Random) -> Round:
    result = Round(mode)
    group = f"formation-{mode}-{uuid.uuid4().hex[:8]}"
    members: list[Member] = []
    try:
        with ResourceMeter(broker) as cold_meter:
            started = time.monotonic()
            members.extend(Member(broker.bootstrap, f"m{i}", group, args.topic, settings)
                           for i in range(args.members))
            stable = wait_for(lambda: balanced(members, args.partitions), COLD_TIMEOUT_S, f"{mode} cold start")
        result.cold_s, result.broker_cpu_cold_s = stable - started, cold_meter.cpu_s
        # members that formed together heartbeat in step: a join at a fixed delay after forming would
        # always land at the same point of their heartbeat cycle
        time.sleep(BASELINE_S + rng.uniform(0.0, JOIN_JITTER_S))
        joined = time.monotonic()
        result.baseline_gap_s = max(longest_gap(m.consumed_at, joined - BASELINE_S, joined) for m in members)
        with ResourceMeter(broker) as join_meter:
            joiner = Member(broker.bootstrap, f"m{args.members}", group, args.topic, settings)
            everyone = [*members, joiner]
            members.append(joiner)
            wait_for(lambda: joiner.first_assignment_at is not None, JOIN_TIMEOUT_S, f"{mode} joiner")
            complete = wait_for(lambda: balanced(everyone, args.partitions), JOIN_TIMEOUT_S, f"{mode} rebalance")
        result.broker_cpu_join_s = join_meter.cpu_s
        assert joiner.first_assignment_at is not None
        result.join_first_s = joiner.first_assignment_at - joiner.subscribed_at
        result.join_complete_s = complete - joiner.subscribed_at
        time.sleep(SETTLE_S)
        gaps = [longest_gap(m.consumed_at, joined, complete + SETTLE_S) for m in everyone[:-1]]
        result.pause_max_s, result.pause_median_s = max(gaps), statistics.median(gaps)
    except TimeoutError as e:
        result.error = str(e)
    finally:
        result.client_errors = sorted({e for m in members for e in m.errors})[:5]
        close_all(members)
    return result


def mode_settings(mode: str, heartbeat_interval_ms: int | None) -> dict[str, str]:
    settings = dict(MODES[mode])
    if heartbeat_interval_ms is not None and settings["group.protocol"] == "classic":
        settings["heartbeat.interval.ms"] = str(heartbeat_interval_ms)
    return settings


def broker_overrides(heartbeat_interval_ms: int | None) -> list[str]:
    overrides = ["group.coordinator.rebalance.protocols=classic,consumer"]
    if heartbeat_interval_ms is not None:
        overrides += [f"group.consumer.heartbeat.interval.ms={heartbeat_interval_ms}",
                      f"group.consumer.min.heartbeat.interval.ms={min(heartbeat_interval_ms, 5000)}"]
    return overrides


def fill(broker: BenchBroker, args: argparse.Namespace) -> None:
    create_topic(broker.bootstrap, args.topic, args.partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for i in range(args.records_per_partition * args.partitions):
        producer.produce(args.topic, value=b"r", partition=i % args.partitions)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("records not delivered")


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_table(rounds: Sequence[Round], modes: Sequence[str]) -> None:
    columns = ("cold_s", "join_first_s", "join_complete_s", "pause_max_s", "pause_median_s", "baseline_gap_s",
               "broker_cpu_cold_s", "broker_cpu_join_s")
    print("| mode | rounds ok | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for mode in modes:
        done = [r for r in rounds if r.mode == mode and r.error is None]
        medians = [statistics.median(v) if (v := [getattr(r, c) for r in done if getattr(r, c) is not None])
                   else None for c in columns]
        total = sum(r.mode == mode for r in rounds)
        print(f"| {mode} | {len(done)}/{total} | " + " | ".join(fmt(m) for m in medians) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--records-per-partition", type=int, default=10)
    parser.add_argument("--rate", type=int, default=2000, help="records/s written during the rounds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--heartbeat-interval-ms", type=int, default=None)
    parser.add_argument("--topic", default="formation")
    parser.add_argument("--seed", type=int, default=33, help="of the random delay before each join")
    args = parser.parse_args(argv)
    if args.partitions % STRIDE == 0:
        parser.error(f"--partitions must not be a multiple of {STRIDE}")
    modes = args.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {unknown}; known: {sorted(MODES)}")
    rounds: list[Round] = []
    rng = random.Random(args.seed)
    with start_pafka(overrides=broker_overrides(args.heartbeat_interval_ms)) as broker:
        try:
            fill(broker, args)
            producer = SteadyProducer(broker.bootstrap, args.topic, args.partitions, args.rate)
            try:
                for index in range(args.rounds):
                    for mode in modes:
                        result = run_round(broker, args, mode, mode_settings(mode, args.heartbeat_interval_ms), rng)
                        log(f"round {index + 1} {mode}: {asdict(result)}")
                        rounds.append(result)
            finally:
                producer.close()
        finally:
            remove_data(broker)
    print_table(rounds, modes)
    print(json.dumps({"members": args.members, "partitions": args.partitions, "rate": args.rate,
                      "heartbeat_interval_ms": args.heartbeat_interval_ms, "rounds": [asdict(r) for r in rounds]}))
    return 0 if all(r.error is None for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
