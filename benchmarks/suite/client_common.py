"""Shared pieces of the confluent-kafka client benchmarks (throughput and latency).

Both client benchmarks start one pafka and one peer broker for the whole run
(:func:`broker_pair`), drive them alternately with the same client settings, and print
markdown tables of medians with the pafka/peer ratio (:func:`comparison_table`).
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from benchmarks.suite.bench_brokers import DEFAULT_PEER_LAUNCHER, BenchBroker, median, ratio, start_pafka, start_peer

ADMIN_TIMEOUT_S = 30.0


@contextmanager
def broker_pair(overrides: Sequence[str] = ()) -> Iterator[tuple[BenchBroker, BenchBroker]]:
    """One long-lived pafka (fresh data dir) and one peer; both stopped, pafka's dir removed."""
    root = Path(tempfile.mkdtemp(prefix="pafka-client-bench-"))
    pafka = peer = None
    try:
        pafka = start_pafka(root / "data", overrides=overrides, log_path=root / "pafka.log")
        peer = start_peer(launcher=DEFAULT_PEER_LAUNCHER)
        yield pafka, peer
    finally:
        if peer is not None:
            peer.stop()
        if pafka is not None:
            pafka.stop()
        shutil.rmtree(root, ignore_errors=True)


def delete_topic(broker: BenchBroker, topic: str) -> str | None:
    """Delete a finished run's topic so neither broker carries earlier runs' data; returns
    the error text if the broker refused (reported, not raised: the figures are taken).
    The admin client exists only for this, so its threads never run in a timed phase."""
    admin = AdminClient({"bootstrap.servers": broker.admin_bootstrap or broker.bootstrap})
    try:
        admin.delete_topics([topic], operation_timeout=ADMIN_TIMEOUT_S,
                            request_timeout=ADMIN_TIMEOUT_S)[topic].result(ADMIN_TIMEOUT_S)
        return None
    except KafkaException as exc:
        return str(exc)


@contextmanager
def recorded_run(broker: BenchBroker, topic: str, result: dict) -> Iterator[None]:
    """Around one run on its own ``topic``: an exception is recorded in ``result`` (``ok``
    False, ``error``) rather than raised, so one refused scenario never ends the benchmark;
    the topic is deleted whatever happened."""
    try:
        yield
    except Exception as exc:
        result.update(ok=False, error=f"{broker.name}: {type(exc).__name__}: {exc}")
    finally:
        gc.collect()
        result["delete_error"] = delete_topic(broker, topic)


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine so far (all cores, /proc/stat)."""
    with open("/proc/stat") as stat:
        ticks = [int(x) for x in stat.readline().split()[1:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait


class CpuMeasured(Protocol):
    """A broker, or several (a cluster), whose CPU seconds so far can be read."""

    def cpu_seconds(self) -> float: ...


class OthersMeter:
    """CPU seconds that neither the broker(s) nor this process used during a ``with`` block:
    the other jobs on this shared machine, a noise figure printed beside the results."""

    def __init__(self, broker: CpuMeasured) -> None:
        self.broker = broker
        self.other_cpu_s = 0.0

    def __enter__(self) -> OthersMeter:
        self._machine0, self._own0 = machine_busy_s(), time.process_time()
        self._broker0 = self.broker.cpu_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        machine = machine_busy_s() - self._machine0
        own = time.process_time() - self._own0
        self.other_cpu_s = max(0.0, machine - own - (self.broker.cpu_seconds() - self._broker0))


def medians(runs: Sequence[dict], keys: Sequence[str]) -> dict[str, float | None]:
    """Median of each key over the runs that passed (``ok``); failed runs never count."""
    good = [run for run in runs if run.get("ok")]
    return {key: median([run.get(key) for run in good]) for key in keys}


def compare(pafka_runs: Sequence[dict], peer_runs: Sequence[dict],
            keys: Sequence[str]) -> dict[str, object]:
    """Medians per broker, the pafka/peer ratio per key, and how many runs passed."""
    a, b = medians(pafka_runs, keys), medians(peer_runs, keys)
    return {
        "pafka": a, "peer": b, "ratio": {key: ratio(a[key], b[key]) for key in keys},
        "pafka_ok": sum(1 for r in pafka_runs if r.get("ok")), "pafka_runs": len(pafka_runs),
        "peer_ok": sum(1 for r in peer_runs if r.get("ok")), "peer_runs": len(peer_runs),
        "failures": [r.get("error") for r in list(pafka_runs) + list(peer_runs) if not r.get("ok")],
    }


def human(value: float | None, unit: str = "") -> str:
    """Short figure for a table cell: 1.23M, 456k, 7.8, 0.12."""
    if value is None:
        return "—"
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}{unit}"
    return f"{value:.3g}{unit}" if abs(value) >= 0.01 else f"{value:.2g}{unit}"


def cell(result: dict, key: str, fmt: Callable[[float | None], str] = human) -> str:
    """``pafka / peer (ratio)`` for one key of a :func:`compare` result."""
    r = result["ratio"][key]
    pair = f"{fmt(result['pafka'][key])} / {fmt(result['peer'][key])}"
    if r is None:
        return pair
    return f"{pair} (**{r:.2f}**)" if r >= 0.01 else f"{pair} (**<0.01**)"


def compare_runs(runs: Sequence[dict], keys: Sequence[str]) -> dict[str, object]:
    """:func:`compare` of one scenario's runs, split by the broker that ran them."""
    return compare([r for r in runs if r["broker"] == "pafka"], [r for r in runs if r["broker"] == "peer"], keys)


def runs_ok(result: dict) -> str:
    """``passed/runs`` of pafka, then of the peer."""
    return f"{result['pafka_ok']}/{result['pafka_runs']} · {result['peer_ok']}/{result['peer_runs']}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def results_table(header: Sequence[str], rows: Sequence[Sequence[str]], note: str,
                  results: Sequence[dict]) -> str:
    """The table, a note on how to read it, and one line per failed run."""
    lines = [markdown_table(header, rows), "", note]
    lines += [f"- FAILED {r['scenario']['name']}: {failure}" for r in results for failure in r["failures"]]
    return "\n".join(lines)


def log(*parts: object) -> None:
    """Progress to stderr: stdout carries only the tables and the final JSON line."""
    print(*parts, file=sys.stderr, flush=True)
