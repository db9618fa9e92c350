"""Long poll: a waiting fetch returns when data arrives, not when its wait ends.

A librdkafka consumer with ``fetch.wait.max.ms=500`` keeps a fetch parked at
the broker. Records produced one at a time (each sent only after the previous
one was consumed) must reach the consumer in a few milliseconds: if the broker
slept out the wait, the median latency would be about 250 ms.
"""

from __future__ import annotations

import statistics
import time

from pytest_pafka.broker_process import BrokerProcess
from tests.integration.clients import ConfluentDriver

TOPIC = "long-poll"
RECORDS = 300
P50_LIMIT_MS = 5.0
RECEIVE_TIMEOUT_S = 5.0


def test_end_to_end_latency_with_a_long_fetch_wait(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap = broker.bootstrap
    ConfluentDriver().create_topic(bootstrap, TOPIC, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pafka-tests-unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 500, "fetch.min.bytes": 1})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])  # a new, empty topic

        def round_trip(seq: int) -> float:
            sent = time.perf_counter()
            producer.produce(TOPIC, value=b"%d" % seq)
            producer.poll(0)
            deadline = sent + RECEIVE_TIMEOUT_S
            while time.perf_counter() < deadline:
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                assert msg.value() == b"%d" % seq
                return (time.perf_counter() - sent) * 1000
            raise AssertionError(f"record {seq} not consumed within {RECEIVE_TIMEOUT_S}s")

        # Warm-up: connections made, the consumer's position resolved, fetches parked.
        for seq in range(5):
            round_trip(seq)
        latencies = [round_trip(seq) for seq in range(5, 5 + RECORDS)]
    finally:
        consumer.close()
        producer.flush(5)
    p50 = statistics.median(latencies)
    p90 = statistics.quantiles(latencies, n=10)[-1]
    print(f"end-to-end latency over {RECORDS} records: p50 {p50:.2f} ms, p90 {p90:.2f} ms, max {max(latencies):.1f} ms")
    assert p50 <= P50_LIMIT_MS, f"p50 {p50:.2f} ms (p90 {p90:.2f} ms): fetches wait out fetch.wait.max.ms?"
