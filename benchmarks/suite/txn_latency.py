"""EndTxn latency for transactions.py: paced single-partition transactions, one client.

Transactions of a few records are offered at a fixed rate; each one's records are flushed
(acknowledged) before commit_transaction() is called, so the commit's time from call to
return is the EndTxn round trip alone. A read_committed consumer in a thread notes when each
transaction's first record reaches it, which also shows a broker letting a record through
before its commit was asked for.
"""

from __future__ import annotations

import gc
import struct
import threading
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.suite.bench_brokers import BenchBroker, ResourceMeter, percentile
from benchmarks.suite.client_common import OthersMeter, delete_topic
from testing.topics import create_topic

RECORD_SIZE = 100
TXN_TIMEOUT_MS = 60_000
LATENCY_RATE = 100  # transactions offered per second
LATENCY_SECONDS = 30.0
LATENCY_RECORDS_PER_TXN = 5
LATENCY_WARMUP_TXNS = 5
FETCH_WAIT_MAX_MS = 500
#: Transaction number (WARMUP for the warm-up ones), record number in the run.
STAMP = struct.Struct(">II")
WARMUP = 0xFFFFFFFF
LATENCY_KEYS = ["achieved_txn_s", "commit_p50_ms", "commit_p99_ms", "commit_max_ms", "txn_p50_ms", "txn_p99_ms",
                "visible_p50_ms", "visible_p99_ms", "cpu_ms_per_txn", "other_cpu_s"]


def transactional_producer(config: dict) -> Producer:
    """A producer with a transactional id of its own, so every run starts a fresh producer id.
    librdkafka refuses a ``message.timeout.ms`` above the transaction timeout."""
    return Producer({**config, "transactional.id": "txn-bench-" + uuid.uuid4().hex,
                     "transaction.timeout.ms": TXN_TIMEOUT_MS, "message.timeout.ms": TXN_TIMEOUT_MS})


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


class VisibilityThread(threading.Thread):
    """A read_committed consumer noting when each transaction's first record reaches it."""

    def __init__(self, broker: BenchBroker, topic: str, transactions: int) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": broker.bootstrap, "group.id": "txn-lat-" + uuid.uuid4().hex,
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "fetch.wait.max.ms": FETCH_WAIT_MAX_MS})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.stop = threading.Event()
        self.arrived_ns = [0] * transactions
        self.records = 0
        self.warmups = 0
        self.duplicated = self.out_of_order = self.errors = 0
        self._seen: set[int] = set()
        self._last = -1

    def run(self) -> None:
        poll, consume = self.consumer.poll, self.consumer.consume
        while not self.stop.is_set():
            first = poll(0.05)  # returns as soon as one record is there
            if first is None:
                continue
            batch = [first, *consume(num_messages=10_000, timeout=0)]
            now = time.perf_counter_ns()
            for m in batch:
                self._note(m, now)
        self.consumer.close()

    def _note(self, m, now: int) -> None:
        if m.error() is not None:
            self.errors += 1
            return
        txn, seq = STAMP.unpack_from(m.value())
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
            self.arrived_ns[txn] = now

    def wait_for(self, count: int, timeout_s: float, warmup: bool = False) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (self.warmups if warmup else self.records + self.errors) >= count:
                return True
            time.sleep(0.01)
        return False


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
    receiver = None
    try:
        create_topic(broker.bootstrap, topic, 1)
        receiver = VisibilityThread(broker, topic, s.transactions)
        receiver.start()
        producer = transactional_producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
        producer.init_transactions(timeout_s)
        pad = bytes(RECORD_SIZE - STAMP.size)
        for _ in range(LATENCY_WARMUP_TXNS):  # connections, AddPartitionsToTxn, a fetch in flight before the clock
            producer.begin_transaction()
            producer.produce(topic, STAMP.pack(WARMUP, 0) + pad)
            producer.commit_transaction(timeout_s)
        if not receiver.wait_for(LATENCY_WARMUP_TXNS, 15.0, warmup=True):
            raise RuntimeError("warm-up transactions did not reach the read_committed consumer in 15 s")
        with ResourceMeter(broker) as meter, OthersMeter(broker) as others:
            paced = paced_transactions(producer, topic, s, timeout_s)
        expected = s.transactions * s.records_per_txn
        receiver.wait_for(expected, 10.0 + FETCH_WAIT_MAX_MS / 1000)
        receiver.stop.set()
        receiver.join(10.0)
        result.update(_latency_figures(s, paced, receiver, meter, others))
    except Exception as exc:  # a refused scenario is a recorded failure, never a crash
        result.update(ok=False, error=f"{broker.name}: {type(exc).__name__}: {exc}")
    finally:
        if receiver is not None and receiver.is_alive():
            receiver.stop.set()
            receiver.join(10.0)
        gc.collect()
        result["delete_error"] = delete_topic(broker, topic)
    return result


def _latency_figures(s: LatencyScenario, paced: dict, receiver: VisibilityThread, meter: ResourceMeter,
                     others: OthersMeter) -> dict:
    calls, arrived = paced["commit_call_ns"], receiver.arrived_ns
    visible = [arrived[t] - calls[t] for t in range(s.transactions) if arrived[t]]
    expected = s.transactions * s.records_per_txn
    figures: dict = {
        "transactions": s.transactions, "achieved_txn_s": s.transactions / paced["elapsed_s"],
        "late_txns": paced["late_txns"], "cpu_s": meter.cpu_s, "cpu_ms_per_txn": meter.cpu_s * 1000 / s.transactions,
        "other_cpu_s": others.other_cpu_s, "received": receiver.records, "missing": expected - receiver.records,
        "duplicated": receiver.duplicated, "out_of_order": receiver.out_of_order, "consume_errors": receiver.errors,
        # a record reaching read_committed before its commit was even asked for: no isolation
        "visible_before_commit": sum(1 for v in visible if v < 0),
        **quantiles_ms(paced["commit_ns"], "commit"), **quantiles_ms(paced["txn_ns"], "txn"),
        **quantiles_ms(visible, "visible"),
    }
    problems = [k for k in ("missing", "duplicated", "out_of_order", "consume_errors", "visible_before_commit")
                if figures[k]]
    figures["ok"] = not problems
    if problems:
        figures["error"] = ", ".join(f"{k}={figures[k]}" for k in problems)
    return figures
