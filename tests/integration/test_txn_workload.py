"""A randomized transactional workload with broker SIGKILLs, checked by testing/txn_history.py.

Three confluent-kafka transactional producers (threads, one ``transactional.id``
each) run transactions of seeded random sizes over a 4-partition topic, each
committed or aborted at random; the broker is SIGKILLed and restarted three
times meanwhile. Errors are handled as confluent-kafka documents: a retriable
one calls the same method again, an abortable one aborts the transaction, a
fatal one (or a commit whose answer never comes) gives up the producer for a
new one with the same ``transactional.id``, whose InitProducerId fences the
old one and settles its transaction. A commit that got no answer is recorded
as of unknown outcome. Half the transactions also commit an offset of the
producer's own group (``send_offsets_to_transaction``, as a copier does), one
higher each time. A ``read_committed`` consumer reads all along, across the
kills; a second one reads everything once the producers are done. The checker
then finds no aborted read, no lost committed write, no duplicate, no torn
transaction, monotonic offsets, each producer's order per partition, and each
group's offset at its last visible transaction.

``PAFKA_TXN_WORKLOAD_SEED`` picks another seed (it is printed on failure).
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from client import KafkaClient, TopicPartition
from protocol.request_constants import LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import WaitTimeout, wait_until
from testing.topics import create_topic
from testing.transactions import assert_no_hanging_transactions
from testing.txn_history import History, Outcome, Reader, Txn, check
from tests.integration.txn_calls import retrying

SEED = int(os.environ.get("PAFKA_TXN_WORKLOAD_SEED", "16"))
PRODUCERS = 3
PARTITIONS = 4
KILLS = 3
MAX_TXNS_PER_PRODUCER = 400
#: The most a producer waits between two transactions (seconds).
MAX_PAUSE_S = 0.05
MAX_TXN_SIZE = 8
COMMIT_PROBABILITY = 0.7
OFFSETS_PROBABILITY = 0.5
NO_OFFSET = -1001
#: How long a commit or abort is retried before its producer is given up (the broker may be down longer:
#: then the commit's outcome is unknown to the producer).
GIVE_UP_S = 3.0
#: How long a new producer's InitProducerId is retried.
INIT_TIMEOUT_S = 30.0
#: How long the broker stays down at each kill (seconds, at most).
MAX_DOWNTIME_S = 4.0
#: The whole workload, kills included (producers stop at the first of this and MAX_TXNS_PER_PRODUCER).
RUN_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 60.0
#: Commits every producer makes after the last restart before the workload stops, and how long that may take.
COMMITS_AFTER_THE_KILLS = 5
SETTLE_TIMEOUT_S = 30.0
#: Reconnect soon after a restart (librdkafka backs off up to 10 s by default while the broker is down).
RECONNECT = {"reconnect.backoff.max.ms": 500}
END_PREFIX = b"end/"


pytestmark = pytest.mark.pafka_broker_config("transaction.abort.timed.out.transaction.cleanup.interval.ms=500")



class TxnProducer(threading.Thread):
    """One transactional id's transactions, recorded in the history until ``stop`` or the limits."""

    def __init__(self, name: str, bootstrap: str, topic: str, history: History, seed: int,
                 stop: threading.Event, deadline: float) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.history = history
        self.rng = random.Random(seed)
        self.stop = stop
        self.deadline = deadline
        self.transactional_id = f"{name}-{uuid.uuid4().hex[:6]}"
        self.group = f"{topic}-{name}"
        self.last_offset = 0
        self.error: BaseException | None = None
        #: (monotonic time, outcome) of each transaction as it ended.
        self.ended: list[tuple[float, Outcome]] = []
        self.instances = 0
        #: Errors that ended a transaction early, by name.
        self.errors: Counter[str] = Counter()
        self.retired: list[Any] = []

    def run(self) -> None:
        from confluent_kafka import Consumer

        # Never joins: it only names the group whose offsets the transactions commit.
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})
        try:
            producer = self._new_producer()
            for _ in range(MAX_TXNS_PER_PRODUCER):
                if self.stop.is_set() or time.monotonic() > self.deadline:
                    break
                producer = self._transaction(producer, consumer)
                time.sleep(self.rng.uniform(0, MAX_PAUSE_S))
        except BaseException as exc:
            self.error = exc
        finally:
            consumer.close()

    def _new_producer(self) -> Any:
        """A new instance of the transactional id: its InitProducerId fences the previous one and ends its
        transaction (aborted, unless its commit was already decided)."""
        from confluent_kafka import Producer

        # No re-bootstrap when the lone broker is down: librdkafka 2.16 would decommission its handle, and a
        # send_offsets_to_transaction whose group coordinator is that handle then hangs past its timeout
        # (librdkafka issue #5511, a client bug; the broker comes back on the same address anyway).
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
                             "linger.ms": 2, "transaction.timeout.ms": 10_000,
                             "metadata.recovery.strategy": "none", **RECONNECT})
        retrying(producer.init_transactions, INIT_TIMEOUT_S)
        self.instances += 1
        return producer

    def _transaction(self, producer: Any, consumer: Any) -> Any:
        """One transaction; the producer to go on with (a new one when this one had to be given up)."""
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as CKTopicPartition

        txn = self.history.begin(self.name)
        commit = self.rng.random() < COMMIT_PROBABILITY
        partitions = [self.rng.randrange(PARTITIONS) for _ in range(self.rng.randint(1, MAX_TXN_SIZE))]
        sends_offsets = self.rng.random() < OFFSETS_PROBABILITY
        committing = False
        try:
            producer.begin_transaction()
            for i, partition in enumerate(partitions):
                value = f"{txn.txn_id}/{i}".encode()
                self.history.send(txn, value, partition)
                producer.produce(self.topic, value, partition=partition)
            if sends_offsets:
                self.last_offset += 1
                self.history.send_offsets(txn, self.group, self.last_offset)
                retrying(lambda timeout: producer.send_offsets_to_transaction(
                    [CKTopicPartition(self.topic, 0, self.last_offset)], consumer.consumer_group_metadata(),
                    timeout), GIVE_UP_S)
            if commit:
                committing = True
                retrying(producer.commit_transaction, GIVE_UP_S)
                self._end(txn, Outcome.COMMITTED)
                return producer
            if self.rng.random() < 0.5:
                producer.flush(10)  # the aborted records reach the log (otherwise the abort may drop them)
            retrying(producer.abort_transaction, GIVE_UP_S)
            self._end(txn, Outcome.ABORTED)
            return producer
        except KafkaException as exc:
            self.errors[exc.args[0].name()] += 1
            if exc.args[0].txn_requires_abort():
                try:
                    retrying(producer.abort_transaction, GIVE_UP_S)
                    self._end(txn, Outcome.ABORTED)
                    return producer
                except KafkaException:
                    pass
            # Without an answer to a commit, the coordinator may have committed it or not; with no commit
            # asked for, it cannot have.
            self._end(txn, Outcome.UNKNOWN if committing else Outcome.ABORTED)
            self.retired.append(producer)
            return self._new_producer()

    def commits_since(self, t: float) -> int:
        return sum(1 for at, outcome in list(self.ended) if at > t and outcome == Outcome.COMMITTED)

    def first_commit_after(self, t: float) -> float | None:
        return next((at - t for at, outcome in list(self.ended) if at > t and outcome == Outcome.COMMITTED), None)

    def _end(self, txn: Txn, outcome: Outcome) -> None:
        self.history.end(txn, outcome)
        self.ended.append((time.monotonic(), outcome))


def _read_until_the_end(bootstrap: str, topic: str, reader: Reader, deadline: Callable[[], float]) -> None:
    """A read_committed consumer from offset 0 of every partition, until it has read an ``end/`` record in
    each (everything before them is then settled) or ``deadline()``; every record goes into ``reader``."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{reader.name}-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, **RECONNECT})
    ended: set[int] = set()
    try:
        consumer.assign([CKTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        while len(ended) < PARTITIONS and time.monotonic() < deadline():
            for m in consumer.consume(500, 0.2):
                partition, offset, value = m.partition(), m.offset(), m.value()
                if m.error() is not None or partition is None or offset is None or value is None:
                    continue  # the broker is down or restarting: the consumer carries on by itself
                reader.read(partition, offset, value)
                if value.startswith(END_PREFIX):
                    ended.add(partition)
        reader.complete = len(ended) == PARTITIONS
    finally:
        consumer.close()


def _ends(bootstrap: str, topic: str, isolation_level: int) -> list[int]:
    with KafkaClient(bootstrap, timeout=10) as client:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        found = client.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP), isolation_level=isolation_level)
        return [found[tp].offset for tp in tps]


def _group_offsets(bootstrap: str, topic: str, groups: list[str]) -> dict[str, int]:
    """The offset each group holds (-1: none), read as a restarted copier would (require_stable)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    held: dict[str, int] = {}
    for group in groups:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
        try:
            offset = consumer.committed([CKTopicPartition(topic, 0)], 20)[0].offset
        finally:
            consumer.close()
        held[group] = -1 if offset == NO_OFFSET else offset
    return held


def _write_end_records(bootstrap: str, topic: str, history: History) -> None:
    """A last committed transaction with one ``end/`` record per partition: the readers' finish line."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"end-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    txn = history.begin("end")
    producer.begin_transaction()
    for p in range(PARTITIONS):
        value = END_PREFIX + str(p).encode()
        history.send(txn, value, p)
        producer.produce(topic, value, partition=p)
    producer.commit_transaction(30)
    history.end(txn, Outcome.COMMITTED)


def test_randomized_transactions_with_broker_kills(pafka_broker: BrokerProcess) -> None:
    print(f"seed {SEED} (PAFKA_TXN_WORKLOAD_SEED)")
    rng = random.Random(SEED)
    topic = f"txn-workload-{uuid.uuid4().hex[:8]}"
    create_topic(pafka_broker.bootstrap, topic, PARTITIONS)
    history = History()
    stop = threading.Event()
    started = time.monotonic()
    producers = [TxnProducer(f"p{i}", pafka_broker.bootstrap, topic, history, rng.randrange(2**32), stop,
                             started + RUN_TIMEOUT_S) for i in range(PRODUCERS)]
    live = history.reader("live")
    read_deadline = [started + RUN_TIMEOUT_S + READ_TIMEOUT_S]
    live_reader = threading.Thread(target=_read_until_the_end, args=(pafka_broker.bootstrap, topic, live,
                                                                     lambda: read_deadline[0]), daemon=True)
    live_reader.start()
    for producer in producers:
        producer.start()
    try:
        last_restart = 0.0
        for _ in range(KILLS):
            time.sleep(rng.uniform(2.0, 5.0))
            pafka_broker.kill()
            time.sleep(rng.uniform(0.0, MAX_DOWNTIME_S))
            pafka_broker.start()
            last_restart = time.monotonic()
        # Every producer goes on committing after the last restart (bounded: a stall fails below).
        with contextlib.suppress(WaitTimeout):
            wait_until(lambda: all(p.commits_since(last_restart) >= COMMITS_AFTER_THE_KILLS or not p.is_alive()
                                   for p in producers),
                       SETTLE_TIMEOUT_S, "every producer committing after the last restart", interval=0.1)
    finally:
        stop.set()
        for producer in producers:
            producer.join(INIT_TIMEOUT_S + 3 * GIVE_UP_S + 10)
    for producer in producers:
        assert not producer.is_alive(), f"{producer.name} did not stop"
        if producer.error is not None:
            raise producer.error
    # Every transaction has ended (a given-up producer's through its successor's InitProducerId): nothing
    # holds the last stable offset back.
    wait_until(lambda: _ends(pafka_broker.bootstrap, topic, READ_COMMITTED) == _ends(pafka_broker.bootstrap, topic, READ_UNCOMMITTED),
               30, "the last stable offset is stuck below the high watermark", interval=0.2)
    _write_end_records(pafka_broker.bootstrap, topic, history)
    read_deadline[0] = time.monotonic() + READ_TIMEOUT_S
    _read_until_the_end(pafka_broker.bootstrap, topic, history.reader("after"), lambda: read_deadline[0])
    live_reader.join(READ_TIMEOUT_S + 5)

    summary = history.summary()
    firsts = [f"{t:.1f}" if (t := p.first_commit_after(last_restart)) is not None else "-" for p in producers]
    print(f"{summary}; producer instances {[p.instances for p in producers]}; errors "
          f"{[dict(p.errors) for p in producers]}; first commit after the last restart (s) {firsts}; "
          f"{time.monotonic() - started:.1f} s")
    anomalies = check(history, _group_offsets(pafka_broker.bootstrap, topic, [p.group for p in producers]))
    assert not anomalies, "\n".join(str(a) for a in anomalies[:40])
    assert all(reader.complete for reader in history.readers), "a reader did not read to the end"
    # The workload did what it is for: both outcomes, and commits after the last restart from every producer.
    assert summary["committed"] > 0 and summary["aborted"] > 0
    for producer in producers:
        commits = producer.commits_since(last_restart)
        assert commits >= COMMITS_AFTER_THE_KILLS, \
            f"{producer.name} committed {commits} transaction(s) in the {SETTLE_TIMEOUT_S} s after the last restart"
    assert pafka_broker.starts == KILLS + 1 and pafka_broker.process is not None and pafka_broker.process.returncode is None
    assert_no_hanging_transactions(pafka_broker.bootstrap)
