"""Transactions of pafka against the peer broker, with the confluent-kafka client.

    python benchmarks/suite/transactions.py [--quick] [--repeats 3] [--timeout 120]

First a probe per broker, outside every clock: InitProducerId with a transactional id, a
committed and an aborted transaction, then the partition's end offset (a broker that writes
control markers ends at 8: 5 committed records, the commit marker, 1 aborted record, the
abort marker) and what a read_committed consumer sees (the 5 committed records, never the
aborted one). A broker whose InitProducerId or EndTxn fails gets no transactional figures:
its cells stay empty and the probe's line says why.

Then, pafka and the peer alternately (A B A B A B), each run on a fresh topic (deleted
afterwards) and with a fresh ``transactional.id``:
- ``idempotent``: 1,000,000 x 100 B records (a tenth with ``--quick``), 6 partitions,
  acks=all, ``enable.idempotence=true``, produced as fast as the client goes (the same
  producer settings as client_throughput.py); the clock starts once the producer has its
  producer id (one record acknowledged on a warm-up topic);
- ``transactional``: the same records in transactions of 1,000 (begin, 1,000 produce()
  calls, commit_transaction()), one producer; the clock runs from the first
  begin_transaction() to the last commit returning (init_transactions() is timed apart).
  Records have no key, so librdkafka's sticky partitioner puts most of a transaction (produced
  in well under ``sticky.partitioning.linger.ms``) in one partition, as it batches the
  idempotent run's;
- both are read back by a read_committed consumer: every record exactly once, whole, in
  increasing order per partition, and nothing more within half a second, or the run is
  marked failed and left out of the medians;
- ``EndTxn latency``: single-partition transactions of 5 x 100 B records offered at 100
  transactions/s for 30 s (3 s with ``--quick``); each transaction's records are flushed
  (acknowledged) before commit_transaction() is called, so the commit's time from call to
  return is the EndTxn round trip alone. As in Kafka, EndTxn is answered once PrepareCommit
  is in the transaction log; the markers are written after. So a read_committed consumer in
  a thread notes when each transaction's records reach it: commit call -> PrepareCommit ->
  markers -> last stable offset -> fetch answered (``fetch.wait.max.ms=500``; pafka answers
  a waiting fetch as soon as the partition moves, the peer waits its poll out). It also
  catches a broker that lets a record through before its commit was asked for.
Broker CPU seconds come from ``/proc/<pid>/stat`` per phase (:class:`ResourceMeter`), and
are divided by the transactions committed in that phase. Prints markdown tables, then
one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import struct
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from benchmarks.suite.bench_brokers import BenchBroker, ResourceMeter, alternate, percentile, ratio
from benchmarks.suite.client_common import (
    OthersMeter,
    broker_pair,
    cell,
    compare_runs,
    delete_topic,
    human,
    log,
    markdown_table,
    recorded_run,
    results_table,
    runs_ok,
)
from benchmarks.suite.client_latency import FETCH_WAIT_MAX_MS, ReceiveThread
from benchmarks.suite.client_throughput import Scenario, build_values, consumer_config, produce_phase, producer_config, read_timed, verify
from testing.topics import create_topic

RECORDS = 1_000_000
RECORD_SIZE = 100
PARTITIONS = 6
RECORDS_PER_TXN = 1_000
#: After the expected records, how long the check waits for any record that should not be there.
EXTRA_WAIT_S = 0.5
PROBE_TIMEOUT_S = 15.0
TARGETS = {"txn_vs_idempotent": 0.8, "txn_vs_peer": 1.0, "commit_p50_ms": 2.0, "commit_p99_ms": 10.0}
TXN_TIMEOUT_MS = 60_000
LATENCY_RATE = 100  # transactions offered per second
LATENCY_SECONDS = 30.0
LATENCY_RECORDS_PER_TXN = 5
LATENCY_WARMUP_TXNS = 5
#: Transaction number (WARMUP for the warm-up ones), record number in the run.
STAMP = struct.Struct(">II")
WARMUP = 0xFFFFFFFF
LATENCY_KEYS = ["achieved_txn_s", "commit_p50_ms", "commit_p99_ms", "commit_max_ms", "txn_p50_ms", "txn_p99_ms",
                "visible_p50_ms", "visible_p99_ms", "cpu_ms_per_txn", "other_cpu_s"]
THROUGHPUT_KEYS = ["produce_msgs_s", "produce_MB_s", "produce_cpu_s", "cpu_ms_per_txn", "consume_msgs_s", "init_s",
                   "other_cpu_s"]


def throughput_scenarios(quick: bool) -> list[tuple[Scenario, int | None]]:
    """(records and topic shape, records per transaction or None for idempotent produce)."""
    base = Scenario("idempotent", RECORDS // (10 if quick else 1), RECORD_SIZE, PARTITIONS, idempotent=True)
    return [(base, None), (Scenario("transactional (1,000 per txn)", base.records, RECORD_SIZE, PARTITIONS,
                                    idempotent=True), RECORDS_PER_TXN)]


def transactional_producer(config: dict) -> Producer:
    """A producer with a transactional id of its own, so every run starts a fresh producer id.
    librdkafka refuses a ``message.timeout.ms`` above the transaction timeout."""
    return Producer({**config, "transactional.id": "txn-bench-" + uuid.uuid4().hex,
                     "transaction.timeout.ms": TXN_TIMEOUT_MS, "message.timeout.ms": TXN_TIMEOUT_MS})


# -- probe ----------------------------------------------------------------------------------------

def probe(broker: BenchBroker) -> dict:
    """Whether ``broker`` runs transactions at all, and whether read_committed hides an abort."""
    topic = "txn-probe-" + uuid.uuid4().hex[:12]
    found: dict = {"broker": broker.name, "supported": False}
    step = "create topic"
    try:
        create_topic(broker.bootstrap, topic, 1)
        producer = transactional_producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        step = "InitProducerId"
        started = time.perf_counter()
        producer.init_transactions(PROBE_TIMEOUT_S)
        found["init_s"] = round(time.perf_counter() - started, 3)
        step = "commit (EndTxn)"
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, b"committed-%d" % i)
        producer.commit_transaction(PROBE_TIMEOUT_S)
        step = "abort (EndTxn)"
        producer.begin_transaction()
        producer.produce(topic, b"aborted")
        producer.flush(PROBE_TIMEOUT_S)
        producer.abort_transaction(PROBE_TIMEOUT_S)
        found["supported"] = True
        step = "read back"
        found.update(_probe_read(broker, topic))
    except Exception as exc:  # whatever the broker refused is the probe's finding, never a crash
        found["error"] = f"{step}: {type(exc).__name__}: {exc}"
    finally:
        found["delete_error"] = delete_topic(broker, topic)
    found["verdict"] = _verdict(found)
    return found


def _probe_read(broker: BenchBroker, topic: str) -> dict:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txn-probe-" + uuid.uuid4().hex,
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "fetch.wait.max.ms": 100})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=PROBE_TIMEOUT_S)
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:  # 3 s: long enough for any broker's fetch wait
            values += [m.value() for m in consumer.consume(num_messages=100, timeout=0.2) if m.error() is None]
    finally:
        consumer.close()
    committed = [b"committed-%d" % i for i in range(5)]
    return {"end_offset": high - low, "markers_written": high - low == 8,
            "committed_seen": [v for v in values if v != b"aborted"] == committed,
            "aborted_visible": b"aborted" in values}


def _verdict(found: dict) -> str:
    if not found["supported"]:
        return f"transactions not supported ({found.get('error')})"
    if "committed_seen" not in found:
        return f"transactions accepted, read back failed ({found.get('error')})"
    faults = []
    if not found["markers_written"]:
        faults.append(f"no control markers (end offset {found['end_offset']}, 8 expected)")
    if found["aborted_visible"]:
        faults.append("an aborted record is visible to read_committed")
    if not found["committed_seen"]:
        faults.append("read_committed did not return exactly the committed records")
    return "transactions work" if not faults else "transactions accepted, but " + "; ".join(faults)


# -- throughput -----------------------------------------------------------------------------------

def transactional_phase(broker: BenchBroker, s: Scenario, topic: str, values: list[bytes], per_txn: int,
                        timeout_s: float) -> dict:
    """Produce ``values`` in transactions of ``per_txn`` records; the clock starts after init_transactions()."""
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(str(err))

    producer = transactional_producer(producer_config(broker, s, on_delivery))
    deadline = time.monotonic() + timeout_s
    started = time.perf_counter()
    producer.init_transactions(timeout_s)
    init_s = time.perf_counter() - started
    produce, begin, commit = producer.produce, producer.begin_transaction, producer.commit_transaction
    committed = sent = 0
    failure = None
    with ResourceMeter(broker) as meter:
        try:
            for start in range(0, len(values), per_txn):
                if time.monotonic() > deadline:
                    failure = "timed out"
                    break
                chunk = values[start:start + per_txn]
                begin()
                for value in chunk:
                    produce(topic, value)
                commit(max(1.0, deadline - time.monotonic()))
                committed += 1
                sent += len(chunk)
        except KafkaException as exc:
            failure = f"{type(exc).__name__}: {exc}"
            _abort_quietly(producer)
    return {"produce_s": meter.wall_s, "produce_cpu_s": meter.cpu_s, "produce_rss_mb": meter.peak_rss_mb,
            "init_s": init_s, "sent": sent, "acked": sent, "committed_txns": committed,
            "produce_errors": len(errors), "first_produce_error": errors[0] if errors else None,
            "txn_failure": failure, "produce_msgs_s": sent / meter.wall_s,
            "produce_MB_s": sent * s.size / meter.wall_s / 1e6,
            "cpu_ms_per_txn": meter.cpu_s * 1000 / committed if committed else None}


def _abort_quietly(producer: Producer) -> None:
    try:
        producer.abort_transaction(PROBE_TIMEOUT_S)
    except KafkaException:
        pass  # the run is already marked failed; the broker's timeout ends the transaction


def read_back(broker: BenchBroker, s: Scenario, topic: str, expected: int, timeout_s: float) -> tuple[dict, list]:
    """read_committed from offset 0: ``expected`` records, then any that should not be there."""
    consumer = Consumer({**consumer_config(broker, s), "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(s.partitions)])
        read = read_timed(consumer, expected, s.size, timeout_s)
        extra = [m for m in consumer.consume(num_messages=1000, timeout=EXTRA_WAIT_S) if m.error() is None]
    finally:
        consumer.close()
    elapsed = read.elapsed
    return {"consume_msgs_s": read.timed / elapsed if elapsed else None, "extra": len(extra)}, read.kept + extra


def judge(result: dict, broker: BenchBroker, keys: Sequence[str]) -> None:
    """``ok`` unless one of ``keys`` is set (an error count, a failure); ``error`` names them."""
    problems = [key for key in keys if result.get(key)]
    result["ok"] = not problems
    if problems:
        result["error"] = f"{broker.name}: " + ", ".join(f"{key}={result[key]}" for key in problems)


def run_throughput(broker: BenchBroker, s: Scenario, per_txn: int | None, values: list[bytes], warmup_topic: str,
                   timeout_s: float) -> dict:
    topic = "txn-" + uuid.uuid4().hex[:12]
    result: dict = {"broker": broker.name, "scenario": s.name, "topic": topic}
    with recorded_run(broker, topic, result):
        create_topic(broker.bootstrap, topic, s.partitions)
        with OthersMeter(broker) as others:
            if per_txn is None:
                result.update(produce_phase(broker, s, topic, values, timeout_s, warmup_topic))
            else:
                result.update(transactional_phase(broker, s, topic, values, per_txn, timeout_s))
            consumed, messages = read_back(broker, s, topic, result["acked"], timeout_s)
        result.update(consumed, other_cpu_s=others.other_cpu_s)
        result.update(verify(messages, len(values), s.size))
        del messages
        judge(result, broker, ("produce_errors", "unflushed", "txn_failure", "missing", "duplicated", "out_of_order",
                               "malformed", "consume_errors", "extra"))
    return result


# -- EndTxn latency -------------------------------------------------------------------------------

@dataclass(frozen=True)
class LatencyScenario:
    name: str
    rate: int
    seconds: float
    records_per_txn: int

    @property
    def transactions(self) -> int:
        return int(self.rate * self.seconds)


def latency_scenario(quick: bool) -> LatencyScenario:
    return LatencyScenario(f"EndTxn latency, {LATENCY_RATE} txn/s", LATENCY_RATE,
                           LATENCY_SECONDS / (10 if quick else 1), LATENCY_RECORDS_PER_TXN)


class VisibilityThread(ReceiveThread):
    """A read_committed consumer noting when each transaction's first record reaches it."""

    def __init__(self, broker: BenchBroker, topic: str, transactions: int) -> None:
        super().__init__(broker, topic, {"isolation.level": "read_committed"})
        self.arrived_ns = [0] * transactions
        self.records = 0
        self.duplicated = self.out_of_order = 0
        self._seen: set[int] = set()
        self._last = -1

    def note(self, value: bytes, now_ns: int) -> None:
        txn, seq = STAMP.unpack_from(value)
        if txn == WARMUP:
            self.warmups += 1
            return
        self.records += 1
        if seq in self._seen:
            self.duplicated += 1
        self._seen.add(seq)
        if seq <= self._last:
            self.out_of_order += 1
        self._last = seq
        if not self.arrived_ns[txn]:
            self.arrived_ns[txn] = now_ns

    def received(self) -> int:
        return self.records + self.errors


def quantiles_ms(values_ns: list[int], prefix: str) -> dict[str, float | None]:
    ordered = sorted(values_ns)
    found = {f"{prefix}_p{p}_ms": percentile(ordered, p) for p in (50, 99)}
    found[f"{prefix}_max_ms"] = ordered[-1] if ordered else None
    return {key: value / 1e6 if value is not None else None for key, value in found.items()}


def paced_transactions(producer: Producer, topic: str, s: LatencyScenario, timeout_s: float) -> dict:
    """Offer ``s.rate`` transactions/s; per transaction, commit call to return and begin to return."""
    pad = bytes(RECORD_SIZE - STAMP.size)
    produce, pack, clock = producer.produce, STAMP.pack, time.perf_counter_ns
    commit_call_ns = [0] * s.transactions
    commit_ns: list[int] = []
    txn_ns: list[int] = []
    late = 0
    start = clock()
    for txn in range(s.transactions):
        wait_ns = start + txn * 1_000_000_000 // s.rate - clock()
        if wait_ns > 0:
            time.sleep(wait_ns / 1e9)
        elif wait_ns < -5_000_000:
            late += 1  # began over 5 ms after its time: the client fell behind the offered rate
        began = clock()
        producer.begin_transaction()
        for i in range(s.records_per_txn):
            produce(topic, pack(txn, txn * s.records_per_txn + i) + pad)
        if producer.flush(timeout_s):
            raise RuntimeError(f"transaction {txn}: records not acknowledged in {timeout_s} s")
        commit_call_ns[txn] = called = clock()
        producer.commit_transaction(timeout_s)
        done = clock()
        commit_ns.append(done - called)
        txn_ns.append(done - began)
    return {"commit_call_ns": commit_call_ns, "commit_ns": commit_ns, "txn_ns": txn_ns, "late_txns": late,
            "elapsed_s": (clock() - start) / 1e9}


def run_latency(broker: BenchBroker, s: LatencyScenario, timeout_s: float) -> dict:
    topic = "txn-lat-" + uuid.uuid4().hex[:12]
    result: dict = {"broker": broker.name, "scenario": s.name, "topic": topic}
    with recorded_run(broker, topic, result):
        create_topic(broker.bootstrap, topic, 1)
        receiver = VisibilityThread(broker, topic, s.transactions)
        receiver.start()
        try:
            result.update(timed_transactions(broker, topic, s, receiver, timeout_s))
        finally:
            receiver.stop.set()
            receiver.join(10.0)
        judge(result, broker, ("missing", "duplicated", "out_of_order", "consume_errors", "visible_before_commit"))
    return result


def timed_transactions(broker: BenchBroker, topic: str, s: LatencyScenario, receiver: VisibilityThread,
                       timeout_s: float) -> dict:
    """Warm up (connections, AddPartitionsToTxn, a fetch in flight), then the paced transactions."""
    producer = transactional_producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    producer.init_transactions(timeout_s)
    pad = bytes(RECORD_SIZE - STAMP.size)
    for _ in range(LATENCY_WARMUP_TXNS):
        producer.begin_transaction()
        producer.produce(topic, STAMP.pack(WARMUP, 0) + pad)
        producer.commit_transaction(timeout_s)
    if not receiver.wait_for(LATENCY_WARMUP_TXNS, 15.0, warmup=True):
        raise RuntimeError("warm-up transactions did not reach the read_committed consumer in 15 s")
    with ResourceMeter(broker) as meter, OthersMeter(broker) as others:
        paced = paced_transactions(producer, topic, s, timeout_s)
    receiver.wait_for(s.transactions * s.records_per_txn, 10.0 + FETCH_WAIT_MAX_MS / 1000)
    calls, arrived = paced["commit_call_ns"], receiver.arrived_ns
    visible = [arrived[t] - calls[t] for t in range(s.transactions) if arrived[t]]
    return {
        "transactions": s.transactions, "achieved_txn_s": s.transactions / paced["elapsed_s"],
        "late_txns": paced["late_txns"], "cpu_s": meter.cpu_s, "cpu_ms_per_txn": meter.cpu_s * 1000 / s.transactions,
        "other_cpu_s": others.other_cpu_s, "received": receiver.records,
        "missing": s.transactions * s.records_per_txn - receiver.records,
        "duplicated": receiver.duplicated, "out_of_order": receiver.out_of_order, "consume_errors": receiver.errors,
        # a record reaching read_committed before its commit was even asked for: no isolation
        "visible_before_commit": sum(1 for v in visible if v < 0),
        **quantiles_ms(paced["commit_ns"], "commit"), **quantiles_ms(paced["txn_ns"], "txn"),
        **quantiles_ms(visible, "visible"),
    }


# -- report ---------------------------------------------------------------------------------------

def fmt_ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def throughput_table(results: list[dict]) -> str:
    header = ["scenario", "records", "produce msg/s", "produce MB/s", "broker CPU-s produce", "CPU ms per committed txn",
              "read_committed consume msg/s", "init_transactions s", "other jobs CPU-s", "runs ok"]
    rows = [[r["scenario"]["name"], f"{r['scenario']['records']:,}", *(cell(r, k) for k in THROUGHPUT_KEYS), runs_ok(r)]
            for r in results]
    return results_table(header, rows, "Cells: pafka / peer (**pafka/peer**); medians of the runs that passed"
                         " verification.", results)


def latency_table(results: list[dict]) -> str:
    header = ["scenario", "achieved txn/s", "commit p50 ms", "commit p99 ms", "commit max ms", "txn p50 ms",
              "txn p99 ms", "commit → visible p50 ms", "commit → visible p99 ms", "broker CPU ms per txn",
              "other jobs CPU-s", "runs ok"]
    rows = [[r["scenario"]["name"], *(cell(r, k, fmt_ms if k.endswith("_ms") else human) for k in LATENCY_KEYS),
             runs_ok(r)] for r in results]
    return results_table(header, rows, "commit: commit_transaction() call to return (the EndTxn round trip, records"
                         " already acknowledged); txn: begin_transaction() to commit return; visible: commit call to"
                         " the read_committed consumer receiving the transaction's first record. Broker CPU includes serving that"
                         " consumer's fetches.", results)


def targets(throughput: list[dict], latency: dict) -> dict:
    idem, txn = throughput[0], throughput[1]
    rate = "produce_msgs_s"
    per_txn = txn["scenario"]["records"] // RECORDS_PER_TXN
    extra = {name: (txn[name]["produce_cpu_s"] - idem[name]["produce_cpu_s"]) * 1000 / per_txn
             if txn[name]["produce_cpu_s"] is not None and idem[name]["produce_cpu_s"] is not None else None
             for name in ("pafka", "peer")}
    return {
        "txn_vs_idempotent": {name: ratio(txn[name][rate], idem[name][rate]) for name in ("pafka", "peer")},
        "txn_vs_peer": ratio(txn["pafka"][rate], txn["peer"][rate]),
        "commit_p50_ms": {name: latency[name]["commit_p50_ms"] for name in ("pafka", "peer")},
        "commit_p99_ms": {name: latency[name]["commit_p99_ms"] for name in ("pafka", "peer")},
        "cpu_ms_per_txn_1000": {name: txn[name]["cpu_ms_per_txn"] for name in ("pafka", "peer")},
        "cpu_ms_per_txn_over_idempotent": extra,
        "cpu_ms_per_txn_small": {name: latency[name]["cpu_ms_per_txn"] for name in ("pafka", "peer")},
    }


def holds(value: float | None, target: float, at_most: bool = False) -> str:
    if value is None:
        return "—"
    return "yes" if (value <= target if at_most else value >= target) else "**no**"


def targets_table(t: dict, probes: dict) -> str:
    peer_has_txns = probes["peer"]["supported"]

    def pair(values: dict, fmt=fmt_ms) -> str:
        return f"{fmt(values['pafka'])} / {fmt(values['peer']) if peer_has_txns else 'no transactions'}"

    ratio_fmt = fmt_ms
    rows = [
        ["transactional ≥ 0.8 × idempotent (same broker)", pair(t["txn_vs_idempotent"], ratio_fmt),
         holds(t["txn_vs_idempotent"]["pafka"], TARGETS["txn_vs_idempotent"])],
        ["pafka transactional ≥ peer transactional", ratio_fmt(t["txn_vs_peer"]),
         holds(t["txn_vs_peer"], TARGETS["txn_vs_peer"])],
        ["EndTxn p50 ≤ 2 ms", pair(t["commit_p50_ms"]), holds(t["commit_p50_ms"]["pafka"], TARGETS["commit_p50_ms"], at_most=True)],
        ["EndTxn p99 ≤ 10 ms", pair(t["commit_p99_ms"]), holds(t["commit_p99_ms"]["pafka"], TARGETS["commit_p99_ms"], at_most=True)],
        ["broker CPU ms per committed txn, 1,000 × 100 B", pair(t["cpu_ms_per_txn_1000"]), "reported"],
        ["… beyond idempotent produce of the same records", pair(t["cpu_ms_per_txn_over_idempotent"]), "reported"],
        ["broker CPU ms per committed txn, 5 × 100 B at 100 txn/s", pair(t["cpu_ms_per_txn_small"]), "reported"],
    ]
    return markdown_table(["target", "pafka / peer", "pafka holds"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the records and of the latency run, one repeat")
    parser.add_argument("--repeats", type=int, default=None, help="runs per broker (default 3, quick 1)")
    parser.add_argument("--timeout", type=float, default=120.0, help="bound per phase, seconds")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    started = time.monotonic()
    gc.disable()  # the timed loops make millions of short-lived objects
    with broker_pair() as (pafka, peer):
        probes = {broker.name: probe(broker) for broker in (pafka, peer)}
        for found in probes.values():
            log(f"probe {found['broker']}: {found['verdict']}")
        chosen = throughput_scenarios(args.quick)
        values = build_values(chosen[0][0].records, RECORD_SIZE)
        runs: dict[str, list[dict]] = {s.name: [] for s, _ in chosen}
        warmup_topic = "txn-warmup-" + uuid.uuid4().hex[:12]
        for broker in (pafka, peer):
            create_topic(broker.bootstrap, warmup_topic, 1)
        for broker in alternate(pafka, peer, repeats):
            for s, per_txn in chosen:
                if per_txn is not None and not probes[broker.name]["supported"]:
                    continue  # no figure for a broker without transactions; the probe line says why
                run = run_throughput(broker, s, per_txn, values, warmup_topic, args.timeout)
                log(f"{s.name} {broker.name}: ok={run['ok']} produce={human(run.get('produce_msgs_s'))}/s "
                    f"cpu={run.get('produce_cpu_s')} {run.get('error') or ''}")
                runs[s.name].append(run)
        del values
        throughput = [{"scenario": asdict(s), "records_per_txn": per_txn, **compare_runs(runs[s.name], THROUGHPUT_KEYS),
                       "runs": runs[s.name]} for s, per_txn in chosen]
        ls = latency_scenario(args.quick)
        latency_runs = []
        for broker in alternate(pafka, peer, repeats):
            if not probes[broker.name]["supported"]:
                continue
            run = run_latency(broker, ls, args.timeout)
            log(f"{ls.name} {broker.name}: ok={run.get('ok')} commit p50={fmt_ms(run.get('commit_p50_ms'))} "
                f"p99={fmt_ms(run.get('commit_p99_ms'))} ms {run.get('error') or ''}")
            latency_runs.append(run)
        latency = {"scenario": asdict(ls), **compare_runs(latency_runs, LATENCY_KEYS), "runs": latency_runs}
    summary = targets(throughput, latency)
    print(f"## Transactions (confluent-kafka), {repeats} run(s) per broker\n")
    for found in probes.values():
        print(f"- {found['broker']}: {found['verdict']}")
    print("\n### Targets\n")
    print(targets_table(summary, probes))
    print("\n### Throughput\n")
    print(throughput_table(throughput))
    print("\n### EndTxn latency\n")
    print(latency_table([latency]))
    print(json.dumps({"part": "transactions", "repeats": repeats, "quick": args.quick,
                      "wall_s": round(time.monotonic() - started, 1), "probe": probes, "targets": summary,
                      "throughput": throughput, "latency": latency}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
