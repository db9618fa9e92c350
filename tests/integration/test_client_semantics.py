"""Topic-level produce rules and fetch waiting, as a real client observes them.

- ``message.timestamp.type=LogAppendTime``: consumers see the broker's time
  and the LogAppendTime type, whatever time the producer set.
- ``cleanup.policy=compact``: a record without a key is refused (INVALID_RECORD).
- ``max.message.bytes``: a batch above the topic's limit is refused (MSG_SIZE_TOO_LARGE).
- Fetch ``min_bytes``: a fetch that found too little waits for ``max_wait_ms``
  (it ends early only when enough bytes arrived).
"""

from __future__ import annotations

import time

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic
from tests.integration.clients import CONSUME_DEADLINE_S


def _delivery_errors(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]],
                     **config: object) -> list[object]:
    from confluent_kafka import Producer

    outcomes: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, **config})
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=lambda err, msg: outcomes.append(err))
    assert producer.flush(20) == 0
    return outcomes


def test_log_append_time_replaces_the_producers_timestamp(broker: BrokerProcess) -> None:
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition

    create_topic(broker.bootstrap, "append-time", 1, {"message.timestamp.type": "LogAppendTime"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd"})
    before = int(time.time() * 1000)
    for i in range(50):
        producer.produce("append-time", value=b"%d" % i, timestamp=1_000_000 + i)
    assert producer.flush(10) == 0
    after = int(time.time() * 1000)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pafka-tests-unused"})
    try:
        consumer.assign([TopicPartition("append-time", 0, 0)])
        stamps = []
        deadline = time.monotonic() + CONSUME_DEADLINE_S
        while len(stamps) < 50 and time.monotonic() < deadline:
            stamps += [m.timestamp() for m in consumer.consume(50, timeout=1) if m.error() is None]
    finally:
        consumer.close()
    assert len(stamps) == 50
    assert all(kind == TIMESTAMP_LOG_APPEND_TIME for kind, _ in stamps), stamps[:3]
    assert all(before - 1000 <= ts <= after + 1000 for _, ts in stamps), (before, after, stamps[:3])


def test_compacted_topic_refuses_keyless_records(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError

    create_topic(broker.bootstrap, "compacted", 1, {"cleanup.policy": "compact"})
    outcomes = _delivery_errors(broker.bootstrap, "compacted", [(b"k", b"kept"), (None, b"no key")],
                                **{"linger.ms": 0, "max.in.flight": 1, "batch.num.messages": 1})
    assert outcomes[0] is None
    assert outcomes[1] is not None and outcomes[1].code() == KafkaError.INVALID_RECORD, outcomes[1]


def test_topic_max_message_bytes(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError

    create_topic(broker.bootstrap, "small-records", 1, {"max.message.bytes": "2000"})
    outcomes = _delivery_errors(broker.bootstrap, "small-records", [(b"k", b"x" * 100), (b"k", b"y" * 5000)],
                                **{"linger.ms": 0, "max.in.flight": 1, "batch.num.messages": 1})
    assert outcomes[0] is None
    assert outcomes[1] is not None and outcomes[1].code() == KafkaError.MSG_SIZE_TOO_LARGE, outcomes[1]


def test_fetch_waits_for_min_bytes_until_max_wait(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("min-bytes", value=b"small").get(timeout=10)
    tp = TopicPartition("min-bytes", 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                             fetch_min_bytes=1 << 20, fetch_max_wait_ms=800)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        consumer.position(tp)  # resolve the offset first: only the fetch is timed
        started = time.monotonic()
        records = []
        while not records and time.monotonic() - started < 10:
            records = consumer.poll(timeout_ms=3000).get(tp, [])
        waited = time.monotonic() - started
    finally:
        consumer.close()
        producer.close()
    assert [r.value for r in records] == [b"small"]
    # Less than min_bytes was there: the broker held the fetch for (about) max_wait.
    assert 0.7 <= waited < 3.0, waited
