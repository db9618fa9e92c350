"""Controlled shutdown (issue 17), the scenario itself: a SIGTERMed broker asks the controller to move
every leadership it holds to another replica before it exits, so no partition of an RF >= 2 topic is
offline at any sampled moment, and a producer running through it sees only retriable errors (every
record is delivered, exactly once). Run on a PLAINTEXT cluster (test_controlled_shutdown) and on a
SASL_SSL one (test_sasl_ssl_cluster)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pytest_pafka.cluster import Cluster
from tests.cluster.helpers import (
    assert_exactly_once,
    broker_metadata,
    consume_confluent,
    create_topic,
    isr_in_zookeeper,
    leaders_in_zookeeper,
    seq_of,
    unique,
    value_of,
)

PARTITIONS = 12
SAMPLE_INTERVAL_S = 0.02
PRODUCE_MAX_RECORDS = 200_000
PRODUCE_RATE = 2000  # records/s: steady traffic through the whole shutdown


@dataclass
class Offline:
    """What the samplers saw: (when, topic, partition, leader, source) of every offline partition."""

    seen: list[tuple[float, str, int, int, str]] = field(default_factory=list)
    samples: int = 0
    metadata_samples: int = 0
    #: a sampler that failed says so here instead of dying silently
    errors: list[str] = field(default_factory=list)


def guarded(target: Callable[..., None], offline: Offline) -> Callable[..., None]:
    def run(*args: object) -> None:
        try:
            target(*args)
        except Exception as exc:
            offline.errors.append(f"{target.__name__}: {exc!r}")
    return run


def sample_zookeeper(cluster: Cluster, victim: int, topics: dict[str, int], stop: threading.Event,
                     offline: Offline) -> None:
    zk = cluster.zk()  # a client of its own: kazoo clients are not shared across threads here
    broker = cluster.broker(victim)
    while not stop.is_set():
        victim_was_running = broker.running  # read before the states: a leader read after its exit is offline
        for topic, partitions in topics.items():
            for p in range(partitions):
                data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
                leader = json.loads(data)["leader"]
                if leader == -1 or (leader == victim and not victim_was_running):
                    offline.seen.append((time.monotonic(), topic, p, leader, "zookeeper"))
        offline.samples += 1
        stop.wait(SAMPLE_INTERVAL_S)


def sample_metadata(cluster: Cluster, survivor: int, victim: int, topics: dict[str, int], stop: threading.Event,
                    offline: Offline) -> None:
    broker = cluster.broker(victim)
    while not stop.is_set():
        victim_was_running = broker.running
        metadata = broker_metadata(cluster.broker(survivor), list(topics))
        for topic in topics:
            for p, m in metadata.topics[topic].partitions.items():
                if m.leader == -1 or (m.leader == victim and not victim_was_running):
                    offline.seen.append((time.monotonic(), topic, p, m.leader, f"metadata of broker {survivor}"))
        offline.metadata_samples += 1
        stop.wait(SAMPLE_INTERVAL_S)


class SteadyProducer:
    """An idempotent acks=all producer at a steady rate until stopped (bounded in count and time)."""

    def __init__(self, bootstrap: str, topic: str, extra: Mapping[str, object] | None = None) -> None:
        from confluent_kafka import KafkaError, Producer

        self.acked: set[int] = set()
        self.failed: list[str] = []
        self.client_errors: list[KafkaError] = []
        self.sent = 0
        self.stop = threading.Event()
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 120_000,
                                  "error_cb": self.client_errors.append, **(extra or {})})
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is None:
            self.acked.add(seq_of(msg.value()))  # type: ignore[attr-defined]
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set() and self.sent < PRODUCE_MAX_RECORDS and time.monotonic() - started < 300:
            due = int((time.monotonic() - started) * PRODUCE_RATE)
            while self.sent < due and self.sent < PRODUCE_MAX_RECORDS:
                self.producer.produce(self.topic, key=b"%d" % self.sent, value=value_of(self.sent),
                                      on_delivery=self._on_delivery)
                self.sent += 1
            self.producer.poll(0.01)
        self.producer.flush(150)

    def start(self) -> SteadyProducer:
        self.thread.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(200)
        assert not self.thread.is_alive()


def victim_of(cluster: Cluster, which: str) -> int:
    controller = cluster.controller_id()
    assert controller is not None
    if which == "controller":
        return controller
    return next(b for b in cluster.broker_ids if b != controller)


def run_controlled_shutdown(cluster: Cluster, which: str, extra: Mapping[str, object] | None = None) -> None:
    """SIGTERM the controller or another broker while a producer runs and samplers watch ZooKeeper and
    a survivor's metadata; ``extra``: the clients' (security) settings, as the cluster needs them."""
    rf3, rf2 = unique("shutdown-rf3"), unique("shutdown-rf2")
    create_topic(cluster, rf3, PARTITIONS, 3, {"min.insync.replicas": "2"})
    create_topic(cluster, rf2, PARTITIONS, 2)
    topics = {rf3: PARTITIONS, rf2: PARTITIONS}
    victim = victim_of(cluster, which)
    survivor = next(b for b in cluster.broker_ids if b != victim)
    led_before = sum(1 for t in topics for leader in leaders_in_zookeeper(cluster, t, PARTITIONS).values()
                     if leader == victim)
    assert led_before > 0, "the victim leads some partitions to move"

    producer = SteadyProducer(cluster.bootstrap, rf3, extra).start()
    offline = Offline()
    stop = threading.Event()
    samplers = [threading.Thread(target=guarded(sample_zookeeper, offline), args=(cluster, victim, topics, stop, offline), daemon=True),
                threading.Thread(target=guarded(sample_metadata, offline), args=(cluster, survivor, victim, topics, stop, offline),
                                 daemon=True)]
    try:
        time.sleep(1.0)  # traffic flowing before the signal
        for sampler in samplers:
            sampler.start()
        time.sleep(0.5)
        exit_code = cluster.terminate(victim)
        left_at = time.monotonic()
        assert exit_code == 0, f"broker {victim} exited with {exit_code}\n{cluster.log_tails(3000)}"
        # Nothing it led is left leaderless right after the exit.
        for topic in topics:
            leaders = leaders_in_zookeeper(cluster, topic, PARTITIONS)
            assert victim not in leaders.values(), (topic, leaders)
            assert -1 not in leaders.values(), (topic, leaders)
        time.sleep(2.0)  # keep sampling and producing past the exit
    finally:
        stop.set()
        for sampler in samplers:
            if sampler.is_alive():
                sampler.join(30)
        producer.finish()
    assert not offline.errors, offline.errors
    assert offline.samples > 10 and offline.metadata_samples > 5, (offline.samples, offline.metadata_samples)
    assert not offline.seen, f"offline partitions (victim {victim} exited at {left_at:.2f}): {offline.seen[:10]}"

    # The producer saw only retriable errors: every record it sent was delivered.
    assert not producer.failed, producer.failed[:5]
    fatal = [e for e in producer.client_errors if e.fatal() or not (e.retriable() or e.code() < 0)]
    assert not fatal, fatal
    assert len(producer.acked) == producer.sent > 0
    assert_exactly_once(consume_confluent(cluster.bootstrap, rf3, PARTITIONS, producer.sent, extra=extra),
                        range(producer.sent))

    # Back to three brokers, every replica in sync again, for the next test.
    cluster.start(victim)
    cluster.wait_for(lambda: all(sorted(isr_in_zookeeper(cluster, t, p)) == sorted(cluster.topic_assignment(t)[p])
                                 for t in topics for p in range(PARTITIONS)), 60.0, "the restarted broker back in every ISR")
