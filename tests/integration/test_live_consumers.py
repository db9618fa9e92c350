"""Consumers reading while a producer writes: fetch sessions and sparse partitions.

Twelve partitions, written in small bursts that touch a few partitions at a
time, while confluent-kafka, kafka-python (which uses KIP-227 incremental
fetch sessions) and aiokafka consume all of them at once. Incremental fetch
responses leave out partitions with nothing new; a broker that drops a
partition from the session, repeats data or loses a wake-up shows up here as
a missing, duplicated or reordered record.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from pytest_pafka.broker_process import BrokerProcess
from tests.integration.clients import DRIVERS, ConfluentDriver
from tests.integration.records import Consumed

TOPIC = "live"
PARTITIONS = 12
RECORDS = 12_000
BURST = 40


def _produce_in_bursts(bootstrap: str, errors: list[str]) -> None:
    from confluent_kafka import Producer

    rng = random.Random(4)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    seq = 0
    while seq < RECORDS:
        targets = rng.sample(range(PARTITIONS), 3)  # most partitions get nothing in a burst
        for _ in range(BURST):
            producer.produce(TOPIC, value=b"%08d" % seq, partition=targets[seq % 3], on_delivery=on_delivery)
            seq += 1
        producer.poll(0)
        time.sleep(0.005)
    if producer.flush(30):
        errors.append("records left undelivered")


@pytest.mark.slow
def test_three_clients_consume_while_one_produces() -> None:
    with BrokerProcess() as broker:
        ConfluentDriver().create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        results: dict[str, list[Consumed] | BaseException] = {}

        def consume(name: str) -> None:
            try:
                results[name] = DRIVERS[name].consume(broker.bootstrap, TOPIC, PARTITIONS, RECORDS)
            except BaseException as exc:  # reported by the main thread
                results[name] = exc

        consumers = [threading.Thread(target=consume, args=(name,), name=name)
                     for name in ("confluent-kafka", "kafka-python", "aiokafka")]
        for thread in consumers:
            thread.start()
        errors: list[str] = []
        _produce_in_bursts(broker.bootstrap, errors)
        for thread in consumers:
            thread.join(timeout=180)
        assert not errors, errors[:3]
        for name, outcome in results.items():
            assert not isinstance(outcome, BaseException), f"{name}: {outcome!r}"
            values = [int(r.value) for r in outcome]
            assert sorted(values) == list(range(RECORDS)), f"{name}: {len(values)} records, {len(set(values))} distinct"
            per_partition: dict[int, list[int]] = {}
            for record in outcome:
                per_partition.setdefault(record.partition, []).append(int(record.value))
            assert all(seqs == sorted(seqs) for seqs in per_partition.values()), f"{name}: reordered"
        assert set(results) == {"confluent-kafka", "kafka-python", "aiokafka"}
