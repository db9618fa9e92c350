"""A broker SIGKILLed at each point of a transaction's end, with confluent-kafka and real broker processes.

The points are those of Kafka's protocol for ending a transaction:

- (a) before PrepareCommit / PrepareAbort: the transaction is open (Ongoing in
  ``__transaction_state``, its records in the partitions). After the restart the
  coordinator still knows it: its producer commits or aborts it, or, gone, the
  coordinator aborts it once ``transaction.timeout.ms`` has passed.
- (b) between PrepareCommit / PrepareAbort and the markers: EndTxn got no answer;
  the restarted coordinator finds the prepare record on load, writes the markers,
  then CompleteCommit / CompleteAbort; the producer's retried EndTxn succeeds.
- (c) after the markers, before CompleteCommit / CompleteAbort: the restarted
  coordinator writes the markers again (a second marker changes nothing a
  reader sees), then completes.

And at (b), for the aborts the coordinator starts itself: a new instance's
fencing of an open transaction, and a transaction past its timeout; and a
prepared commit whose producer is gone (a new instance waits for it, never
aborts it).

(b) and (c) cannot be timed from outside the process: the broker is started with
the test-only ``PAFKA_TEST_TXN_CRASH=<step>:<transactional id>`` (see
coordinator/transaction/transaction_marker_channel_manager.py) and SIGKILLs itself
there; it is restarted without it.

After each, ``read_committed`` readers see all of the transaction in every
partition or none of it, the group's transactional offsets follow the same
outcome, the last stable offset is back at the high watermark,
``__transaction_state`` holds the transitions Kafka writes, in order, and
``pafka transactions find-hanging`` finds nothing.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from client import KafkaClient, TopicPartition
from coordinator.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from coordinator.common.partitioner import partition_for
from coordinator.transaction.transaction_log import read
from coordinator.transaction.transaction_marker_channel_manager import CRASH_POINT_ENV
from protocol.request_constants import LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.topics import create_topic
from testing.transactions import assert_no_hanging_transactions
from tests.integration.txn_calls import retrying

PARTITIONS = 3
RECORDS_PER_PARTITION = 3
TXN_STATE_PARTITIONS = 50
CLEANUP_INTERVAL = "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"
#: The offsets each transaction commits for its group (partition → offset).
GROUP_OFFSETS = {0: 5, 1: 7}
NO_OFFSET = -1001
#: Written after what a test checks, in every partition: a reader that got it has seen everything before it.
END = b"end"


@dataclass
class Scenario:
    broker: BrokerProcess
    topic: str
    tid: str
    group: str

    @property
    def values(self) -> dict[int, list[bytes]]:
        return {p: [f"{self.tid}-p{p}-{i}".encode() for i in range(RECORDS_PER_PARTITION)] for p in range(PARTITIONS)}


@pytest.fixture
def start() -> Iterator[Callable[[str | None], Scenario]]:
    """Starts the test's own broker, with a crash point at ``step`` for the scenario's transactional id."""
    brokers: list[BrokerProcess] = []

    def make(step: str | None = None) -> Scenario:
        name = uuid.uuid4().hex[:8]
        tid = f"tid-{name}"
        env = {**os.environ, CRASH_POINT_ENV: f"{step}:{tid}"} if step is not None else None
        broker = BrokerProcess(CLEANUP_INTERVAL, env=env)
        brokers.append(broker.__enter__())
        topic = f"recovery-{name}"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        return Scenario(broker, topic, tid, f"group-{name}")

    try:
        yield make
    finally:
        for broker in brokers:
            print(broker.log_text()[-8000:])  # shown when the test failed: the broker's side
            broker.cleanup()


def _producer(bootstrap: str, transactional_id: str, **extra: object) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                     **extra})


def _open_transaction(s: Scenario, **extra: object) -> Any:
    """A producer whose transaction holds records in every partition and the group's offsets, all acknowledged."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    producer = _producer(s.broker.bootstrap, s.tid, **extra)
    producer.init_transactions(20)
    producer.begin_transaction()
    for p, values in s.values.items():
        for value in values:
            producer.produce(s.topic, value, partition=p)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": s.broker.bootstrap, "group.id": s.group})
    try:
        offsets = [CKTopicPartition(s.topic, p, o) for p, o in GROUP_OFFSETS.items()]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 20)
    finally:
        consumer.close()
    return producer


#: How long a transactional call is retried while the broker restarts and the coordinator loads.
CALL_TIMEOUT_S = 40.0


def _end(producer: Any, commit: bool) -> None:
    retrying(producer.commit_transaction if commit else producer.abort_transaction, CALL_TIMEOUT_S)


def _across_a_crash(s: Scenario, call: Callable[[], None]) -> None:
    """``call`` while the broker kills itself at its crash point; the broker restarted (without the point)
    as soon as it is dead: the call retries until the restarted coordinator has answered it."""
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(call)
        _restart_after_the_crash(s)
        running.result(60)


def _restart_after_the_crash(s: Scenario, wait_s: float = 15.0) -> None:
    assert s.broker.process is not None
    assert s.broker.process.wait(wait_s) == -signal.SIGKILL
    s.broker.env = None
    s.broker.start()


def _assert_fenced(producer: Any) -> None:
    """The producer's epoch is older than the coordinator's: its commit fails, and not retriably."""
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as raised:
        retrying(producer.commit_transaction, 20)
    assert not raised.value.args[0].retriable(), raised.value.args[0]


def _read_committed(s: Scenario, wait_s: float = 15.0) -> dict[int, list[bytes]]:
    """What a read_committed consumer sees in each partition, up to and including the first ``END`` record
    of each (the test writes one after what it checks, so everything before it is settled)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    consumer = Consumer({"bootstrap.servers": s.broker.bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 50})
    seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([CKTopicPartition(s.topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + wait_s
        while any(END not in values for values in seen.values()):
            assert time.monotonic() < deadline, f"the END records were not all read: {seen}"
            for m in consumer.consume(100, 0.2):
                partition, value = m.partition(), m.value()
                if m.error() is None and partition is not None and value is not None and END not in seen[partition]:
                    seen[partition].append(value)
    finally:
        consumer.close()
    return seen


def _group_offsets(s: Scenario) -> list[int]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    consumer = Consumer({"bootstrap.servers": s.broker.bootstrap, "group.id": s.group,
                         "isolation.level": "read_committed"})
    try:
        return [tp.offset for tp in consumer.committed([CKTopicPartition(s.topic, p) for p in GROUP_OFFSETS], 10)]
    finally:
        consumer.close()


def _offsets(s: Scenario, isolation_level: int) -> list[int]:
    """Each partition's end at ``isolation_level``: the high watermark, or the last stable offset."""
    with KafkaClient(s.broker.bootstrap, timeout=10) as client:
        tps = [TopicPartition(s.topic, p) for p in range(PARTITIONS)]
        found = client.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP), isolation_level=isolation_level)
        return [found[tp].offset for tp in tps]


def _states(s: Scenario) -> list[str]:
    """The states ``__transaction_state`` records for the scenario's id, in log order (repeats folded)."""
    partition = partition_for(s.tid, TXN_STATE_PARTITIONS)
    states: list[str] = []
    with KafkaClient(s.broker.bootstrap, timeout=10) as client:
        offset = 0
        end = client.latest_offset(TRANSACTION_STATE_TOPIC_NAME, partition)
        while offset < end:
            fetched = client.fetch(TRANSACTION_STATE_TOPIC_NAME, partition, offset, max_wait_ms=0)
            for record in fetched.records:
                assert record.key is not None
                tid, metadata = read(record.key, record.value)
                if tid == s.tid and metadata is not None and (not states or states[-1] != metadata.state.state_name):
                    states.append(metadata.state.state_name)
            offset = fetched.next_offset
    return states


def _assert_outcome(s: Scenario, committed: bool, markers_per_partition: int, then: tuple[str, ...] = ()) -> None:
    """All of the transaction or none of it, in every partition and in the group's offsets; the LSO is free.
    ``then``: the states the id went through after the transaction's end."""
    wait_until(lambda: _offsets(s, READ_COMMITTED) == _offsets(s, READ_UNCOMMITTED), 15.0, "the LSO to reach the HW")
    # Every partition holds its records and the markers written for them, nothing more.
    assert _offsets(s, READ_UNCOMMITTED) == [RECORDS_PER_PARTITION + markers_per_partition] * PARTITIONS
    assert _states(s) == ["Empty", "Ongoing", "PrepareCommit" if committed else "PrepareAbort",
                          "CompleteCommit" if committed else "CompleteAbort", *then]
    assert _group_offsets(s) == (list(GROUP_OFFSETS.values()) if committed else [NO_OFFSET] * len(GROUP_OFFSETS))
    # The transactional id goes on: a new instance commits an END record in every partition, read after
    # all of the first transaction or none of it.
    later = _producer(s.broker.bootstrap, s.tid)
    later.init_transactions(20)
    later.begin_transaction()
    for p in range(PARTITIONS):
        later.produce(s.topic, END, partition=p)
    later.commit_transaction(20)
    expected = s.values if committed else {p: [] for p in range(PARTITIONS)}
    assert _read_committed(s) == {p: [*values, END] for p, values in expected.items()}
    assert_no_hanging_transactions(s.broker.bootstrap)


# -- (a) open: the broker dies before PrepareCommit / PrepareAbort ----------------------------------

@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_an_open_transaction_is_ended_by_its_producer_after_a_restart(start: Callable[[str | None], Scenario],
                                                                      commit: bool) -> None:
    scenario = start(None)
    producer = _open_transaction(scenario)
    scenario.broker.restart(signal.SIGKILL)
    _end(producer, commit)
    _assert_outcome(scenario, committed=commit, markers_per_partition=1)


def test_an_open_transaction_left_by_its_producer_is_aborted_after_its_timeout(
        start: Callable[[str | None], Scenario]) -> None:
    scenario = start(None)
    # The timeout counts from the transaction's start, not from the restart: it leaves the restart
    # (slow on a loaded machine) time to find the transaction still open.
    producer = _open_transaction(scenario, **{"transaction.timeout.ms": 6000})
    scenario.broker.restart(signal.SIGKILL)
    assert _offsets(scenario, READ_COMMITTED) == [0] * PARTITIONS  # still open: the LSO holds readers back
    wait_until(lambda: _offsets(scenario, READ_COMMITTED) == _offsets(scenario, READ_UNCOMMITTED), 15.0,
               "the coordinator to abort the transaction")
    _assert_outcome(scenario, committed=False, markers_per_partition=1)
    del producer  # kept until now: it must not end the transaction itself


# -- (b) prepared: the broker dies after PrepareCommit / PrepareAbort, before any marker ---------------

@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_prepared_transaction_is_completed_on_load(start: Callable[[str | None], Scenario], commit: bool) -> None:
    scenario = start("before-markers")
    producer = _open_transaction(scenario)
    _across_a_crash(scenario, lambda: _end(producer, commit))
    _assert_outcome(scenario, committed=commit, markers_per_partition=1)


def test_a_prepared_commit_outlives_its_producer(start: Callable[[str | None], Scenario]) -> None:
    """The outcome is decided once PrepareCommit is written: a new instance of the id, after the restart,
    waits for the commit to complete (CONCURRENT_TRANSACTIONS) instead of aborting the transaction."""
    from confluent_kafka import KafkaException

    scenario = start("before-markers")
    producer = _open_transaction(scenario)
    with pytest.raises(KafkaException):
        producer.commit_transaction(2)  # the broker dies before answering
    _restart_after_the_crash(scenario)
    successor = _producer(scenario.broker.bootstrap, scenario.tid)
    retrying(successor.init_transactions, CALL_TIMEOUT_S)
    _assert_outcome(scenario, committed=True, markers_per_partition=1, then=("Empty",))


def test_a_fencing_abort_interrupted_by_a_crash_is_completed_on_load(start: Callable[[str | None], Scenario]
                                                                     ) -> None:
    """A new instance's InitProducerId fences the old one and aborts its transaction; the broker dies once
    PrepareAbort (with the bumped epoch) is written. After the restart the abort completes, the new
    instance gets its epoch, and the old one stays fenced."""
    scenario = start("before-markers")
    old = _open_transaction(scenario)
    successor = _producer(scenario.broker.bootstrap, scenario.tid)
    _across_a_crash(scenario, lambda: retrying(successor.init_transactions, CALL_TIMEOUT_S))
    _assert_fenced(old)
    _assert_outcome(scenario, committed=False, markers_per_partition=1, then=("Empty",))


def test_a_timeout_abort_interrupted_by_a_crash_is_completed_on_load(start: Callable[[str | None], Scenario]
                                                                     ) -> None:
    """The coordinator aborts a transaction past its timeout and dies once PrepareAbort is written; after
    the restart the abort completes and its producer is fenced by the abort's epoch bump."""
    scenario = start("before-markers")
    producer = _open_transaction(scenario, **{"transaction.timeout.ms": 2000})
    _restart_after_the_crash(scenario, wait_s=20)
    wait_until(lambda: _offsets(scenario, READ_COMMITTED) == _offsets(scenario, READ_UNCOMMITTED), 15.0, "the abort")
    _assert_fenced(producer)
    _assert_outcome(scenario, committed=False, markers_per_partition=1)


# -- (c) marked: the broker dies after the markers, before CompleteCommit / CompleteAbort ---------------

@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_marked_transaction_is_marked_again_and_completed_on_load(start: Callable[[str | None], Scenario],
                                                                    commit: bool) -> None:
    scenario = start("before-complete")
    producer = _open_transaction(scenario)
    _across_a_crash(scenario, lambda: _end(producer, commit))
    # The markers written before the crash and those written again after it: readers see one outcome.
    _assert_outcome(scenario, committed=commit, markers_per_partition=2)
