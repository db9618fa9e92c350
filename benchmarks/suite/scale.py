"""Scale benchmarks (issue 7): costs that must stay flat as partitions, connections,
consumer groups, segments and data grow; start-up time and RSS.

    python benchmarks/suite/scale.py --quick            # development, about a minute or two
    flock /tmp/pafka-bench.lock python benchmarks/suite/scale.py --repeats 3

Client scenarios (1,000 partitions, idle connections, consumer groups) run against pafka
and the peer alternately (A B A B ...), medians of ``--repeats``. The segment and start-up
scenarios run against pafka only: the peer keeps everything in memory, it has no segments
and nothing to load at start-up. Prints markdown tables; the last line is one JSON object
with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from benchmarks.suite.bench_brokers import (
    DEFAULT_PEER_LAUNCHER,
    BenchBroker,
    alternate,
    median,
    ratio,
    start_pafka,
    start_peer,
)
from benchmarks.suite.scale_clients import fresh_idle_cost, run_connections, run_groups, run_partitions
from benchmarks.suite.scale_storage import TOPICS_TIMEOUT_S, run_segments, run_startup
from testing.topics import create_topic

SCENARIOS = ("partitions", "connections", "groups", "segments", "startup")
FD_NEEDED = 4096


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, for development")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated: " + ", ".join(SCENARIOS))
    parser.add_argument("--startup-gb", type=float, default=None, help="data for the start-up scenario")
    parser.add_argument("--data-root", type=Path, default=None, help="where pafka's data dirs go (temp)")
    parser.add_argument("--peer-launcher", type=Path, default=DEFAULT_PEER_LAUNCHER)
    return parser.parse_args(argv)


def sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"records": 50_000, "metadata_repeats": 10, "idle": 1000, "producers": 20, "records_each": 1_000,
                "groups": 10, "group_partitions": 6, "per_partition": 1_000, "group_workers": 10,
                "segment_records": 20_000, "segments": 20, "fetch_repeats": 5, "startup_gb": 0.1,
                "write_timeout": 60.0}
    return {"records": 1_000_000, "metadata_repeats": 50, "idle": 1000, "producers": 20, "records_each": 10_000,
            "groups": 50, "group_partitions": 6, "per_partition": 20_000, "group_workers": 50,
            "segment_records": 200_000, "segments": 200, "fetch_repeats": 30, "startup_gb": 5.0,
            "write_timeout": 180.0}


def raise_fd_limit() -> tuple[int, int]:
    """1,000 idle sockets plus the clients' need more than a default soft limit of 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < FD_NEEDED <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_NEEDED, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    out: dict[str, Any] = {k: median([r[k] for r in runs]) for k in keys}
    for key in (k for k, v in runs[0].items() if isinstance(v, bool)):
        out[key] = all(r[key] for r in runs)
    return out


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) if not isinstance(c, str) else c for c in row) + " |" for row in rows]
    return "\n".join(lines)


# -- scenarios over both brokers ----------------------------------------------------------------
def scenario_partitions(pafka: BenchBroker, peer: BenchBroker, n: dict[str, Any], repeats: int) -> dict[str, Any]:
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for broker in alternate(pafka, peer, repeats):
        for topics, per_topic in ((1, 6), (100, 10)):
            run = run_partitions(broker, topics, per_topic, n["records"], n["metadata_repeats"])
            runs.setdefault((broker.name, topics * per_topic), []).append(run)
            print(f"  {broker.name} {topics * per_topic} partitions: {run['records_per_s']:,.0f} rec/s, "
                  f"metadata p50 {run['metadata_ms_p50']:.2f} ms", flush=True)
    out = {f"{name}_{parts}": medians(r) for (name, parts), r in runs.items()}
    for name in ("pafka", "peer"):
        out[f"{name}_1000_vs_6"] = ratio(out[f"{name}_1000"]["records_per_s"], out[f"{name}_6"]["records_per_s"])
    rows = []
    for name in ("pafka", "peer"):
        for parts in (6, 1000):
            m = out[f"{name}_{parts}"]
            rows.append([name, parts, m["records_per_s"], m["cpu_s_per_million"], m["client_cpu_s_per_million"],
                         m["metadata_ms_p50"],
                         m["metadata_ms_p99"], f"{fmt(m['list_offsets_match'], 0)}/{parts}", m["read_back_ok"]])
    print(f"\n### 1,000 partitions vs 6 ({n['records']:,} records of 100 B, one producer)\n")
    print(table(["broker", "partitions", "records/s", "broker CPU-s / M", "client CPU-s / M", "Metadata p50 ms",
                 "Metadata p99 ms",
                 "ListOffsets = count", "read back once, in order"], rows))
    print(f"\n1,000-partition throughput / 6-partition: pafka {fmt(out['pafka_1000_vs_6'], 3)}, "
          f"peer {fmt(out['peer_1000_vs_6'], 3)} (target for pafka >= 0.70); Metadata: all topics, "
          f"v{out['pafka_1000'].get('metadata_version', '?')}, raw round trip (target p50 <= 20 ms)")
    return out


def fresh_connection_costs(root: Path, n: dict[str, Any], launcher: Path) -> dict[str, Any]:
    """Idle connections' RSS on freshly started brokers (before anything else ran on them)."""
    costs = {}
    pafka = start_pafka(root / "fresh")
    try:
        costs["pafka"] = fresh_idle_cost(pafka, n["idle"])
    finally:
        pafka.stop()
        shutil.rmtree(root / "fresh", ignore_errors=True)
    peer = start_peer(launcher=launcher)
    try:
        costs["peer"] = fresh_idle_cost(peer, n["idle"])
    finally:
        peer.stop()
    return costs


def scenario_connections(pafka: BenchBroker, peer: BenchBroker, n: dict[str, Any], repeats: int,
                         fresh: dict[str, Any]) -> dict[str, Any]:
    topic = "scale-connections"
    for broker in (pafka, peer):
        create_topic(broker.bootstrap, topic, n["producers"], timeout_s=TOPICS_TIMEOUT_S)
    runs: dict[str, list[dict[str, Any]]] = {"pafka": [], "peer": []}
    for broker in alternate(pafka, peer, repeats):
        run = run_connections(broker, topic, n["idle"], n["producers"], n["records_each"])
        runs[broker.name].append(run)
        print(f"  {broker.name}: idle cost {run['idle_cost_mb']:.1f} MB, {run['records_per_s_without']:,.0f} -> "
              f"{run['records_per_s_with']:,.0f} rec/s", flush=True)
    out = {name: medians(r) | fresh[name] for name, r in runs.items()}
    rows = [[name, m["fresh_rss_mb"], m["fresh_idle_cost_mb"], m["rss_before_mb"], m["idle_cost_mb"],
             m["records_per_s_without"], m["records_per_s_with"], m["cpu_s_per_million_without"],
             m["cpu_s_per_million_with"], f"{fmt(m['idle_still_open'], 0)}/{n['idle']}"] for name, m in out.items()]
    print(f"\n### {n['idle']:,} idle connections + {n['producers']} active producers "
          f"({n['records_each']:,} x 100 B each)\n")
    print(table(["broker", "fresh RSS MB", "idle cost MB (fresh)", "RSS MB after load", "idle cost MB (after load)",
                 "records/s without idle", "records/s with idle", "CPU-s/M without", "CPU-s/M with",
                 "idle still open"], rows))
    print("\nTarget for pafka: idle cost < 50 MB, producers' throughput unchanged.")
    return out


def scenario_groups(pafka: BenchBroker, peer: BenchBroker, n: dict[str, Any], repeats: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"pafka": [], "peer": []}
    for broker in alternate(pafka, peer, repeats):
        run = run_groups(broker, n["groups"], n["group_partitions"], n["per_partition"], n["group_workers"])
        runs[broker.name].append(run)
        print(f"  {broker.name}: all {run['groups']} groups read in {run['all_read_s']:.1f} s, "
              f"{run['groups_ok']} ok", flush=True)
    out = {name: medians(r) for name, r in runs.items()}
    rows = [[name, m["all_read_s"], m["broker_cpu_s"], m["join_s_p50"], m["join_s_max"], m["read_s_max"],
             f"{fmt(m['groups_ok'], 0)}/{n['groups']}"] for name, m in out.items()]
    print(f"\n### {n['groups']} consumer groups on one topic ({n['group_partitions']} partitions x "
          f"{n['per_partition']:,} records of 100 B; {n['group_workers']} groups at a time)\n")
    print(table(["broker", "all groups done s", "broker CPU-s", "join p50 s", "join max s", "slowest group s",
                 "groups read all, in order"], rows))
    out["all_read_ratio"] = ratio(out["pafka"]["all_read_s"], out["peer"]["all_read_s"])
    return out


# -- pafka-only scenarios -----------------------------------------------------------------------
def scenario_segments(root: Path, n: dict[str, Any], repeats: int) -> dict[str, Any]:
    runs = []
    for i in range(repeats):
        broker = start_pafka(root / f"segments-{i}")
        try:
            runs.append(run_segments(broker, n["segment_records"], n["segments"], n["fetch_repeats"], str(i)))
        finally:
            broker.stop()
            shutil.rmtree(root / f"segments-{i}", ignore_errors=True)
        first, grown = runs[-1]["phases"]
        print(f"  run {i}: {first['records_per_s']:,.0f} rec/s at {first['segments']} segments, "
              f"{grown['records_per_s']:,.0f} at {grown['segments']}", flush=True)
    phases = [medians([r["phases"][k] for r in runs]) for k in (0, 1)]
    fetch = medians([r["fetch_ms"] for r in runs])
    print(f"\n### A log grown to {n['segments']} segments (pafka only: the peer has no segments; "
          f"segment.bytes 1 MiB, {n['segment_records']:,} records of 100 B per phase)\n")
    print(table(["phase", "segments at end", "records/s", "broker CPU-s / M"],
                [["first segments", phases[0]["segments"], phases[0]["records_per_s"],
                  phases[0]["cpu_s_per_million"]],
                 [f"after {n['segments']} segments", phases[1]["segments"], phases[1]["records_per_s"],
                  phases[1]["cpu_s_per_million"]]]))
    print()
    print(table(["1 MiB Fetch at", "median ms"], [[k, v] for k, v in fetch.items()]))
    return {"phases": phases, "fetch_ms": fetch,
            "throughput_ratio": ratio(phases[1]["records_per_s"], phases[0]["records_per_s"]),
            "cpu_ratio": ratio(phases[1]["cpu_s_per_million"], phases[0]["cpu_s_per_million"])}


def scenario_startup(root: Path, n: dict[str, Any], repeats: int, gb: float) -> dict[str, Any]:
    free = shutil.disk_usage(root).free
    if free < gb * 1.6e9 + 5e9:
        raise RuntimeError(f"{free / 1e9:.1f} GB free under {root}: not enough for {gb} GB of data")
    try:
        result = run_startup(root, int(gb * 1e9), 100, 10, repeats, n["write_timeout"],
                             on_phase=lambda m: print("  " + m, flush=True))
    finally:
        shutil.rmtree(root / "startup", ignore_errors=True)
    rows = []
    for name, label in (("clean", "after SIGTERM (clean)"), ("kill_after_clean", "SIGKILL, nothing unflushed"),
                        ("kill_some_unflushed", "SIGKILL, 1/10 of the data unflushed"),
                        ("kill_all_unflushed", "SIGKILL, all data unflushed")):
        m = medians(result["runs"][name])
        result[f"{name}_median"] = m
        rows.append([label, len(result["runs"][name]), f"{m.get('unflushed_bytes', 0) / 1e9:.3f}",
                     f"{m['scanned_bytes'] / 1e9:.3f}",
                     m["listening_s"], m["first_fetch_s"], m["rss_mb"]])
    print(f"\n### Start-up with 1,000 partitions and {result['written_bytes'] / 1e9:.2f} GB "
          f"(pafka only: the peer keeps no data across restarts)\n")
    print(table(["restart", "runs", "unflushed GB", "recovery scanned GB", "listening s", "first Metadata+Fetch s",
                 "RSS MB after start"], rows))
    print(f"\nWritten in {result['write_s']:.1f} s. Fresh broker: listening after "
          f"{result['fresh_listening_s']:.2f} s, idle RSS {result['fresh_idle_rss_mb']:.1f} MB (target <= 60 MB). "
          f"Target: clean start <= 3 s; after SIGKILL, scan only what was not flushed.")
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    n = sizes(args.quick)
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    fd_soft, fd_hard = raise_fd_limit()
    root = args.data_root or Path(tempfile.mkdtemp(prefix="pafka-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"## Scale benchmarks ({'quick' if args.quick else 'full'}, repeats {args.repeats}, "
          f"open files limit {fd_soft}/{fd_hard}, load average {os.getloadavg()[0]:.2f})\n", flush=True)
    results: dict[str, Any] = {"quick": args.quick, "repeats": args.repeats, "sizes": n}
    started = time.monotonic()
    try:
        client_scenarios = [s for s in wanted if s in ("partitions", "connections", "groups")]
        fresh = fresh_connection_costs(root, n, args.peer_launcher) if "connections" in wanted else {}
        if client_scenarios:
            pafka = start_pafka(root / "pafka")
            peer = start_peer(launcher=args.peer_launcher)
            try:
                for name in client_scenarios:
                    print(f"running {name} ...", flush=True)
                    if name == "connections":
                        results[name] = scenario_connections(pafka, peer, n, args.repeats, fresh)
                    else:
                        fn = {"partitions": scenario_partitions, "groups": scenario_groups}[name]
                        results[name] = fn(pafka, peer, n, args.repeats)
                    print(flush=True)
            finally:
                peer.stop()
                pafka.stop()
                shutil.rmtree(root / "pafka", ignore_errors=True)
        if "segments" in wanted:
            print("running segments ...", flush=True)
            results["segments"] = scenario_segments(root, n, args.repeats)
            print(flush=True)
        if "startup" in wanted:
            print("running startup ...", flush=True)
            results["startup"] = scenario_startup(root, n, args.repeats, args.startup_gb or n["startup_gb"])
    finally:
        if args.data_root is None:
            shutil.rmtree(root, ignore_errors=True)
    results["wall_s"] = time.monotonic() - started
    print(f"\n(total {results['wall_s']:.0f} s, load average {os.getloadavg()[0]:.2f})")
    print(json.dumps(results, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
