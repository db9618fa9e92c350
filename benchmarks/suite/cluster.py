"""Cluster mode of pafka (issue 17) against the peer broker, with the confluent-kafka client.

    python benchmarks/suite/cluster.py [--quick] [--repeats 3] [--only produce,latency,catch-up] [--timeout 300]

Three brokers run as one cluster on this machine (pytest_pafka/cluster.py: a ZooKeeper from Debian's
package and ``pafka broker`` processes on 127.0.0.1-3, ``default.replication.factor=3``,
``min.insync.replicas=2``), beside a single pafka broker (embedded, no ZooKeeper) and the peer
(Tansu, single node, memory storage, no replication). Every run gets a fresh topic, deleted after.

- ``produce``: 1,000,000 x 100 B records (a tenth with ``--quick``), 6 partitions, acks=all, the
  producer settings of client_throughput.py, against the cluster (RF 3), the single pafka (RF 1)
  and the peer alternately (A B C A B C ...); read back from the start and verified (every record
  exactly once, in order per partition) or the run is left out of the medians. Broker CPU is the
  sum over the three cluster brokers. Targets: cluster >= peer, cluster >= 0.5 x pafka RF 1.
- ``latency``: 10,000 records/s offered for 10 s (2 s with ``--quick``), acks=all, one partition,
  linger.ms=0, the paced sender and receiving thread of client_latency.py; produce and end-to-end
  p50/p99. Targets for the cluster: end-to-end p50 <= 3 ms, p99 <= 10 ms.
- ``catch-up``: one partition, RF 3; one follower stopped (SIGTERM), 1 GB of 64 KiB records
  (100 MB with ``--quick``) produced with acks=all to the other two, the follower started again;
  the clock runs from its listener accepting connections to its log holding every byte the
  leader's holds (sizes of the .log segments, polled every 20 ms). Target >= 300 MB/s.

Prints markdown tables, then one JSON line with every figure. Needs cluster mode (zookeeper.connect).
"""

from __future__ import annotations

import argparse
import gc
import json
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from benchmarks.suite.bench_brokers import (
    DEFAULT_PEER_LAUNCHER,
    BenchBroker,
    bench_tree,
    median,
    proc_cpu_seconds,
    start_pafka,
    start_peer,
)
from benchmarks.suite.client_common import OthersMeter, delete_topic, human, log, markdown_table
from benchmarks.suite.client_latency import Scenario as LatencyScenario
from benchmarks.suite.client_latency import StampedClients, quantiles_ms, send_paced
from benchmarks.suite.client_throughput import Scenario, build_values, consume_phase, produce_phase, verify
from client import AdminClient, KafkaClient, NewTopic
from client.groups import find_coordinator
from pytest_pafka.cluster import Cluster

RECORDS = 1_000_000
RECORD_SIZE = 100
PARTITIONS = 6
CATCH_UP_BYTES = 1 << 30
CATCH_UP_VALUE = 64 * 1024
TARGETS = {"rf3_vs_peer": 1.0, "rf3_vs_rf1": 0.5, "e2e_p50_ms": 3.0, "e2e_p99_ms": 10.0, "catch_up_MB_s": 300.0}
CLUSTER_OVERRIDES = ("default.replication.factor=3", "min.insync.replicas=2", "offsets.topic.replication.factor=3")
TOPIC_TIMEOUT_S = 60.0
GROUP_KEY_TYPE = 0  # FindCoordinator's key type of a consumer group
PRODUCE_KEYS = ["produce_msgs_s", "produce_MB_s", "produce_cpu_s", "client_cpu_s", "consume_msgs_s", "other_cpu_s"]
LATENCY_KEYS = ["achieved_msgs_s", "produce_p50_ms", "produce_p99_ms", "e2e_p50_ms", "e2e_p99_ms", "cpu_s"]


@dataclass
class Target:
    """One broker setup the suite drives: a bootstrap, the PIDs whose CPU counts, a replication factor."""

    name: str
    broker: BenchBroker  # the bootstrap broker (and, for a single broker, the only one)
    pids: list[int]
    replication_factor: int

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def cpu_seconds(self) -> float:
        return sum(proc_cpu_seconds(pid) for pid in self.pids)


@contextmanager
def cpu_meter(target: Target) -> Iterator[dict[str, float]]:
    """CPU seconds of every broker of ``target`` over the block (``["cpu_s"]`` once it ends)."""
    result: dict[str, float] = {}
    before = target.cpu_seconds()
    try:
        yield result
    finally:
        result["cpu_s"] = target.cpu_seconds() - before


def cluster_target(cluster: Cluster) -> Target:
    first = cluster.broker(1)
    pids = [b.pid for b in cluster.brokers.values() if b.pid is not None]
    assert first.pid is not None
    return Target("pafka RF 3", BenchBroker("pafka-rf3", first.host, first.port, first.pid), pids, 3)


def create_replicated_topic(target: Target, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    """The topic with the target's replication factor; returns once every partition has a leader."""
    with KafkaClient(target.bootstrap, timeout=TOPIC_TIMEOUT_S) as client:
        AdminClient(client, timeout_ms=int(TOPIC_TIMEOUT_S * 1000)).create_topics(
            [NewTopic(topic, partitions, target.replication_factor, dict(configs or {}))])
        deadline = time.monotonic() + TOPIC_TIMEOUT_S
        while True:
            metadata = client.refresh_metadata([topic]).topics.get(topic)
            if metadata is not None and len(metadata.partitions) == partitions and all(
                    p.leader >= 0 and len(p.isr) == target.replication_factor for p in metadata.partitions.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not every partition led and in sync after {TOPIC_TIMEOUT_S} s")
            time.sleep(0.05)


def compare3(runs: list[dict], keys: list[str], names: list[str]) -> dict[str, object]:
    """Medians per target of the runs that passed, and how many passed."""
    found: dict[str, object] = {}
    for name in names:
        mine = [r for r in runs if r["target"] == name]
        good = [r for r in mine if r.get("ok")]
        found[name] = {key: median([r.get(key) for r in good]) for key in keys}
        found[f"{name} ok"] = f"{len(good)}/{len(mine)}"
    found["failures"] = [r.get("error") for r in runs if not r.get("ok")]
    return found


# -- produce throughput -----------------------------------------------------------------------

def produce_run(target: Target, s: Scenario, values: list[bytes], timeout_s: float) -> dict:
    topic = "cl-" + uuid.uuid4().hex[:12]
    warmup = "cl-warm-" + uuid.uuid4().hex[:12]
    result: dict = {"target": target.name, "topic": topic}
    try:
        create_replicated_topic(target, topic, s.partitions)
        create_replicated_topic(target, warmup, 1)
        with OthersMeter(target) as others:
            with cpu_meter(target) as produce_cpu:
                client_cpu0 = time.process_time()
                result.update(produce_phase(target.broker, s, topic, values, timeout_s, warmup))
                client_cpu_s = time.process_time() - client_cpu0
            consumed, messages = consume_phase(target.broker, s, topic, result["acked"], timeout_s)
        # The producer's CPU (this process: librdkafka's threads and the Python loop) beside the
        # brokers': on two shared cores their sum bounds the rate.
        result.update(consumed, other_cpu_s=others.other_cpu_s, produce_cpu_s=produce_cpu["cpu_s"],
                      client_cpu_s=client_cpu_s)
        result.update(verify(messages, result["sent"], s.size))
        del messages
        problems = [k for k in ("produce_errors", "unflushed", "missing", "duplicated", "out_of_order",
                                "malformed", "consume_errors") if result[k]]
        if result["sent"] < s.records:
            problems.append("produce timed out")
        result["ok"] = not problems
        if problems:
            result["error"] = f"{target.name}: " + ", ".join(f"{k}={result.get(k)}" for k in problems)
    except Exception as exc:  # a refused run is recorded, never a crash
        result.update(ok=False, error=f"{target.name}: {type(exc).__name__}: {exc}")
    finally:
        gc.collect()
        result["delete_error"] = delete_topic(target.broker, topic) or delete_topic(target.broker, warmup)
    return result


# -- end-to-end latency -----------------------------------------------------------------------

def latency_run(target: Target, s: LatencyScenario) -> dict:
    topic = "cl-lat-" + uuid.uuid4().hex[:12]
    result: dict = {"target": target.name, "topic": topic}
    clients = None
    try:
        create_replicated_topic(target, topic, 1)
        clients = StampedClients(target.broker, topic, s.acks)
        clients.warm_up()
        producer, receiver, produce_ns, failures = (clients.producer, clients.receiver, clients.produce_ns,
                                                    clients.failures)
        with OthersMeter(target) as others, cpu_meter(target) as cpu:
            client_cpu0 = time.process_time()
            started = time.perf_counter()
            sent, stalled_ms = send_paced(producer, topic, s, clients.pad)
            unflushed = producer.flush(30)
            elapsed = time.perf_counter() - started
            client_cpu_s = time.process_time() - client_cpu0
        arrived = receiver.wait_for(sent, 15.0)
        missing = sum(1 for seq in range(sent) if seq not in receiver.seen)
        result.update({"sent": sent, "acked": len(produce_ns), "produce_errors": len(failures), "unflushed": unflushed,
                       "missing": missing, "achieved_msgs_s": len(produce_ns) / elapsed, "cpu_s": cpu["cpu_s"],
                       "client_cpu_s": client_cpu_s, "other_cpu_s": others.other_cpu_s,
                       "client_stalled_ms": stalled_ms, **quantiles_ms(produce_ns, "produce"),
                       **quantiles_ms(receiver.latencies_ns, "e2e")})
        problems = [k for k in ("produce_errors", "unflushed", "missing") if result[k]]
        if not arrived:
            problems.append("not all records arrived within 15 s")
        result["ok"] = not problems
        if problems:
            result["error"] = f"{target.name}: " + ", ".join(problems)
    except Exception as exc:
        result.update(ok=False, error=f"{target.name}: {type(exc).__name__}: {exc}")
    finally:
        if clients is not None:
            clients.stop()
        gc.collect()
        result["delete_error"] = delete_topic(target.broker, topic)
    return result


# -- follower catch-up ------------------------------------------------------------------------

def segment_bytes(log_dir: Path) -> int:
    return sum(p.stat().st_size for p in log_dir.glob("*.log")) if log_dir.exists() else 0


def catch_up_run(cluster: Cluster, total_bytes: int, timeout_s: float) -> dict:
    """Stop a follower, produce ``total_bytes`` past it, start it, time its catch-up."""
    from confluent_kafka import Producer

    target = cluster_target(cluster)
    topic = "cl-catch-" + uuid.uuid4().hex[:12]
    result: dict = {"target": target.name, "topic": topic}
    try:
        create_replicated_topic(target, topic, 1)
        state = cluster.partition_state(topic, 0)
        assert state is not None
        leader = state["leader"]
        follower = next(b for b in cluster.topic_assignment(topic)[0] if b != leader)
        cluster.terminate(follower)
        cluster.wait_for(lambda: follower not in (cluster.partition_state(topic, 0) or {}).get("isr", [follower]),
                         60.0, f"broker {follower} out of the ISR")
        errors: list[str] = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap_of(b for b in cluster.broker_ids if b != follower),
                             "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                             "queue.buffering.max.kbytes": 1_048_576, "message.max.bytes": 2_000_000,
                             "on_delivery": lambda err, _m: err is not None and errors.append(str(err))})
        value = bytes(CATCH_UP_VALUE)
        produced_started = time.perf_counter()
        for _ in range(total_bytes // CATCH_UP_VALUE):
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.01)
        if producer.flush(timeout_s) or errors:
            raise RuntimeError(f"the 1 GB backlog was not acknowledged: {errors[:3]}")
        result["backlog_produce_MB_s"] = total_bytes / (time.perf_counter() - produced_started) / 1e6
        leader_dir = cluster.broker(leader).data_dir / f"{topic}-0"
        follower_dir = cluster.broker(follower).data_dir / f"{topic}-0"
        want = segment_bytes(leader_dir)
        behind = want - segment_bytes(follower_dir)
        launched = time.perf_counter()
        cluster.start(follower, wait_registered=False)
        listening = time.perf_counter()
        deadline = time.monotonic() + timeout_s
        while segment_bytes(follower_dir) < want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"follower {follower} not caught up in {timeout_s} s")
            time.sleep(0.02)
        done = time.perf_counter()
        result.update(ok=True, behind_MB=behind / 1e6, start_s=listening - launched, catch_up_s=done - listening,
                      catch_up_MB_s=behind / (done - listening) / 1e6,
                      catch_up_with_start_MB_s=behind / (done - launched) / 1e6)
    except Exception as exc:
        result.update(ok=False, error=f"catch-up: {type(exc).__name__}: {exc}")
    finally:
        for broker_id in cluster.broker_ids:
            if not cluster.broker(broker_id).running:
                cluster.start(broker_id, wait_registered=False)
        cluster.wait_until_registered(cluster.broker_ids, timeout=60.0)
        result["delete_error"] = delete_topic(target.broker, topic)
    return result


# -- report -----------------------------------------------------------------------------------

def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}" if value < 1000 else human(value)


def produce_table(result: dict, names: list[str]) -> str:
    rows = [[name, *(human(result[name][k]) for k in PRODUCE_KEYS), str(result[f"{name} ok"])] for name in names]
    return markdown_table(["setup", "produce msg/s", "produce MB/s", "brokers' CPU-s produce", "client CPU-s produce",
                           "consume msg/s", "other jobs CPU-s", "runs ok"], rows)


def latency_table(result: dict, names: list[str]) -> str:
    rows = [[name, human(result[name]["achieved_msgs_s"]), *(fmt(result[name][k]) for k in LATENCY_KEYS[1:5]),
             fmt(result[name]["cpu_s"]), str(result[f"{name} ok"])] for name in names]
    return markdown_table(["setup", "acked msg/s", "produce p50 ms", "produce p99 ms", "e2e p50 ms", "e2e p99 ms",
                           "brokers' CPU-s", "runs ok"], rows)


def check(checks: dict[str, dict], name: str, value: float | None, limit: float, at_least: bool) -> None:
    met = value is not None and (value >= limit if at_least else value <= limit)
    checks[name] = {"value": value, "limit": limit, "met": met}


def create_offsets_topic(target: Target) -> None:
    """Before any clock runs: the consumers' group.id makes librdkafka look for a coordinator,
    and the first FindCoordinator creates ``__consumer_offsets`` (50 partitions, RF 3 on the
    cluster): a burst of log creation that belongs to no measured phase."""
    with KafkaClient(target.bootstrap, timeout=TOPIC_TIMEOUT_S) as client:
        find_coordinator(client, "bench-warm-up", GROUP_KEY_TYPE, TOPIC_TIMEOUT_S)


@contextmanager
def targets_running(peer_launcher: Path) -> Iterator[tuple[Cluster, list[Target]]]:
    """The cluster, a single pafka and the peer, all stopped at the end."""
    single = peer = None
    with Cluster(3, *CLUSTER_OVERRIDES, tree=bench_tree()) as cluster:
        try:
            single = start_pafka()
            peer = start_peer(launcher=peer_launcher)
            targets = [cluster_target(cluster), Target("pafka RF 1", single, [single.pid], 1),
                       Target("peer", peer, [peer.pid], 1)]
            for target in targets:
                create_offsets_topic(target)
            yield cluster, targets
        finally:
            if peer is not None:
                peer.stop()
            if single is not None and single.launcher is not None:
                single.launcher.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the records and bytes, one repeat")
    parser.add_argument("--repeats", type=int, default=None, help="runs per setup (default 3, quick 1)")
    parser.add_argument("--only", default="produce,latency,catch-up", help="comma-separated parts")
    parser.add_argument("--timeout", type=float, default=300.0, help="bound per phase, seconds")
    parser.add_argument("--peer-launcher", type=Path, default=DEFAULT_PEER_LAUNCHER,
                        help="the peer's launcher script (default: ../shared/bench/peer.py beside the checkout)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    parts = {p.strip() for p in args.only.split(",")}
    started = time.monotonic()
    figures: dict[str, object] = {}
    checks: dict[str, dict] = {}
    gc.disable()  # the timed loops make millions of short-lived objects
    with targets_running(args.peer_launcher) as (cluster, targets):
        names = [t.name for t in targets]
        rf3, rf1, peer = names
        if "produce" in parts:
            s = Scenario("RF 3 acks=all", RECORDS // (10 if args.quick else 1), RECORD_SIZE, PARTITIONS)
            values = build_values(s.records, s.size)
            runs = []
            for _ in range(repeats):
                for target in targets:
                    run = produce_run(target, replace(s, name=target.name), values, args.timeout)
                    log(f"produce {target.name}: ok={run['ok']} {human(run.get('produce_msgs_s'))}/s "
                        f"cpu={run.get('produce_cpu_s')} {run.get('error') or ''}")
                    runs.append(run)
            del values
            result = compare3(runs, PRODUCE_KEYS, names)
            figures["produce"] = {"scenario": asdict(s), **result, "runs": runs}
            print(f"## Cluster produce: {s.records:,} x {s.size} B, {s.partitions} partitions, acks=all, "
                  f"{repeats} run(s) per setup\n")
            print(produce_table(result, names))
            print()
            a, b, c = (result[n]["produce_msgs_s"] for n in (rf3, rf1, peer))  # type: ignore[index]
            check(checks, "RF 3 produce >= peer's single-node acks=all", a / c if a and c else None,
                  TARGETS["rf3_vs_peer"], True)
            check(checks, "RF 3 produce >= 0.5 x pafka RF 1", a / b if a and b else None, TARGETS["rf3_vs_rf1"], True)
        if "latency" in parts:
            s = LatencyScenario("10k/s acks=all", "all", 10_000, 2.0 if args.quick else 10.0, 2_000_000)
            runs = []
            for target in (t for _ in range(repeats) for t in targets):
                run = latency_run(target, s)
                log(f"latency {target.name}: ok={run['ok']} e2e p50/p99={fmt(run.get('e2e_p50_ms'))}/"
                    f"{fmt(run.get('e2e_p99_ms'))} {run.get('error') or ''}")
                runs.append(run)
            result = compare3(runs, LATENCY_KEYS, names)
            figures["latency"] = {"scenario": asdict(s), **result, "runs": runs}
            print(f"## Cluster latency: 10,000 records/s, 100 B, acks=all, one partition, {repeats} run(s) per setup\n")
            print(latency_table(result, names))
            print()
            check(checks, "RF 3 e2e p50 <= 3 ms at 10k/s", result[rf3]["e2e_p50_ms"], TARGETS["e2e_p50_ms"], False)  # type: ignore[index]
            check(checks, "RF 3 e2e p99 <= 10 ms at 10k/s", result[rf3]["e2e_p99_ms"], TARGETS["e2e_p99_ms"], False)  # type: ignore[index]
        if "catch-up" in parts:
            total = CATCH_UP_BYTES // (10 if args.quick else 1)
            runs = [catch_up_run(cluster, total, args.timeout) for _ in range(repeats)]
            for run in runs:
                log(f"catch-up: ok={run['ok']} {fmt(run.get('catch_up_MB_s'))} MB/s {run.get('error') or ''}")
            good = sorted(r["catch_up_MB_s"] for r in runs if r.get("ok"))
            rate = good[len(good) // 2] if good else None
            figures["catch_up"] = {"bytes": total, "median_MB_s": rate, "runs": runs}
            print(f"## Follower catch-up from {total / 1e6:,.0f} MB behind (RF 3, {CATCH_UP_VALUE // 1024} KiB records)\n")
            print(markdown_table(["run", "behind MB", "start s", "catch-up s", "MB/s", "MB/s incl. start", "ok"],
                                 [[str(i + 1), fmt(r.get("behind_MB"), 0), fmt(r.get("start_s")), fmt(r.get("catch_up_s")),
                                   fmt(r.get("catch_up_MB_s"), 0), fmt(r.get("catch_up_with_start_MB_s"), 0),
                                   "yes" if r.get("ok") else f"no: {r.get('error')}"] for i, r in enumerate(runs)]))
            print()
            check(checks, "follower catch-up >= 300 MB/s", rate, TARGETS["catch_up_MB_s"], True)
    for name, c in checks.items():
        print(f"- target {name}: {fmt(c['value'])} (limit {c['limit']}) — {'met' if c['met'] else 'MISSED'}")
    print(json.dumps({"part": "cluster", "repeats": repeats, "quick": args.quick,
                      "wall_s": round(time.monotonic() - started, 1), "targets": checks, **figures}))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # clean up the cluster on a SIGTERM too
    sys.exit(main())
