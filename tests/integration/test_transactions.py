"""Transactions with confluent-kafka against a real broker process.

A transactional producer commits and aborts across two partitions; a
``read_committed`` consumer must see exactly the committed records and a
``read_uncommitted`` one every record; ``send_offsets_to_transaction`` makes the
group's offsets visible only with the commit; a second producer with the same
``transactional.id`` fences the first, and nothing the first sends afterwards is
appended (test_transactions_versions checks each API's answer to it on the wire).
"""

from __future__ import annotations

import time
import uuid

import pytest

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.topics import create_topic

#: After every test: `pafka transactions find-hanging` finds nothing on the broker (conftest).
#: A short cleanup interval: a test waits for the coordinator's timeout abort.
pytestmark = [pytest.mark.usefixtures("no_hanging_transactions"),
              pytest.mark.pafka_broker_config("transaction.abort.timed.out.transaction.cleanup.interval.ms=200")]


def _producer(bootstrap: str, transactional_id: str, **extra: object):  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                     "socket.timeout.ms": 10000, **extra})


def _consume(bootstrap: str, topic: str, isolation: str, expected: int, wait_s: float = 10.0,
             partitions: int = 2) -> list[tuple[int, bytes]]:
    """Everything ``topic`` shows at this isolation level, read until ``expected`` records or ``wait_s``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        seen: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(seen) < expected:
            seen.extend((m.partition(), m.value()) for m in consumer.consume(100, 0.2) if m.error() is None)
        # A little longer: records beyond the expected ones must not show up either.
        seen.extend((m.partition(), m.value()) for m in consumer.consume(100, 0.5) if m.error() is None)
        return seen
    finally:
        consumer.close()


def test_commit_and_abort_across_two_partitions(broker: BrokerProcess) -> None:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    producer = _producer(broker.bootstrap, f"tid-{topic}")
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(20)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(10)
    producer.abort_transaction(20)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, f"later-{i}".encode(), partition=i % 2)
    producer.commit_transaction(20)

    committed = sorted(v for _, v in _consume(broker.bootstrap, topic, "read_committed", 14))
    assert committed == sorted([f"committed-{i}".encode() for i in range(10)]
                               + [f"later-{i}".encode() for i in range(4)])
    everything = sorted(v for _, v in _consume(broker.bootstrap, topic, "read_uncommitted", 20))
    assert everything == sorted([f"committed-{i}".encode() for i in range(10)]
                                + [f"aborted-{i}".encode() for i in range(6)]
                                + [f"later-{i}".encode() for i in range(4)])
    # Order within a partition is the produce order.
    by_partition = [v for p, v in _consume(broker.bootstrap, topic, "read_committed", 14) if p == 0]
    assert by_partition == [f"committed-{i}".encode() for i in range(0, 10, 2)] + [b"later-0", b"later-2"]


def test_read_committed_waits_for_the_commit(broker: BrokerProcess) -> None:
    topic = f"txn-lso-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    producer = _producer(broker.bootstrap, f"tid-{topic}")
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"open-{i}".encode(), partition=0)
    producer.flush(10)
    assert _consume(broker.bootstrap, topic, "read_committed", 1, wait_s=1.5, partitions=1) == []
    assert len(_consume(broker.bootstrap, topic, "read_uncommitted", 5, partitions=1)) == 5
    producer.commit_transaction(20)
    assert len(_consume(broker.bootstrap, topic, "read_committed", 5, partitions=1)) == 5


def test_send_offsets_to_transaction(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = f"txn-offsets-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    group = f"copier-{topic}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        producer = _producer(broker.bootstrap, f"tid-{topic}")
        producer.init_transactions(20)
        for committed, offsets in ((False, (3, 4)), (True, (7, 9))):
            producer.begin_transaction()
            producer.produce(topic, b"x", partition=0)
            positions = [TopicPartition(topic, 0, offsets[0]), TopicPartition(topic, 1, offsets[1])]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 20)
            if committed:
                producer.commit_transaction(20)
            else:
                producer.abort_transaction(20)
            stored = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 10)
            expected = [offsets[0], offsets[1]] if committed else [-1001, -1001]
            assert [tp.offset for tp in stored] == expected
    finally:
        consumer.close()


def test_a_second_producer_fences_the_first(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException

    topic = f"txn-fence-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    tid = f"tid-{topic}"
    first = _producer(broker.bootstrap, tid)
    first.init_transactions(20)
    first.begin_transaction()
    first.produce(topic, b"zombie-0", partition=0)
    first.flush(10)
    second = _producer(broker.bootstrap, tid)
    second.init_transactions(30)  # aborts the first's transaction, then bumps the epoch
    second.begin_transaction()
    second.produce(topic, b"fresh", partition=1)
    second.commit_transaction(20)
    with pytest.raises(KafkaException) as raised:
        first.produce(topic, b"zombie-1", partition=1)
        first.commit_transaction(20)
    error = raised.value.args[0]
    assert error.fatal() or "fenced" in error.str().lower(), error
    with pytest.raises(KafkaException):  # a fenced producer stays fenced
        first.begin_transaction()
        first.produce(topic, b"zombie-2", partition=0)
        first.commit_transaction(10)
    assert [v for _, v in _consume(broker.bootstrap, topic, "read_committed", 1)] == [b"fresh"]
    # What the first wrote before the fence was appended and aborted; nothing after it was appended.
    assert sorted(v for _, v in _consume(broker.bootstrap, topic, "read_uncommitted", 2)) == [b"fresh", b"zombie-0"]


_OPEN_AND_WAIT = """
import sys, time
from confluent_kafka import Producer
bootstrap, tid, topic = sys.argv[1:4]
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 1500,
                     "socket.timeout.ms": 1500})
producer.init_transactions(20)
producer.begin_transaction()
producer.produce(topic, b"left-open", partition=0)
producer.flush(10)
print("open", flush=True)
time.sleep(60)
"""


def test_a_transaction_past_its_timeout_is_aborted(broker: BrokerProcess) -> None:
    """A producer process SIGKILLed with its transaction open: the coordinator aborts it after
    ``transaction.timeout.ms`` and the last stable offset moves past it."""
    import signal
    import subprocess
    import sys

    from tests.integration.test_transactions_versions import read_committed

    topic = f"txn-timeout-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    process = subprocess.Popen([sys.executable, "-c", _OPEN_AND_WAIT, broker.bootstrap, f"tid-{topic}", topic],
                               stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"open\n"
        assert read_committed(broker, topic, 0)[:2] == (1, 0)  # the open transaction holds the LSO back
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    # Its record and the abort marker, stable.
    wait_until(lambda: read_committed(broker, topic, 0), 15, "the abort marker stable", interval=0.1,
               until=lambda answer: answer == (2, 2, [0]))
    other = _producer(broker.bootstrap, f"tid2-{topic}")
    other.init_transactions(20)
    other.begin_transaction()
    other.produce(topic, b"after", partition=0)
    other.commit_transaction(20)
    assert [v for _, v in _consume(broker.bootstrap, topic, "read_committed", 1, partitions=1)] == [b"after"]


def test_transaction_timeout_above_the_maximum_is_refused(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException

    producer = _producer(broker.bootstrap, f"tid-max-{uuid.uuid4().hex[:8]}",
                         **{"transaction.timeout.ms": 900_001})
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(10)
    assert "INVALID_TRANSACTION_TIMEOUT" in raised.value.args[0].name() or \
        "timeout" in raised.value.args[0].str().lower()


def test_kafka_python_commits_and_aborts(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    topic = f"txn-kp-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"tid-{topic}")
    try:
        producer.init_transactions()
        for commit, prefix in ((True, "kept"), (False, "dropped"), (True, "also-kept")):
            producer.begin_transaction()
            for i in range(4):
                producer.send(topic, f"{prefix}-{i}".encode(), partition=i % 2)
            producer.flush(10)  # abort_transaction drops what is not sent yet: send it, so there is something to abort
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(5)
    expected = sorted(f"{p}-{i}".encode() for p in ("kept", "also-kept") for i in range(4))
    assert sorted(v for _, v in _consume(broker.bootstrap, topic, "read_committed", 8)) == expected
    assert len(_consume(broker.bootstrap, topic, "read_uncommitted", 12)) == 12


def test_aiokafka_commits_and_aborts(broker: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    topic = f"txn-aio-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"tid-{topic}")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(4):
                    await producer.send(topic, f"kept-{i}".encode(), partition=i % 2)
            await producer.begin_transaction()
            for i in range(4):
                await producer.send(topic, f"dropped-{i}".encode(), partition=i % 2)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(produce(), 60))
    assert sorted(v for _, v in _consume(broker.bootstrap, topic, "read_committed", 4)) == \
        sorted(f"kept-{i}".encode() for i in range(4))
    assert len(_consume(broker.bootstrap, topic, "read_uncommitted", 8)) == 8


def test_the_transactional_id_and_an_open_transaction_survive_a_broker_kill() -> None:
    """SIGKILL with a transaction open: after the restart the id keeps its producer id, a new instance is
    fenced in (its epoch bumped past the old one), the open transaction is aborted, the committed one kept."""
    import signal

    from confluent_kafka import KafkaException

    with BrokerProcess() as broker:
        topic = "txn-kill"
        create_topic(broker.bootstrap, topic, 2)
        tid = "tid-kill"
        first = _producer(broker.bootstrap, tid)
        first.init_transactions(20)
        first.begin_transaction()
        first.produce(topic, b"committed", partition=0)
        first.commit_transaction(20)
        first.begin_transaction()
        first.produce(topic, b"open", partition=1)
        first.flush(10)
        broker.restart(signal.SIGKILL)
        second = _producer(broker.bootstrap, tid)
        second.init_transactions(30)
        second.begin_transaction()
        second.produce(topic, b"after", partition=1)
        second.commit_transaction(20)
        assert sorted(v for _, v in _consume(broker.bootstrap, topic, "read_committed", 2)) == \
            [b"after", b"committed"]
        with pytest.raises(KafkaException):
            first.begin_transaction()
            first.produce(topic, b"zombie", partition=0)
            first.commit_transaction(10)
        assert b"zombie" not in [v for _, v in _consume(broker.bootstrap, topic, "read_committed", 3, wait_s=2)]
