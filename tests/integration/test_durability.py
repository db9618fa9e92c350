"""Nothing acknowledged is lost: SIGKILL mid-produce, SIGTERM and restart.

The producer is confluent-kafka with acks=all. With
``log.flush.interval.messages=1`` every acknowledged record was fsynced
before its acknowledgement, so a broker killed with SIGKILL while records are
in flight must, after restart, hold every record it acknowledged at the offset
it acknowledged. With default flushing (the page cache only), a SIGTERM is a
clean shutdown that flushes: a restart loses nothing at all.
"""

from __future__ import annotations

import time

import pytest

from pytest_pafka.broker_process import BrokerProcess
from tests.integration.clients import ConfluentDriver

TOPIC = "durable"
PARTITIONS = 3
KILL_AFTER_ACKS = 5000
PRODUCE_DEADLINE_S = 60.0
MAX_IN_FLIGHT = 2000  # records queued in the client but not yet acknowledged


def _acked_producer(bootstrap: str):  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    acked: list[tuple[int, int, bytes]] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                         "batch.num.messages": 100, "message.timeout.ms": 10000,
                         "reconnect.backoff.max.ms": 200})
    return producer, acked, on_delivery


def _produce_until(producer, on_delivery, acked: list, target: int, seq: int) -> int:  # type: ignore[no-untyped-def]
    """Produce until ``target`` acknowledgements, with a bounded number in flight; returns the next seq."""
    deadline = time.monotonic() + PRODUCE_DEADLINE_S
    while len(acked) < target and time.monotonic() < deadline:
        if len(producer) >= MAX_IN_FLIGHT:
            producer.poll(0.005)
            continue
        producer.produce(TOPIC, key=b"k%d" % (seq % 11), value=b"%08d" % seq, on_delivery=on_delivery)
        producer.poll(0)
        seq += 1
    return seq


def _stored(bootstrap: str) -> dict[tuple[int, int], bytes]:
    """Every record in the topic: read to the end of each partition."""
    consumed = ConfluentDriver().consume(bootstrap, TOPIC, PARTITIONS, expected=None)
    return {(r.partition, r.offset): r.value for r in consumed}


@pytest.mark.parametrize("flush", ["every-message", "default"])
def test_sigkill_while_producing_loses_no_acknowledged_record(flush: str) -> None:
    # A SIGKILL leaves the page cache intact, so even without fsyncs nothing
    # acknowledged may be lost; the fsync setting matters for power loss.
    overrides = ["log.flush.interval.messages=1"] if flush == "every-message" else []
    with BrokerProcess(*overrides) as broker:
        ConfluentDriver().create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        producer, acked, on_delivery = _acked_producer(broker.bootstrap)
        seq = _produce_until(producer, on_delivery, acked, KILL_AFTER_ACKS, 0)
        # More records on their way (sent by librdkafka's threads) as the broker dies.
        for extra in range(seq, seq + 1000):
            producer.produce(TOPIC, key=b"k%d" % (extra % 11), value=b"%08d" % extra, on_delivery=on_delivery)
        time.sleep(0.003)
        broker.kill()
        # Delivery reports are only handed to us by poll(): none arrives after this copy.
        acknowledged = list(acked)
        assert len(acknowledged) >= KILL_AFTER_ACKS, f"only {len(acknowledged)} records acknowledged"
        broker.start()
        # Only the acknowledged records must be there; any others may or may not be.
        stored = _stored(broker.bootstrap)
        missing = [(p, o, v) for p, o, v in acknowledged if stored.get((p, o)) != v]
        assert not missing, f"{len(missing)} acknowledged records lost or changed, first {missing[:5]}"
        producer.purge()
        producer.flush(0)


def test_sigterm_and_restart_lose_nothing() -> None:
    records = 20000
    with BrokerProcess() as broker:
        ConfluentDriver().create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        producer, acked, on_delivery = _acked_producer(broker.bootstrap)
        for seq in range(records):
            producer.produce(TOPIC, key=b"k%d" % (seq % 11), value=b"%08d" % seq, on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(60) == 0
        assert len(acked) == records
        assert broker.terminate() == 0
        assert "shut down cleanly" in broker.log_text()
        broker.start()
        stored = _stored(broker.bootstrap)
        assert len(stored) == records
        assert sorted(stored.values()) == sorted(v for _, _, v in acked)
        assert all(stored[(p, o)] == v for p, o, v in acked)


@pytest.mark.slow
def test_repeated_sigkills_while_producing() -> None:
    """Kill, restart, keep producing, three times over: every acknowledgement holds."""
    with BrokerProcess("log.flush.interval.messages=1", "log.segment.bytes=200000") as broker:
        ConfluentDriver().create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        producer, acked, on_delivery = _acked_producer(broker.bootstrap)
        seq = 0
        for kill in range(1, 4):
            seq = _produce_until(producer, on_delivery, acked, kill * 3000, seq)
            assert len(acked) >= kill * 3000, f"stalled at {len(acked)} acknowledgements after {kill - 1} kills"
            broker.kill()
            broker.start()
        assert producer.flush(30) == 0
        stored = _stored(broker.bootstrap)
        missing = [(p, o, v) for p, o, v in acked if stored.get((p, o)) != v]
        assert not missing, f"{len(missing)} acknowledged records lost or changed, first {missing[:5]}"
