"""``pafka transactions`` against a real broker process: list, describe, describe-producers, find-hanging, abort.

Transactions are opened and committed with confluent-kafka's transactional
producer; the hanging transaction is manufactured at wire level: a
transactional batch written after its producer's transaction completed, so
the partition holds it open while the coordinator knows nothing of it. With
KIP-890 verification a partition refuses such a batch, so this broker runs
with ``transaction.partition.verification.enable=false`` (Kafka's switch).
"""

from __future__ import annotations

import subprocess
import time
import uuid
from typing import Any

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic
from testing.transactions import assert_no_hanging_transactions, hanging_transactions
from tests.integration.group_helpers import pafka_tool
from tests.integration.test_transactions_admin_versions import _aborted_from
from tests.integration.test_transactions_versions import WireProducer, _retry, _until_stable, read_committed

NO_VERIFICATION = "transaction.partition.verification.enable=false"


def transactions(broker: BrokerProcess, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return pafka_tool(broker.bootstrap, "transactions", *args, check=check)


def rows(output: str) -> list[dict[str, str]]:
    """Kafka's table: a header line, then one line per row, cells separated by padding and a tab."""
    lines = output.splitlines()
    header = [cell.strip() for cell in lines[0].split("\t")][:-1]
    out = []
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.split("\t")][:-1]
        out.append(dict(zip(header, cells, strict=True)))
    return out


pytestmark = pytest.mark.pafka_broker_config(NO_VERIFICATION)


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    topic = f"txcli-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions)
    return topic


def _producer(broker: BrokerProcess, tid: str) -> Any:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 0})
    producer.init_transactions(30)
    return producer


def test_list_describe_and_describe_producers_of_an_open_then_committed_transaction(broker: BrokerProcess) -> None:
    topic = _topic(broker, partitions=2)
    tid = f"tid-{topic}"
    producer = _producer(broker, tid)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"v{i}".encode(), partition=1)
    assert producer.flush(30) == 0
    before = int(time.time() * 1000)

    (listed,) = [r for r in rows(transactions(broker, "list").stdout) if r["TransactionalId"] == tid]
    assert (listed["Coordinator"], listed["TransactionState"]) == ("0", "Ongoing")
    producer_id = listed["ProducerId"]

    (described,) = rows(transactions(broker, "describe", "--transactional-id", tid).stdout)
    assert {k: described[k] for k in ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                                      "TransactionState", "TopicPartitions")} == {
        "CoordinatorId": "0", "TransactionalId": tid, "ProducerId": producer_id, "ProducerEpoch": "0",
        "TransactionState": "Ongoing", "TopicPartitions": f"{topic}-1"}
    assert int(described["TransactionTimeoutMs"]) == 60_000  # librdkafka's transaction.timeout.ms
    assert int(described["CurrentTransactionStartTimeMs"]) <= before
    assert int(described["TransactionDurationMs"]) >= 0

    (open_state,) = rows(transactions(broker, "describe-producers", "--topic", topic, "--partition", "1").stdout)
    assert {k: open_state[k] for k in ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                                       "CurrentTransactionStartOffset")} == {
        "ProducerId": producer_id, "ProducerEpoch": "0", "LatestCoordinatorEpoch": "-1", "LastSequence": "2",
        "CurrentTransactionStartOffset": "0"}
    assert before - 60_000 <= int(open_state["LastTimestamp"]) <= int(time.time() * 1000)
    assert rows(transactions(broker, "describe-producers", "--topic", topic, "--partition", "0").stdout) == []
    assert rows(transactions(broker, "describe-producers", "--broker-id", "0", "--topic", topic,
                             "--partition", "1").stdout) == [open_state]
    # The list's filters: an id pattern, and a duration (running longer than an hour: not this one).
    assert [r["TransactionalId"] for r in rows(transactions(
        broker, "list", "--transactional-id-pattern", f"tid-{topic}|nothing").stdout)] == [tid]
    assert tid not in {r["TransactionalId"] for r in rows(transactions(
        broker, "list", "--duration-filter", "3600000").stdout)}
    assert tid in {r["TransactionalId"] for r in rows(transactions(broker, "list", "--duration-filter", "0").stdout)}
    # Open, but its coordinator knows it: not hanging, whatever its age.
    assert rows(transactions(broker, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0").stdout) == []

    producer.commit_transaction(30)
    _until_stable(broker, topic, 1)
    (committed,) = rows(transactions(broker, "describe", "--transactional-id", tid).stdout)
    assert (committed["TransactionState"], committed["TopicPartitions"], committed["ProducerId"]) == \
        ("CompleteCommit", "", producer_id)
    (closed,) = rows(transactions(broker, "describe-producers", "--topic", topic, "--partition", "1").stdout)
    assert (closed["CurrentTransactionStartOffset"], closed["LatestCoordinatorEpoch"]) == ("None", "0")
    (listed,) = [r for r in rows(transactions(broker, "list").stdout) if r["TransactionalId"] == tid]
    assert listed["TransactionState"] == "CompleteCommit"
    assert_no_hanging_transactions(broker.bootstrap, [topic])


def test_describe_of_an_unknown_id_fails_as_kafka_does(broker: BrokerProcess) -> None:
    result = transactions(broker, "describe", "--transactional-id", f"nobody-{uuid.uuid4().hex}", check=False)
    assert result.returncode == 1
    assert "Failed to describe transaction state of transactional-id" in result.stderr
    assert "TRANSACTIONAL_ID_NOT_FOUND" in result.stderr


def _hanging_transaction(broker: BrokerProcess, topic: str, inits: int = 1) -> WireProducer:
    """A transactional batch after its producer's transaction completed: the partition holds it open."""
    p = WireProducer(broker, f"tid-{topic}", topic)
    _retry(p.find_coordinator)
    for _ in range(inits):
        p.init()
    p.add_partitions([0])
    assert p.produce(0, [b"committed"]) == 0
    assert p.end(True) == 0
    assert _until_stable(broker, topic, 0) == (2, 2, [])
    assert p.produce(0, [b"hanging"]) == 0  # no AddPartitionsToTxn: the coordinator never hears of it
    return p


def test_find_hanging_then_abort_by_start_offset(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    p = _hanging_transaction(broker, topic)
    assert read_committed(broker, topic, 0)[:2] == (3, 2)  # the LSO is stuck before the hanging batch
    (hanging,) = rows(transactions(broker, "find-hanging", "--topic", topic).stdout)
    assert {k: hanging[k] for k in ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                                    "StartOffset")} == {
        "Topic": topic, "Partition": "0", "ProducerId": str(p.producer_id), "ProducerEpoch": str(p.epoch),
        "CoordinatorEpoch": "0", "StartOffset": "2"}
    # The batch was written with timestamp 0: older than any timeout (Kafka measures from the last write).
    assert hanging["LastTimestamp"] == "0" and int(hanging["Duration(min)"]) > 15
    by_broker = rows(transactions(broker, "find-hanging", "--broker-id", "0").stdout)
    assert [{k: v for k, v in r.items() if k != "Duration(min)"} for r in by_broker if r["Topic"] == topic] == \
        [{k: v for k, v in hanging.items() if k != "Duration(min)"}]
    assert [(h.topic_partition.topic, h.producer.current_transaction_start_offset)
            for h in hanging_transactions(broker.bootstrap, [topic])] == [(topic, 2)]
    with pytest.raises(AssertionError, match="hanging transactions"):
        assert_no_hanging_transactions(broker.bootstrap, [topic], timeout_s=0.5)

    wrong = transactions(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "1", check=False)
    assert wrong.returncode == 1
    assert "Could not find any open transactions starting at offset 1 on partition" in wrong.stderr
    transactions(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")
    assert read_committed(broker, topic, 0)[:2] == (4, 4)  # aborted: the LSO moves past its marker
    assert _aborted_from(broker, topic, 2) == [2]
    assert rows(transactions(broker, "find-hanging", "--topic", topic, "--partition", "0").stdout) == []
    assert_no_hanging_transactions(broker.bootstrap)


def test_abort_by_producer_id_epoch_and_coordinator_epoch(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    p = _hanging_transaction(broker, topic, inits=2)
    assert p.epoch == 1
    missing = transactions(broker, "abort", "--topic", topic, "--partition", "0", "--producer-id",
                           str(p.producer_id), "--producer-epoch", str(p.epoch), check=False)
    assert (missing.returncode, missing.stderr.strip()) == (1, "Missing required argument --coordinator-epoch")
    neither = transactions(broker, "abort", "--topic", topic, "--partition", "0", check=False)
    assert neither.returncode == 1 and "--start-offset" in neither.stderr
    # An older epoch than the producer's is refused by the partition, and nothing is written.
    stale = transactions(broker, "abort", "--topic", topic, "--partition", "0", "--producer-id", str(p.producer_id),
                         "--producer-epoch", "0", "--coordinator-epoch", "0", check=False)
    assert stale.returncode == 1 and "INVALID_PRODUCER_EPOCH" in stale.stderr, stale.stderr
    assert read_committed(broker, topic, 0)[:2] == (3, 2)
    transactions(broker, "abort", "--topic", topic, "--partition", "0", "--producer-id", str(p.producer_id),
                 "--producer-epoch", str(p.epoch), "--coordinator-epoch", "-1")
    assert read_committed(broker, topic, 0)[:2] == (4, 4)
    assert _aborted_from(broker, topic, 2) == [2]
    assert_no_hanging_transactions(broker.bootstrap, [topic])


def test_find_hanging_needs_a_scope(broker: BrokerProcess) -> None:
    result = transactions(broker, "find-hanging", check=False)
    assert result.returncode == 1
    assert "requires either --topic or --broker-id" in result.stderr
    result = transactions(broker, "find-hanging", "--broker-id", "0", "--partition", "0", check=False)
    assert (result.returncode, result.stderr.strip()) == (1, "The --partition argument requires --topic to be provided")
