"""Client throughput of pafka against the peer broker, with the confluent-kafka client.

    python benchmarks/suite/client_throughput.py [--quick] [--repeats 3] [--only base,size-1KiB]

Each scenario produces N records as fast as the client can (delivery reports only on
error), then consumes them back from the start (assign(), or subscribe() in a fresh group
for the ``group`` scenario) and checks that every record came back exactly once and in
per-partition order. A run that fails the check, or whose producer saw an error, is marked
and left out of the medians. Scenarios vary one dimension at a time from a base of
6 partitions, 100 B records, acks=all, no compression. Every run gets a fresh topic
(deleted afterwards), pafka and the peer alternate (A B A B A B) on one long-lived
broker each, and the broker's CPU seconds and peak RSS are read from /proc per phase.
Prints one markdown table, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import struct
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.suite.bench_brokers import BenchBroker, ResourceMeter, alternate
from benchmarks.suite.client_common import OthersMeter, broker_pair, cell, compare_runs, delete_topic, human, log, results_table, runs_ok
from testing.topics import create_topic

SEQ = struct.Struct(">I")  # every value starts with its sequence number in the run
LARGE_MESSAGE_BYTES = 10 * 1024 * 1024  # topic max.message.bytes / client message.max.bytes for 1 MiB
GROUP_SESSION_TIMEOUT_MS = 6000  # the group minimum: the peer delays a join by half of it
KEYS = ["produce_msgs_s", "produce_MB_s", "consume_msgs_s", "consume_MB_s", "produce_cpu_s",
        "consume_cpu_s", "cpu_s_per_million", "peak_rss_mb", "other_cpu_s"]


@dataclass(frozen=True)
class Scenario:
    name: str
    records: int
    size: int = 100
    partitions: int = 6
    acks: str = "all"
    compression: str = "none"
    idempotent: bool = False
    group: bool = False


def scenarios(quick: bool) -> list[Scenario]:
    """The base and one variation per dimension; counts bound the bytes of a run."""
    scale = 10 if quick else 1
    base = Scenario("base p6 100B acks=all none", 1_000_000 // scale)
    return [
        base,
        replace(base, name="size 1KiB", size=1024, records=300_000 // scale),
        replace(base, name="size 10KiB", size=10 * 1024, records=50_000 // scale),
        replace(base, name="size 1MiB", size=1024 * 1024, records=500 // scale),
        replace(base, name="partitions 1", partitions=1),
        replace(base, name="partitions 60", partitions=60),
        replace(base, name="acks 1", acks="1"),
        replace(base, name="lz4", compression="lz4"),
        replace(base, name="zstd", compression="zstd"),
        replace(base, name="idempotent", idempotent=True),
        replace(base, name="group (subscribe)", group=True, records=300_000 // scale),
    ]


def build_values(count: int, size: int) -> list[bytes]:
    """Values of ``size`` bytes: sequence number, then half random bytes, half zeros, so
    lz4 and zstd find something to do but cannot shrink records to nothing."""
    random_len = (size - SEQ.size) // 2
    zeros = bytes(size - SEQ.size - random_len)
    pool = os.urandom(4 * 1024 * 1024 + random_len)
    stride = 7919  # prime: neighbouring records take different slices of the pool
    span = len(pool) - random_len
    return [SEQ.pack(i) + pool[(i * stride) % span:(i * stride) % span + random_len] + zeros
            for i in range(count)]


def producer_config(broker: BenchBroker, s: Scenario, on_delivery) -> dict:
    config = {
        "bootstrap.servers": broker.bootstrap, "acks": s.acks, "compression.type": s.compression,
        "enable.idempotence": s.idempotent, "linger.ms": 5, "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "message.timeout.ms": 120_000, "delivery.report.only.error": True, "on_delivery": on_delivery,
        **broker.client_config,
    }
    if s.size >= 1024 * 1024:
        config["message.max.bytes"] = LARGE_MESSAGE_BYTES
    return config


def consumer_config(broker: BenchBroker, s: Scenario) -> dict:
    config = {
        "bootstrap.servers": broker.bootstrap, "group.id": "tp-" + uuid.uuid4().hex,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
        "fetch.wait.max.ms": 100,
        # librdkafka pauses a partition for fetch.queue.backoff.ms (1 s by default) once its
        # local queue is over queued.min.messages: with defaults a fast broker looks bursty
        "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 5,
        **broker.client_config,
    }
    if s.group:
        config["session.timeout.ms"] = GROUP_SESSION_TIMEOUT_MS
    return config


def produce_phase(broker: BenchBroker, s: Scenario, topic: str, values: list[bytes],
                  timeout_s: float, warmup_topic: str | None = None) -> dict:
    """Produce ``values``; with ``warmup_topic``, the clock starts only once one record sent
    there is acknowledged (connection up and, for an idempotent producer, its producer id
    granted: librdkafka takes 0.1-0.5 s for that, which weighs on a short run)."""
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(producer_config(broker, s, on_delivery))
    if warmup_topic is not None:
        producer.produce(warmup_topic, b"warm-up")
        if producer.flush(timeout_s):
            raise RuntimeError(f"the warm-up record was not acknowledged in {timeout_s} s")
    produce, poll = producer.produce, producer.poll
    deadline = time.monotonic() + timeout_s
    sent = 0
    timed_out = False
    with ResourceMeter(broker) as meter:
        for value in values:
            while True:
                try:
                    produce(topic, value)
                    break
                except BufferError:  # local queue full: let librdkafka send
                    poll(0.005)
                    timed_out = time.monotonic() > deadline
                    if timed_out:
                        break
            if timed_out:
                break
            sent += 1
            if not sent & 4095:
                poll(0)
        unflushed = producer.flush(max(0.0, deadline - time.monotonic()) + 1.0)
    acked = sent - len(errors) - unflushed
    return {"produce_s": meter.wall_s, "produce_cpu_s": meter.cpu_s, "produce_rss_mb": meter.peak_rss_mb,
            "sent": sent, "acked": acked, "produce_errors": len(errors), "unflushed": unflushed,
            "first_produce_error": errors[0] if errors else None,
            "produce_msgs_s": acked / meter.wall_s, "produce_MB_s": acked * s.size / meter.wall_s / 1e6}


def consume_phase(broker: BenchBroker, s: Scenario, topic: str, expected: int,
                  timeout_s: float) -> tuple[dict, list]:
    """Read ``expected`` records; the clock runs from the first batch to the last, and the
    first batch's records are not counted in the rate (they arrived before the clock ran)."""
    consumer = Consumer(consumer_config(broker, s))
    with ResourceMeter(broker) as meter:
        started = time.perf_counter()
        if s.group:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(s.partitions)])
        read = read_timed(consumer, expected, s.size, timeout_s)
    consumer.close()
    elapsed = read.elapsed
    figures = {
        "consume_s": elapsed, "consume_cpu_s": meter.cpu_s, "consume_rss_mb": meter.peak_rss_mb,
        "consume_startup_s": read.startup_s(started),
        "consume_msgs_s": read.timed / elapsed if elapsed else None,
        "consume_MB_s": read.timed * s.size / elapsed / 1e6 if elapsed else None,
    }
    return figures, read.kept


@dataclass
class TimedRead:
    """Records read by :func:`read_timed` and when the first and last batches came."""

    kept: list = field(default_factory=list)
    first_at: float | None = None
    last_at: float | None = None
    first_len: int = 0

    @property
    def timed(self) -> int:
        """Records inside the clock: the first batch arrived before it ran."""
        return len(self.kept) - self.first_len

    @property
    def elapsed(self) -> float | None:
        """First batch to last; None when fewer than two batches came."""
        if self.first_at is None or self.last_at <= self.first_at:
            return None
        return self.last_at - self.first_at

    def startup_s(self, started: float) -> float | None:
        return self.first_at - started if self.first_at is not None else None


def read_timed(consumer: Consumer, expected: int, size: int, timeout_s: float) -> TimedRead:
    """Read up to ``expected`` records of ``size`` bytes, noting when the first and last batches came."""
    read = TimedRead()
    kept = read.kept
    deadline = time.monotonic() + timeout_s
    consume = consumer.consume
    # consume() waits for num_messages or the timeout, whichever comes first: ask for
    # about 1 MB at a time and never more than is left, so no call waits past the last record
    per_call = max(1, min(10_000, 1_000_000 // size))
    while len(kept) < expected and time.monotonic() < deadline:
        batch = consume(num_messages=min(per_call, expected - len(kept)), timeout=0.1)
        if batch:
            read.last_at = time.perf_counter()
            if read.first_at is None:
                read.first_at, read.first_len = read.last_at, len(batch)
            kept.extend(batch)
    return read


def verify(messages: list, sent: int, size: int) -> dict:
    """Every produced record exactly once, whole, and in increasing order per partition."""
    seen = bytearray(sent)
    last_seq: dict[int, int] = {}
    errors = out_of_order = malformed = 0
    unpack = SEQ.unpack_from
    for m in messages:
        if m.error() is not None:
            errors += 1
            continue
        value = m.value()
        if value is None or len(value) != size:
            malformed += 1
            continue
        seq = unpack(value)[0]
        if seq >= sent:
            malformed += 1
            continue
        if seen[seq] < 255:
            seen[seq] += 1
        partition = m.partition()
        if last_seq.get(partition, -1) >= seq:
            out_of_order += 1
        last_seq[partition] = seq
    missing = seen.count(0)
    duplicated = sent - missing - seen.count(1)
    return {"received": len(messages), "missing": missing, "duplicated": duplicated,
            "out_of_order": out_of_order, "malformed": malformed, "consume_errors": errors}


def run_once(broker: BenchBroker, s: Scenario, values: list[bytes], timeout_s: float) -> dict:
    topic = "tp-" + uuid.uuid4().hex[:12]
    result: dict = {"broker": broker.name, "topic": topic}
    try:
        config = {"max.message.bytes": str(LARGE_MESSAGE_BYTES)} if s.size >= 1024 * 1024 else None
        create_topic(broker.admin_bootstrap or broker.bootstrap, topic, s.partitions, config)
        with OthersMeter(broker) as others:
            result.update(produce_phase(broker, s, topic, values, timeout_s))
            consumed, messages = consume_phase(broker, s, topic, result["acked"], timeout_s)
        result.update(consumed, other_cpu_s=others.other_cpu_s)
        result.update(verify(messages, result["sent"], s.size))
        del messages
        result["peak_rss_mb"] = max(filter(None, [result["produce_rss_mb"], result["consume_rss_mb"]]),
                                    default=None)
        result["cpu_s_per_million"] = (result["produce_cpu_s"] + result["consume_cpu_s"]) * 1e6 / s.records
        problems = [k for k in ("produce_errors", "unflushed", "missing", "duplicated", "out_of_order",
                                "malformed", "consume_errors") if result[k]]
        if result["sent"] < s.records:
            problems.append("produce timed out")
        result["ok"] = not problems
        if problems:
            result["error"] = f"{broker.name}: " + ", ".join(
                f"{k}={result[k]}" if k in result else k for k in problems)
    except Exception as exc:  # a refused scenario is a recorded failure, never a crash
        result.update(ok=False, error=f"{broker.name}: {type(exc).__name__}: {exc}")
    finally:
        gc.collect()
        result["delete_error"] = delete_topic(broker, topic)
    return result


def table(results: list[dict]) -> str:
    rows = [[r["scenario"]["name"], f"{r['scenario']['records']:,}", *(cell(r, key) for key in KEYS), runs_ok(r)]
            for r in results]
    header = ["scenario", "records", "produce msg/s", "produce MB/s", "consume msg/s", "consume MB/s",
              "CPU-s produce", "CPU-s consume", "CPU-s per M records", "peak RSS MB", "other jobs CPU-s",
              "runs ok"]
    return results_table(header, rows, "Cells: pafka / peer (**pafka/peer**); medians of the runs that"
                         " passed verification. Other jobs CPU-s: CPU used by neither broker nor client"
                         " during the run (noise).", results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the records, one repeat")
    parser.add_argument("--repeats", type=int, default=None, help="runs per broker (default 3, quick 1)")
    parser.add_argument("--only", default=None, help="comma-separated scenario names (substring match)")
    parser.add_argument("--timeout", type=float, default=120.0, help="bound per phase, seconds")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    chosen = scenarios(args.quick)
    if args.only:
        wanted = [w.strip() for w in args.only.split(",")]
        chosen = [s for s in chosen if any(w in s.name for w in wanted)]
    results = []
    started = time.monotonic()
    gc.disable()  # the timed loops make millions of short-lived objects
    with broker_pair() as (pafka, peer):
        for s in chosen:
            values = build_values(s.records, s.size)
            runs = []
            for broker in alternate(pafka, peer, repeats):
                run = run_once(broker, s, values, args.timeout)
                log(f"{s.name} {broker.name}: ok={run['ok']} produce={human(run.get('produce_msgs_s'))}/s "
                    f"consume={human(run.get('consume_msgs_s'))}/s cpu={run.get('produce_cpu_s')}"
                    f"/{run.get('consume_cpu_s')} {run.get('error') or ''}")
                runs.append(run)
            del values
            results.append({"scenario": asdict(s), **compare_runs(runs, KEYS), "runs": runs})
    print(f"## Client throughput (confluent-kafka), {repeats} run(s) per broker\n")
    print(table(results))
    print(json.dumps({"part": "client_throughput", "repeats": repeats, "quick": args.quick,
                      "wall_s": round(time.monotonic() - started, 1), "scenarios": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
