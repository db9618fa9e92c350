"""Chaos: a three-broker cluster under random faults, with producers and consumers running
throughout, then a check that nothing acknowledged was lost, duplicated, moved or reordered.

    python -m testing.chaos --faults 100 --seed 7        # the documented run (docs/chaos.md)

The cluster: three brokers (``pytest_pafka.cluster.Cluster`` with ``link_faults``), a topic with
``PARTITIONS`` partitions, RF 3, ``min.insync.replicas=2``. Two idempotent ``acks=all`` producers
(confluent-kafka) send values that name their sequence number, each to a partition of its own
choosing, and record every acknowledgement (partition, offset); two consumers read every
partition from the start and record every (partition, offset, value) they get.

Faults are drawn from a seeded ``random.Random``; each is healed before the next is drawn, and
the cluster must be healthy again (every broker registered, every partition led by a live broker
with at least ``min.insync.replicas`` in its ISR) within ``HEAL_TIMEOUT_S``:

- ``kill``: SIGKILL a broker (the controller a third of the time) and start it again;
- ``pause``: SIGSTOP a broker past its ZooKeeper session timeout, then SIGCONT;
- ``link``: black-hole the link between two brokers (both ways, or one) for a few seconds;
- ``zk-isolate-leader``: cut a partition leader's ZooKeeper link past the session timeout; its
  clients and peers still reach it;
- ``disk-full``: fill a broker's only log dir (a small tmpfs) with a ballast file, so its next write
  fails with ENOSPC; once it halted (its only dir offline, as Kafka's broker does), remove the
  ballast and start it again: its recovery truncates any torn tail;
- ``disk-eio``: switch a broker's only log dir (a FUSE passthrough over that tmpfs) to answer EIO
  for a few seconds, switch it back, and start the broker again if it halted.

The disk faults need every broker's log dir on such a filesystem for the whole run
(``testing.chaos_disks``): the run mounts them, which needs root, and always unmounts them.
``--kinds`` picks the fault kinds (all of them by default).

Findings (each a line; none means the run passed):

- ``lost``: an acknowledged value is not at the offset its acknowledgement named;
- ``duplicate``: a value is in a partition's final log more than once;
- ``reordered``: a producer's acknowledged values in a partition are not in the order it sent them;
- ``inconsistent-read``: a consumer read a value at an offset that holds another in the final log;
- ``diverged``: the replicas of a partition do not hold the same batches (CRCs, in order);
- ``offline`` / ``unhealthy``: a partition without a live leader, or the cluster not healthy in time;
- ``stuck``: a consumer did not reach a partition's end after the faults were healed;
- ``producer-failed``: a producer stopped on a fatal client error (its values after that are
  neither acknowledged nor failed, so the run checks less than it should).

Client faults are reported apart from findings: failures of the client library, not of the
cluster, that the run works around. A consumer whose librdkafka main thread deadlocks (its
statistics stop; librdkafka's open issue #5476) is left behind and replaced by one that reads on
from the last offsets read, so the cluster is still checked for serving every consumer to the end.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import logging
import random
import sys
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.record_batch import LOG_OVERHEAD, parse_batch_header, peek_offset_and_length
from pytest_pafka.cluster import Cluster
from pytest_pafka.tcp_proxy import Direction, Mode
from pytest_pafka.waiting import WaitTimeout, wait_until
from testing.chaos_disks import BrokerDisks, disks_available

TOPIC = "chaos"
PARTITIONS = 3
BROKERS = 3
MIN_ISR = 2
PRODUCERS = 2
CONSUMERS = 2
#: A producer's sequence numbers start at its index times this.
SEQ_SPACE = 100_000_000
HEAL_TIMEOUT_S = 90.0
CATCH_UP_TIMEOUT_S = 30.0  # for the last replica to match the others once the cluster is healthy
#: Each producer sends about this many records a second.
RATE = 200
BASE_FAULTS = ("kill", "pause", "link", "zk-isolate-leader")
#: The faults of a broker's log dir: they need root (``testing.chaos_disks``).
DISK_FAULTS = ("disk-full", "disk-eio")
FAULTS = BASE_FAULTS + DISK_FAULTS
#: How long a broker whose only log dir failed has to halt (log the halt and exit).
HALT_TIMEOUT_S = 30.0
#: What a broker logs when it halts because no log dir is left.
HALT_LINE = "Shutdown broker because all log dirs"


def value_of(seq: int) -> bytes:
    return b"%012d" % seq + b"." * 52


def seq_of(value: bytes) -> int:
    return int(value[:12])


@dataclass
class History:
    """What the clients saw; written from their threads (appends and dict stores only)."""

    #: seq -> (partition, offset) of every acknowledged value.
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: seq -> partition of every value acknowledged without an offset: librdkafka's idempotent
    #: producer delivers a batch it knows was persisted (a later batch of the partition succeeded)
    #: without learning where.
    acked_unplaced: dict[int, int] = field(default_factory=dict)
    #: seq -> error of every value whose delivery failed (it may or may not be in the log).
    failed: dict[int, str] = field(default_factory=dict)
    #: per consumer: every (partition, offset, value) read, in order.
    reads: list[list[tuple[int, int, bytes]]] = field(default_factory=list)
    #: per consumer: partition -> the highest offset read.
    reached: list[dict[int, int]] = field(default_factory=list)
    #: per consumer: the errors its poll returned, "NAME: text", in order (a stuck consumer's story).
    errors: list[list[str]] = field(default_factory=list)
    #: a producer's fatal error, which ended it: "producer N: text".
    producer_errors: list[str] = field(default_factory=list)
    #: client-side failures the run worked around (a deadlocked consumer replaced): not findings
    #: about the cluster, but reported.
    client_faults: list[str] = field(default_factory=list)


@dataclass
class Report:
    seed: int
    faults: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    client_faults: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        head = [f"seed {self.seed}: {len(self.faults)} faults in {self.seconds:.0f} s, {len(self.findings)} findings",
                "counts: " + ", ".join(f"{k} {v}" for k, v in self.counts.items())]
        return head + [f"fault {i + 1}: {f}" for i, f in enumerate(self.faults)] + \
            [f"CLIENT {f}" for f in self.client_faults] + [f"FINDING {f}" for f in self.findings]


# -- clients ------------------------------------------------------------------------------------------
def _produce(cluster: Cluster, index: int, history: History, stop: threading.Event,
             trace: ClientTrace | None = None) -> None:
    from confluent_kafka import KafkaException, Producer

    def report(err: Any, msg: Any) -> None:
        seq = seq_of(msg.value())
        if err is None and msg.offset() is None:
            history.acked_unplaced[seq] = msg.partition()
        elif err is None:
            history.acked[seq] = (msg.partition(), msg.offset())
        else:
            history.failed[seq] = err.name()

    # batch.num.messages: after a long stall a partition's queue holds thousands of records; in one
    # batch, librdkafka 2.16 may fail to rebuild it identically for a retry when it shares the request
    # with other partitions' batches (a local fatal error, "Unable to reconstruct MessageSet"). Batches
    # of at most 1,000 records (~80 KB) always fit a retried request whole.
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 120_000, "batch.num.messages": 1000,
                         **(trace.client_config("eos") if trace is not None else {})})
    seq, sent = index * SEQ_SPACE, 0
    started = time.monotonic()
    try:
        while not stop.is_set():
            producer.produce(TOPIC, partition=seq % PARTITIONS, value=value_of(seq), on_delivery=report)
            seq, sent = seq + 1, sent + 1
            ahead = sent / RATE - (time.monotonic() - started)
            producer.poll(max(ahead, 0.0))
        producer.flush(180)
    except KafkaException as exc:  # a fatal error: this producer is done, and the run says so
        history.producer_errors.append(f"producer {index}: {exc.args[0].str() if exc.args else exc}")


class ClientTrace(logging.Handler):
    """The last lines of a client's librdkafka debug log and a condensed line of each of its
    statistics, kept in a ring, written out after a run (a stuck consumer's or a failed
    producer's evidence)."""

    def __init__(self, keep: int = 40_000) -> None:
        super().__init__()
        self.lines: deque[str] = deque(maxlen=keep)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.created:.3f} {record.getMessage()}")

    def stats(self, text: str) -> None:
        stats = json.loads(text)
        brokers = " ".join(f"{b['nodeid']}:{b['state']}/out{b['outbuf_cnt']}/wait{b['waitresp_cnt']}"
                           for b in stats["brokers"].values() if b["nodeid"] >= 0)
        parts = " ".join(f"{p['partition']}:{p['fetch_state']}@{p['leader']}/next{p['next_offset']}"
                         f"/app{p['app_offset']}/q{p['fetchq_cnt']}/mq{p['msgq_cnt']}+{p['xmit_msgq_cnt']}"
                         for t in stats["topics"].values() for p in t["partitions"].values() if p["partition"] >= 0)
        self.lines.append(f"{time.time():.3f} STATS brokers {brokers} | partitions {parts}")

    def client_config(self, debug: str) -> dict[str, Any]:
        logger = logging.getLogger(f"chaos.client.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.addHandler(self)
        return {"logger": logger, "debug": debug, "statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": self.stats}


#: librdkafka's main thread emits statistics every STATS_INTERVAL_MS whatever the brokers do; when
#: they stop for DEADLOCKED_AFTER_S while the application keeps polling, that thread is blocked
#: for good. Traced runs caught it: librdkafka's open issue #5476, a lock-order inversion between
#: its main thread (finishing an OffsetForLeaderEpoch that failed because its broker was being
#: decommissioned, a broker missing from a Metadata answer while its session had expired) and the
#: decommissioned broker's thread. The consumer then never fetches again.
STATS_INTERVAL_MS = 1000
DEADLOCKED_AFTER_S = 20.0


def _consume(cluster: Cluster, history: History, index: int, stop: threading.Event,
             trace: ClientTrace | None = None) -> None:
    """Read every partition from the start until ``stop``; a consumer whose librdkafka deadlocked
    is left behind (never destroyed: that waits forever on the same lock) and replaced by one
    that carries on after the last offsets read, and the run reports it."""
    from confluent_kafka import Consumer, TopicPartition

    reads, reached, errors = history.reads[index], history.reached[index], history.errors[index]
    last_stats = [time.monotonic()]

    def on_stats(text: str) -> None:
        last_stats[0] = time.monotonic()
        if trace is not None:
            trace.stats(text)

    def new_consumer() -> Any:
        config = {"bootstrap.servers": cluster.bootstrap, "group.id": f"chaos-{index}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  **(trace.client_config("consumer,fetch,topic,metadata,broker") if trace is not None else {}),
                  "statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": on_stats}
        consumer = Consumer(config)
        consumer.assign([TopicPartition(TOPIC, p, reached.get(p, -1) + 1) for p in range(PARTITIONS)])
        last_stats[0] = time.monotonic()
        return consumer

    consumer = new_consumer()
    try:
        while not stop.is_set():
            for m in consumer.consume(500, timeout=0.2):
                if m.error() is None:
                    reads.append((m.partition(), m.offset(), m.value()))
                    reached[m.partition()] = max(reached.get(m.partition(), -1), m.offset())
                else:
                    errors.append(f"{m.error().name()}: {m.error().str()}")
            if time.monotonic() - last_stats[0] > DEADLOCKED_AFTER_S:
                history.client_faults.append(
                    f"consumer {index}: librdkafka's main thread stopped (no statistics for "
                    f"{DEADLOCKED_AFTER_S:.0f} s) at {dict(sorted(reached.items()))}; replaced")
                _leave_deadlocked(consumer)
                consumer = new_consumer()
    finally:
        consumer.close()


def _leave_deadlocked(consumer: Any) -> None:
    """Keep a deadlocked librdkafka handle alive for good: its destructor would wait forever on
    the lock its own threads hold (even at interpreter exit, when module globals are cleared)."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(consumer))


# -- faults ---------------------------------------------------------------------------------------------
class FaultInjector:
    """Injects one fault of ``kinds`` at a time and heals it; ``disks``: the brokers' log dirs, for
    the disk faults."""

    def __init__(self, cluster: Cluster, rng: random.Random, kinds: tuple[str, ...] = BASE_FAULTS,
                 disks: BrokerDisks | None = None) -> None:
        if set(kinds) & set(DISK_FAULTS) and disks is None:
            raise ValueError("the disk faults need the brokers' log dirs on BrokerDisks")
        self.cluster = cluster
        self.rng = rng
        self.kinds = kinds
        self.disks = disks
        assert cluster.links is not None
        self.links = cluster.links
        self.session_s = cluster.session_timeout_ms / 1000

    def inject(self, kind: str | None = None) -> str:
        """Inject ``kind`` (default: one drawn from ``kinds``), heal it, and say what it was."""
        kind = kind if kind is not None else self.rng.choice(self.kinds)
        return getattr(self, "_" + kind.replace("-", "_"))()

    def _any_broker(self) -> int:
        controller = self.cluster.controller_id()
        if controller is not None and self.rng.random() < 1 / 3:
            return controller
        return self.rng.randint(1, BROKERS)

    def _kill(self) -> str:
        broker = self._any_broker()
        was_controller = broker == self.cluster.controller_id()
        down = self.rng.uniform(0.5, 3.0)
        self.cluster.kill(broker)
        time.sleep(down)
        self.cluster.start(broker)
        return f"kill broker {broker}{' (controller)' if was_controller else ''}, down {down:.1f} s"

    def _pause(self) -> str:
        broker = self._any_broker()
        stopped = self.session_s + self.rng.uniform(1.0, 3.0)
        self.cluster.pause(broker)
        time.sleep(stopped)
        self.cluster.resume(broker)
        return f"pause broker {broker} for {stopped:.1f} s"

    def _link(self) -> str:
        a, b = self.rng.sample(range(1, BROKERS + 1), 2)
        one_way = self.rng.random() < 0.5
        seconds = self.rng.uniform(2.0, 8.0)
        directions = (self.rng.choice(list(Direction)),) if one_way else tuple(Direction)
        self.links.cut(a, b, Mode.BLACKHOLE, directions)
        if not one_way:
            self.links.cut(b, a, Mode.BLACKHOLE)
        time.sleep(seconds)
        self.links.heal()
        what = f"{a}->{b} {directions[0].name.lower()} only" if one_way else f"{a}<->{b}"
        return f"black-hole link {what} for {seconds:.1f} s"

    def _zk_isolate_leader(self) -> str:
        leaders = [state["leader"] for p in range(PARTITIONS)
                   if (state := self.cluster.partition_state(TOPIC, p)) is not None and state["leader"] > 0]
        broker = self.rng.choice(leaders) if leaders else self._any_broker()
        seconds = self.session_s + self.rng.uniform(1.0, 3.0)
        self.links.cut_zookeeper(broker)
        time.sleep(seconds)
        self.links.heal()
        return f"cut leader {broker} from ZooKeeper for {seconds:.1f} s"

    def _disk_full(self) -> str:
        assert self.disks is not None
        broker = self._any_broker()
        halts = self._halts(broker)
        ballast = self.disks.fill(broker)
        filled = time.monotonic()
        with contextlib.suppress(WaitTimeout):  # one that did not halt is said so, and healed alike
            wait_until(lambda: not self.cluster.broker(broker).running, HALT_TIMEOUT_S,
                       f"broker {broker} halted", interval=0.1)
        waited = time.monotonic() - filled
        self.disks.free(broker)
        outcome = self._restart_if_halted(broker, halts)
        return f"fill broker {broker}'s log dir ({ballast >> 20} MB of ballast), {waited:.1f} s: {outcome}"

    def _disk_eio(self) -> str:
        assert self.disks is not None
        broker = self._any_broker()
        halts = self._halts(broker)
        seconds = self.rng.uniform(1.0, 4.0)
        self.disks.fail(broker)
        time.sleep(seconds)
        self.disks.mend(broker)
        outcome = self._restart_if_halted(broker, halts)
        return f"EIO on broker {broker}'s log dir for {seconds:.1f} s: {outcome}"

    def _halts(self, broker: int) -> int:
        return self.cluster.broker(broker).log_text().count(HALT_LINE)

    def _restart_if_halted(self, broker: int, halts_before: int) -> str:
        """Start ``broker`` again if it halted (or is halting) since ``halts_before``, or exited."""
        process = self.cluster.broker(broker)
        halted = self._halts(broker) > halts_before
        if not halted and process.running:
            return "the broker stayed up"
        wait_until(lambda: not process.running, HALT_TIMEOUT_S, f"broker {broker} gone", interval=0.1)
        self.cluster.start(broker)
        return "halted, started again" if halted else "exited without logging a halt, started again"


def _unhealthy(cluster: Cluster) -> str | None:
    """Why the cluster is not healthy yet (None: it is)."""
    registered = cluster.registered_ids()
    if registered != set(range(1, BROKERS + 1)):
        return f"registered brokers {sorted(registered)}"
    for p in range(PARTITIONS):
        state = cluster.partition_state(TOPIC, p)
        if state is None or state["leader"] not in registered:
            return f"partition {p} has no live leader ({state})"
        if len(state["isr"]) < MIN_ISR:
            return f"partition {p} has ISR {state['isr']}"
    return None


def _wait_healthy(cluster: Cluster, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    while True:
        why = _unhealthy(cluster)
        if why is None or time.monotonic() > deadline:
            return why
        time.sleep(0.2)


# -- the checks --------------------------------------------------------------------------------------------
def _diverged(cluster: Cluster, timeout: float) -> list[str]:
    """Partitions whose replicas still differ after ``timeout``. Healthy only needs MIN_ISR replicas
    in sync: the last one may still be truncating or fetching after the last fault, which settles;
    a divergence does not."""
    deadline = time.monotonic() + timeout
    while True:
        findings = []
        for p in range(PARTITIONS):
            replicas = {b: read_replica(cluster, b, p) for b in range(1, BROKERS + 1)}
            if len({tuple(batches) for batches in replicas.values()}) != 1:
                findings.append(f"diverged: partition {p}: batches per replica "
                                f"{ {b: len(v) for b, v in replicas.items()} }")
        if not findings or time.monotonic() > deadline:
            return findings
        time.sleep(0.5)


def log_dir(cluster: Cluster, broker_id: int) -> Path:
    """A broker's log dir: its ``log.dirs`` override (the last wins, as in the broker), else its data dir."""
    broker = cluster.broker(broker_id)
    given = [item.split("=", 1)[1] for item in broker.overrides if item.startswith("log.dirs=")]
    return Path(given[-1]) if given else broker.data_dir


def read_replica(cluster: Cluster, broker_id: int, partition: int) -> list[tuple[int, int]]:
    """(base offset, CRC) of every whole batch of a replica's segments."""
    batches = []
    for segment in sorted((log_dir(cluster, broker_id) / f"{TOPIC}-{partition}").glob("*.log")):
        data, pos = segment.read_bytes(), 0
        while len(data) - pos >= LOG_OVERHEAD:
            _, length = peek_offset_and_length(data, pos)
            if length <= 0 or pos + LOG_OVERHEAD + length > len(data):
                break
            header = parse_batch_header(data, pos)
            batches.append((header.base_offset, header.crc))
            pos += header.size_in_bytes
    return batches


def read_all(cluster: Cluster, end_offsets: dict[int, int], timeout: float = 120.0
             ) -> dict[int, dict[int, bytes]]:
    """partition -> offset -> value, everything below ``end_offsets``, read by a fresh consumer."""
    from confluent_kafka import Consumer, TopicPartition

    log: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "chaos-check",
                         "enable.auto.commit": False, "fetch.max.bytes": 50 << 20})
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(len(log[p]) < end_offsets[p] for p in log):
            for m in consumer.consume(10_000, timeout=0.5):
                if m.error() is None:
                    log[m.partition()][m.offset()] = m.value()
    finally:
        consumer.close()
    return log


#: What a partition's leader answers ListOffsets while leadership has just moved: the answer is not
#: ready yet (KIP-207's OFFSET_NOT_AVAILABLE while a new leader's high watermark is below its epoch's
#: start), and librdkafka hands these to the caller of get_watermark_offsets rather than retrying.
NOT_YET_CODES = frozenset({"OFFSET_NOT_AVAILABLE", "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION"})


def end_offsets(cluster: Cluster) -> dict[int, int]:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "chaos-ends"})

    def high_watermark(partition: int) -> tuple[int] | None:
        # In a 1-tuple: wait_until waits for a truthy value, and a high watermark may be 0.
        try:
            return (consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=30)[1],)
        except KafkaException as exc:
            if exc.args[0].name() in NOT_YET_CODES:
                return None
            raise

    try:
        return {p: wait_until(lambda p=p: high_watermark(p), 30.0, f"partition {p}'s high watermark",
                              interval=0.2)[0]
                for p in range(PARTITIONS)}
    finally:
        consumer.close()


def check(history: History, log: dict[int, dict[int, bytes]], ends: dict[int, int]) -> list[str]:
    findings: list[str] = [f"producer-failed: {error}" for error in history.producer_errors]
    where: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in log.items():
        for offset, value in records.items():
            where[seq_of(value)].append((partition, offset))
    for seq, places in where.items():
        if len(places) > 1:
            findings.append(f"duplicate: value {seq} at {sorted(places)}")
    for seq, partition in sorted(history.acked_unplaced.items()):
        if [place[0] for place in where.get(seq, [])] != [partition]:
            findings.append(f"lost: value {seq} acknowledged (without an offset) in partition {partition}, "
                            f"the log holds it at {where.get(seq, [])}")
    for seq, (partition, offset) in sorted(history.acked.items()):
        found = log[partition].get(offset)
        if found is None or seq_of(found) != seq:
            findings.append(f"lost: value {seq} acknowledged at {partition}/{offset}, the log holds "
                            f"{None if found is None else seq_of(found)} there")
    by_producer: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for seq, (partition, offset) in history.acked.items():
        by_producer[(seq // SEQ_SPACE, partition)].append((seq, offset))
    for (producer, partition), pairs in by_producer.items():
        offsets = [offset for _, offset in sorted(pairs)]
        if offsets != sorted(offsets):
            findings.append(f"reordered: producer {producer}'s values in partition {partition}")
    for i, reads in enumerate(history.reads):
        for partition, offset, value in reads:
            final = log[partition].get(offset)
            if final != value:
                findings.append(f"inconsistent-read: consumer {i} read {seq_of(value)} at {partition}/{offset}, "
                                f"the log holds {None if final is None else seq_of(final)}")
        for partition, end in ends.items():
            reached = history.reached[i].get(partition, -1)
            if reached < end - 1:
                last = history.errors[i][-3:] if i < len(history.errors) else []
                findings.append(f"stuck: consumer {i} reached {partition}/{reached}, the end is {end}"
                                + (f"; its last errors: {last}" if last else ""))
    return findings


# -- the run -----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _chaos_cluster(kinds: tuple[str, ...]) -> Iterator[tuple[Cluster, BrokerDisks | None]]:
    """The cluster with its topic; with disk faults among ``kinds``, every broker's log dir on
    ``BrokerDisks`` (mounted first, unmounted once the brokers are gone)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    unknown = set(kinds) - set(FAULTS)
    if unknown or not kinds:
        raise ValueError(f"fault kinds: some of {', '.join(FAULTS)} (not {sorted(unknown)})")
    with contextlib.ExitStack() as stack:
        disks = None
        if set(kinds) & set(DISK_FAULTS):
            why = disks_available()
            if why is not None:
                raise RuntimeError(f"{why}; run as root, or leave them out: --kinds {','.join(BASE_FAULTS)}")
            disks = stack.enter_context(BrokerDisks(BROKERS))
        cluster = stack.enter_context(Cluster(
            BROKERS, f"min.insync.replicas={MIN_ISR}", "default.replication.factor=3",
            "offsets.topic.replication.factor=3", link_faults=True,
            broker_overrides=disks.broker_overrides() if disks is not None else None))
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(timeout=60)
        cluster.wait_for_topic(TOPIC, PARTITIONS, 60)
        yield cluster, disks


def run(faults: int, seed: int, progress: Callable[[str], None] = lambda _line: None,
        trace_dir: Path | None = None, kinds: tuple[str, ...] = FAULTS, in_turn: bool = False) -> Report:
    """``trace_dir``: trace the clients (librdkafka debug and statistics) and write their last
    lines there, ``producer-N.log`` and ``consumer-N.log``, when the run ends. ``kinds``: the fault
    kinds drawn from (the disk faults need root); ``in_turn``: take them in turn instead."""
    rng = random.Random(seed)
    report = Report(seed)
    started = time.monotonic()
    history = History(reads=[[] for _ in range(CONSUMERS)], reached=[{} for _ in range(CONSUMERS)],
                      errors=[[] for _ in range(CONSUMERS)])
    with _chaos_cluster(kinds) as (cluster, disks):
        stop_producers, stop_consumers = threading.Event(), threading.Event()
        traces = {f"{kind}-{i}": ClientTrace() if trace_dir is not None else None
                  for kind, count in (("producer", PRODUCERS), ("consumer", CONSUMERS)) for i in range(count)}
        threads = [threading.Thread(target=_produce, args=(cluster, i, history, stop_producers,
                                                           traces[f"producer-{i}"]), daemon=True)
                   for i in range(PRODUCERS)]
        threads += [threading.Thread(target=_consume, args=(cluster, history, i, stop_consumers,
                                                            traces[f"consumer-{i}"]), daemon=True)
                    for i in range(CONSUMERS)]
        for thread in threads:
            thread.start()
        injector = FaultInjector(cluster, rng, kinds, disks)
        try:
            time.sleep(2.0)
            for n in range(faults):
                fault = injector.inject(kinds[n % len(kinds)] if in_turn else None)
                report.faults.append(fault)
                why = _wait_healthy(cluster, HEAL_TIMEOUT_S)
                if why is not None:
                    report.findings.append(f"unhealthy: {HEAL_TIMEOUT_S:.0f} s after fault {n + 1}: {why}")
                    break
                progress(f"fault {n + 1}/{faults}: {fault} (acked {len(history.acked)})")
                time.sleep(rng.uniform(0.5, 2.0))
        finally:
            assert cluster.links is not None
            cluster.links.heal()
            for broker_id in cluster.paused_ids:
                cluster.resume(broker_id)
            if disks is not None:
                disks.heal_all()
            stop_producers.set()
            for thread in threads[:PRODUCERS]:
                thread.join(240)
        why = _wait_healthy(cluster, HEAL_TIMEOUT_S)
        if why is not None:
            report.findings.append(f"offline: at the end, {why}")
        ends = end_offsets(cluster)
        # The consumers have a while to reach the end, then stop.
        with contextlib.suppress(WaitTimeout):  # the check reports a stuck consumer
            wait_until(lambda: all(reached.get(partition, -1) >= end - 1
                                   for reached in history.reached for partition, end in ends.items()),
                       60, "the consumers at the end", interval=0.5)
        stop_consumers.set()
        for thread in threads[PRODUCERS:]:
            thread.join(60)
        if trace_dir is not None:
            trace_dir.mkdir(parents=True, exist_ok=True)
            for name, trace in traces.items():
                assert trace is not None
                (trace_dir / f"{name}.log").write_text("\n".join(trace.lines) + "\n")
        log = read_all(cluster, ends)
        report.findings += check(history, log, ends)
        report.findings += _diverged(cluster, CATCH_UP_TIMEOUT_S)
        report.client_faults = list(history.client_faults)
        report.counts = {"acked": len(history.acked), "acked without an offset": len(history.acked_unplaced),
                         "failed": len(history.failed),
                         "in the log": sum(len(v) for v in log.values()),
                         **{f"read by consumer {i}": len(r) for i, r in enumerate(history.reads)},
                         **{f"errors of consumer {i}": len(e) for i, e in enumerate(history.errors)}}
    report.seconds = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the report here too")
    parser.add_argument("--kinds", default=",".join(FAULTS),
                        help=f"the fault kinds, comma-separated (default all: {','.join(FAULTS)}; "
                             f"{' and '.join(DISK_FAULTS)} need root)")
    parser.add_argument("--trace", type=Path, default=None,
                        help="trace the clients (librdkafka debug and statistics), their last lines go here")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    try:
        report = run(args.faults, seed, progress=lambda line: print(line, flush=True), trace_dir=args.trace,
                     kinds=tuple(args.kinds.split(",")))
    except (RuntimeError, ValueError) as exc:
        if "fault kinds" not in str(exc) and "disk faults" not in str(exc):
            raise
        parser.error(str(exc))
    print("\n".join(report.lines()))
    if args.json is not None:
        args.json.write_text(json.dumps(report.__dict__, indent=2) + "\n")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
