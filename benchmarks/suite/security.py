"""Throughput over TLS and SASL_SSL against PLAINTEXT: one pafka, three listeners, one run.

    python benchmarks/suite/security.py [--quick] [--repeats 3] [--only 1MiB]

One pafka broker serves PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-256, a user created with
AlterUserScramCredentials) from the same data; confluent-kafka produces and consumes the
same records through each listener in turn, and through the peer broker's PLAINTEXT
listener (the peer, Tansu 0.6, cannot serve TLS here: its ``broker`` command refuses
``--cert`` together with ``--key``, and a combined PEM fails every handshake; its SASL
has no way to create a user from the command line). The order rotates each repeat (A B C
D, then A B C D ...) so machine noise hits all alike; every run's records are verified
(exactly once, in order) with ``client_throughput``'s checks.

Besides the clients' rates, the broker's CPU seconds per phase give its own cost: "consume
MB per broker CPU-s" is the rate one broker core could serve if the client were free,
the broker-side ceiling over TLS (records copied through the TLS transport; there is no
kTLS, so no sendfile) against PLAINTEXT (sendfile).
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from benchmarks.suite.bench_brokers import DEFAULT_PEER_LAUNCHER, BenchBroker, median, start_pafka, start_peer
from benchmarks.suite.client_common import log, markdown_table
from benchmarks.suite.client_throughput import Scenario, build_values, run_once
from client.admin import AdminClient
from client.client import KafkaClient
from client.scram import ScramMechanism
from pytest_pafka.ports import free_port
from pytest_pafka.tls import TlsCertificates

HOST = "127.0.0.1"
USER, PASSWORD = "bench", "bench-secret"
KEYS = ("produce_MB_s", "consume_MB_s", "produce_cpu_s", "consume_cpu_s")


def scenarios(quick: bool) -> list[Scenario]:
    scale = 10 if quick else 1
    base = Scenario("p6 1KiB acks=all", 300_000 // scale, size=1024)
    return [base, replace(base, name="p1 1MiB acks=all", records=1000 // scale, size=1024 * 1024, partitions=1)]


@contextmanager
def secured_pafka(root: Path) -> Iterator[list[BenchBroker]]:
    """pafka with PLAINTEXT, SSL and SASL_SSL listeners: one BenchBroker per listener (same PID)."""
    certs = TlsCertificates.create(root / "certs")
    plain, tls, sasl = free_port(), free_port(), free_port()
    pafka = start_pafka(root / "data", port=plain, log_path=root / "pafka.log", overrides=[
        f"listeners=PLAINTEXT://{HOST}:{plain},SSL://{HOST}:{tls},SASL_SSL://{HOST}:{sasl}",
        "sasl.enabled.mechanisms=SCRAM-SHA-256", *certs.broker_overrides()])
    try:
        with KafkaClient(pafka.bootstrap) as client:
            AdminClient(client).alter_user_scram_credentials([(USER, ScramMechanism.SCRAM_SHA_256, PASSWORD, 4096)])
        tls_config = {"ssl.ca.location": str(certs.ca)}
        yield [
            replace(pafka, name="pafka PLAINTEXT"),
            replace(pafka, name="pafka SSL", port=tls, launcher=None, admin_bootstrap=pafka.bootstrap,
                    client_config={"security.protocol": "SSL", **tls_config}),
            replace(pafka, name="pafka SASL_SSL", port=sasl, launcher=None, admin_bootstrap=pafka.bootstrap,
                    client_config={"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-256",
                                   "sasl.username": USER, "sasl.password": PASSWORD, **tls_config}),
        ]
    finally:
        pafka.stop()


def rotations(brokers: list[BenchBroker], repeats: int) -> Iterator[BenchBroker]:
    for _ in range(repeats):
        yield from brokers


def summary(runs: list[dict], name: str, size: int) -> dict[str, float | None]:
    ok = [r for r in runs if r["broker"] == name and r.get("ok")]
    figures = {key: median([r.get(key) for r in ok]) for key in KEYS}
    ceilings = [r["acked"] * size / r["consume_cpu_s"] / 1e6 for r in ok if r.get("consume_cpu_s")]
    figures["consume_MB_per_broker_cpu_s"] = median(ceilings)
    figures["runs_ok"] = len(ok)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the records, one repeat")
    parser.add_argument("--repeats", type=int, default=None, help="runs per listener (default 3, quick 1)")
    parser.add_argument("--only", default=None, help="comma-separated scenario names (substring match)")
    parser.add_argument("--timeout", type=float, default=180.0, help="bound per phase, seconds")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    chosen = [s for s in scenarios(args.quick)
              if not args.only or any(w.strip() in s.name for w in args.only.split(","))]
    root = Path(tempfile.mkdtemp(prefix="pafka-security-bench-"))
    started = time.monotonic()
    results = []
    gc.disable()  # the timed loops make millions of short-lived objects
    try:
        with secured_pafka(root) as listeners, start_peer(launcher=DEFAULT_PEER_LAUNCHER) as peer:
            brokers = [*listeners, replace(peer, name="peer PLAINTEXT")]
            for s in chosen:
                values = build_values(s.records, s.size)
                runs = []
                for broker in rotations(brokers, repeats):
                    run = run_once(broker, s, values, args.timeout)
                    run["broker"] = broker.name
                    log(f"{s.name} {broker.name}: ok={run['ok']} produce={run.get('produce_MB_s')} MB/s "
                        f"consume={run.get('consume_MB_s')} MB/s cpu={run.get('produce_cpu_s')}"
                        f"/{run.get('consume_cpu_s')} {run.get('error') or ''}")
                    runs.append(run)
                del values
                gc.collect()
                results.append({"scenario": asdict(s), "runs": runs,
                                "medians": {b.name: summary(runs, b.name, s.size) for b in brokers}})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    header = ["scenario", "listener", "produce MB/s", "consume MB/s", "broker CPU-s produce",
              "broker CPU-s consume", "consume MB per broker CPU-s", "runs ok"]
    rows = []
    for result in results:
        for name, m in result["medians"].items():
            rows.append([result["scenario"]["name"], name, *(_fmt(m[k]) for k in KEYS),
                         _fmt(m["consume_MB_per_broker_cpu_s"]), f"{m['runs_ok']}/{repeats}"])
    print(f"## Throughput over TLS and SASL_SSL (confluent-kafka), {repeats} run(s) per listener\n")
    print(markdown_table(header, rows))
    print(json.dumps({"part": "security", "repeats": repeats, "quick": args.quick,
                      "wall_s": round(time.monotonic() - started, 1), "scenarios": results}, default=str))
    return 0


def _fmt(value: float | int | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 10 else f"{value:,.1f}"
    return str(value)


if __name__ == "__main__":
    raise SystemExit(main())
