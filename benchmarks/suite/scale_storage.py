"""Scale scenarios that need pafka's disk: a log of 200 segments, start-up with 5 GB.

The peer keeps everything in memory (no segments, nothing to load at start-up), so these
scenarios run against pafka only; the output says so.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from benchmarks.suite.bench_brokers import BenchBroker, ResourceMeter, median, restart_pafka, start_pafka
from benchmarks.suite.scale_wire import WireClient, pipelined_produce, record_batch
from testing.topics import create_topic, create_topics

MIB = 1 << 20
SEGMENT_BYTES = MIB
PHASE_TIMEOUT_S = 300.0
#: Bound on topic creation in the scale scenarios (100 topics of 10 partitions in one request).
TOPICS_TIMEOUT_S = 120.0


def delete_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(names, operation_timeout=60).values():
        future.result(120)


def produce_records(bootstrap: str, topic: str, count: int, size: int, partitions: int,
                    timeout: float = PHASE_TIMEOUT_S) -> int:
    """``count`` records of ``size`` bytes round-robin over ``partitions``; returns the acked count."""
    acked = errors = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked, errors
        if err is None:
            acked += 1
        else:
            errors += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1000000,
                         "queue.buffering.max.messages": 1000000, "queue.buffering.max.kbytes": 1048576,
                         "message.timeout.ms": int(timeout * 1000)})
    value = b"x" * size
    deadline = time.monotonic() + timeout
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.005)
                if time.monotonic() > deadline:
                    raise TimeoutError("producer queue stayed full") from None
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(max(1.0, deadline - time.monotonic()))
    if errors or acked != count:
        raise RuntimeError(f"{topic}: {acked} of {count} records acked, {errors} errors")
    return acked


# -- a log grown to 200 segments ------------------------------------------------------------
@dataclass
class SegmentPhase:
    segments: int
    records: int
    wall_s: float
    cpu_s: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_s

    @property
    def cpu_s_per_million(self) -> float:
        return self.cpu_s / self.records * 1e6


def segment_count(broker: BenchBroker, topic: str) -> int:
    assert broker.data_dir is not None
    return sum(1 for _ in (broker.data_dir / f"{topic}-0").glob("*.log"))


def grow_to_segments(broker: BenchBroker, topic: str, target: int, deadline: float) -> None:
    """Append pre-built 100 KiB batches (pipelined) until the log has ``target`` segments."""
    with WireClient(broker.host, broker.port) as client:
        client.negotiate()
        frame = client.produce_frame(topic, [(0, bytes(record_batch(1000, 100)))])
        while segment_count(broker, topic) < target and time.monotonic() < deadline:
            pipelined_produce(client, [frame] * 200, in_flight=8, deadline=deadline)


def time_fetches(client: WireClient, topic: str, offset: int, repeats: int) -> float:
    """Median seconds of a 1 MiB Fetch at ``offset`` (whole response read)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        response = client.fetch(topic, 0, offset, 1 << 20)
        times.append(time.perf_counter() - started)
        partition = response.responses[0].partitions[0]
        if partition.error_code or not partition.records:
            raise RuntimeError(f"fetch at {offset} failed: error {partition.error_code}")
    return median(times)  # type: ignore[return-value]


def run_segments(broker: BenchBroker, records: int, target_segments: int, fetch_repeats: int,
                 tag: str) -> dict[str, Any]:
    """Produce cost in the first segments vs after ``target_segments``; fetch at three places."""
    topic = f"scale-segments-{tag}"
    create_topic(broker.bootstrap, topic, 1, {"segment.bytes": str(SEGMENT_BYTES)}, timeout_s=TOPICS_TIMEOUT_S)
    phases = []
    with ResourceMeter(broker) as meter:
        produce_records(broker.bootstrap, topic, records, 100, 1)
    phases.append(SegmentPhase(segment_count(broker, topic), records, meter.wall_s, meter.cpu_s))
    grow_to_segments(broker, topic, target_segments, time.monotonic() + PHASE_TIMEOUT_S)
    with ResourceMeter(broker) as meter:
        produce_records(broker.bootstrap, topic, records, 100, 1)
    phases.append(SegmentPhase(segment_count(broker, topic), records, meter.wall_s, meter.cpu_s))
    with WireClient(broker.host, broker.port) as client:
        client.negotiate()
        end = client.latest_offsets({topic: [0]})[(topic, 0)]
        fetch_s = {where: time_fetches(client, topic, offset, fetch_repeats)
                   for where, offset in (("beginning", 0), ("middle", end // 2), ("end", max(0, end - 5000)))}
    delete_topics(broker.bootstrap, [topic])
    return {"phases": [vars(p) | {"records_per_s": p.records_per_s, "cpu_s_per_million": p.cpu_s_per_million}
                       for p in phases], "fetch_ms": {k: v * 1000 for k, v in fetch_s.items()}}


# -- start-up with 1,000 partitions and 5 GB --------------------------------------------------
def write_volume(broker: BenchBroker, topics: list[str], partitions: int, total_bytes: int,
                 deadline: float) -> int:
    """Pre-built 1 MiB batches, pipelined, round-robin over every partition; returns bytes sent."""
    batch = bytes(record_batch(1024, 1000))
    with WireClient(broker.host, broker.port) as client:
        client.negotiate()
        frames = [client.produce_frame(t, [(p, batch)]) for t in topics for p in range(partitions)]
        count = max(1, total_bytes // len(batch))
        sent, errors = pipelined_produce(client, [frames[i % len(frames)] for i in range(count)],
                                         in_flight=4, deadline=deadline)
    if errors:
        raise RuntimeError(f"{errors} produce errors while writing the volume")
    return sent * len(batch)


SCANNED = re.compile(rb"recovered: (\d+) bytes scanned from position")


def recovery_scans(log_path: Path, since: int) -> tuple[int, int]:
    """(segments recovered, bytes their recovery scanned), from the broker's log since ``since``."""
    with open(log_path, "rb") as log:
        log.seek(since)
        text = log.read()
    return text.count(b"recovering unflushed segment"), sum(int(m) for m in SCANNED.findall(text))


def first_requests(broker: BenchBroker, topic: str) -> None:
    """Metadata for every topic, then a Fetch from the beginning of ``topic``-0 (retried
    until it succeeds: the broker may still be loading)."""
    while True:
        try:
            with WireClient(broker.host, broker.port, timeout=60) as client:
                client.negotiate()
                client.metadata(None)
                partition = client.fetch(topic, 0, 0).responses[0].partitions[0]
                if partition.error_code == 0 and partition.records:
                    return
        except (ConnectionError, OSError):
            pass
        time.sleep(0.01)


def timed_restart(broker: BenchBroker, sig: signal.Signals, topic: str) -> tuple[BenchBroker, dict[str, Any]]:
    """Stop with ``sig``, start again: seconds to listening, to a first Metadata + Fetch; RSS."""
    assert broker.launcher is not None
    log_path = broker.launcher.log_path
    since = log_path.stat().st_size if log_path.exists() else 0
    broker.stop(sig)
    started = time.monotonic()
    restarted = restart_pafka(broker, sig)  # already stopped: only the start is timed
    listening_s = time.monotonic() - started
    first_requests(restarted, topic)
    first_s = time.monotonic() - started
    time.sleep(0.5)
    segments, scanned = recovery_scans(log_path, since)
    return restarted, {"signal": sig.name, "listening_s": listening_s, "first_fetch_s": first_s,
                       "rss_mb": restarted.rss_mb(), "recovered_segments": segments, "scanned_bytes": scanned}


def run_startup(data_root: Path, total_bytes: int, topics: int, partitions: int, repeats: int,
                write_timeout: float, overrides: tuple[str, ...] = (),
                on_phase: Callable[[str], None] = print) -> dict[str, Any]:
    """Fill 1,000 partitions, then time restarts after SIGTERM and after SIGKILL."""
    names = [f"scale-startup-{i:03d}" for i in range(topics)]
    data_dir = data_root / "startup"
    broker = start_pafka(data_dir, overrides=overrides)
    result: dict[str, Any] = {"fresh_listening_s": broker.start_s}
    time.sleep(1.0)
    result["fresh_idle_rss_mb"] = broker.rss_mb()
    try:
        create_topics(broker.bootstrap, names, partitions, timeout_s=TOPICS_TIMEOUT_S)
        started = time.monotonic()
        written = write_volume(broker, names, partitions, total_bytes, started + write_timeout)
        result |= {"written_bytes": written, "write_s": time.monotonic() - started}
        on_phase(f"wrote {written / 1e9:.2f} GB in {result['write_s']:.1f} s")
        runs: dict[str, list[dict[str, Any]]] = {"kill_all_unflushed": [], "clean": [], "kill_after_clean": [],
                                                  "kill_some_unflushed": []}
        broker, run = timed_restart(broker, signal.SIGKILL, names[0])  # everything written is unflushed
        runs["kill_all_unflushed"].append(run)
        for _ in range(repeats):
            broker, run = timed_restart(broker, signal.SIGTERM, names[0])
            runs["clean"].append(run)
            # After a clean start every log is flushed up to its end: nothing is left to scan.
            broker, run = timed_restart(broker, signal.SIGKILL, names[0])
            runs["kill_after_clean"].append(run)
        # A tenth of the volume more, unflushed, then a crash: the scan should cover that tenth.
        broker, _ = timed_restart(broker, signal.SIGTERM, names[0])
        extra = write_volume(broker, names, partitions, total_bytes // 10, time.monotonic() + write_timeout)
        broker, run = timed_restart(broker, signal.SIGKILL, names[0])
        run["unflushed_bytes"] = extra
        runs["kill_some_unflushed"].append(run)
        runs["kill_all_unflushed"][0]["unflushed_bytes"] = written
        result["runs"] = runs
        result["data_dir_bytes"] = sum(p.stat().st_size for p in data_dir.rglob("*.log"))
    finally:
        broker.stop()
    return result
