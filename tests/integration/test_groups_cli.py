"""``pafka consumer-groups`` against a real broker and groups of real clients."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic
from tests.integration.group_helpers import fetch_subscription_metadata, pafka_tool, poll_until_assigned

TOPIC = "cli-topic"
PER_PARTITION = {0: 10, 1: 25, 2: 7}


def consumer_groups(broker: BrokerProcess, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return pafka_tool(broker.bootstrap, "consumer-groups", *args, check=check)


def table(output: str) -> list[dict[str, str]]:
    lines = [line for line in output.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP"))
    header = lines[start].split()
    return [dict(zip(header, line.split(), strict=False)) for line in lines[start + 1:]]


pytestmark = pytest.mark.pafka_broker_config("group.initial.rebalance.delay.ms=0")


@pytest.fixture
def broker(pafka_broker: BrokerProcess) -> BrokerProcess:
    """A broker of each test's own, with records in every partition of the topic."""
    from confluent_kafka import Producer

    create_topic(pafka_broker.bootstrap, TOPIC, len(PER_PARTITION))
    producer = Producer({"bootstrap.servers": pafka_broker.bootstrap})
    for partition, count in PER_PARTITION.items():
        for i in range(count):
            producer.produce(TOPIC, f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    return pafka_broker


def _commit(broker: BrokerProcess, group: str, offsets: dict[int, int]) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        consumer.close()


def _records_left(broker: BrokerProcess, group: str) -> dict[int, int]:
    """Join the group and read until idle: what a member actually gets from the committed offsets."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    counts = dict.fromkeys(PER_PARTITION, 0)
    try:
        fetch_subscription_metadata(consumer)
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 1.5:
            batch = consumer.poll(timeout_ms=200)
            for tp, records in batch.items():
                counts[tp.partition] += len(records)
                idle_since = time.monotonic()
    finally:
        consumer.close()
    return counts


def test_describe_shows_lag_that_matches_the_records_left(broker: BrokerProcess) -> None:
    _commit(broker, "lagging", {0: 4, 1: 25, 2: 1})
    rows = table(consumer_groups(broker, "--describe", "--group", "lagging").stdout)
    assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"], r["CONSUMER-ID"])
            for r in rows] == [(TOPIC, "0", "4", "10", "6", "-"), (TOPIC, "1", "25", "25", "0", "-"),
                               (TOPIC, "2", "1", "7", "6", "-")]
    lag = {int(r["PARTITION"]): int(r["LAG"]) for r in rows}
    assert _records_left(broker, "lagging") == lag


def test_describe_an_active_group_lists_its_members(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id="live", client_id="live-client",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        poll_until_assigned(consumer)
        rows = table(consumer_groups(broker, "--describe", "--group", "live").stdout)
        assert {r["PARTITION"] for r in rows} == {"0", "1", "2"}
        assert all(r["CLIENT-ID"] == "live-client" and r["HOST"] == "/127.0.0.1" for r in rows)
        assert all(r["CURRENT-OFFSET"] == "-" and r["LAG"] == "-" for r in rows)  # nothing committed yet
        members = table(consumer_groups(broker, "--describe", "--group", "live", "--members").stdout)
        assert [(m["CLIENT-ID"], m["#PARTITIONS"]) for m in members] == [("live-client", "3")]
        state = table(consumer_groups(broker, "--describe", "--group", "live", "--state").stdout)
        assert [(s["STATE"], s["#MEMBERS"], s["ASSIGNMENT-STRATEGY"]) for s in state] == [("Stable", "1", "range")]
        listed = consumer_groups(broker, "--list", "--state").stdout
        assert table(listed) == [{"GROUP": "live", "STATE": "Stable"}]
        refused = consumer_groups(broker, "--reset-offsets", "--group", "live", "--topic", TOPIC, "--to-earliest",
                                  "--execute", check=False)
        assert refused.returncode != 0 and "inactive" in refused.stderr
    finally:
        consumer.close()


def test_reset_offsets_dry_run_then_execute(broker: BrokerProcess) -> None:
    _commit(broker, "resetting", {0: 5, 1: 5, 2: 5})
    plan = table(consumer_groups(broker, "--reset-offsets", "--group", "resetting", "--topic", TOPIC,
                                 "--to-latest").stdout)
    assert {r["PARTITION"]: r["NEW-OFFSET"] for r in plan} == {"0": "10", "1": "25", "2": "7"}
    assert {r["CURRENT-OFFSET"] for r in table(consumer_groups(broker, "--describe", "--group", "resetting").stdout)} \
        == {"5"}  # a dry run changes nothing
    consumer_groups(broker, "--reset-offsets", "--group", "resetting", "--topic", f"{TOPIC}:0,2", "--shift-by", "-3",
                    "--execute")
    consumer_groups(broker, "--reset-offsets", "--group", "resetting", "--topic", f"{TOPIC}:1", "--to-offset", "99",
                    "--execute")
    rows = table(consumer_groups(broker, "--describe", "--group", "resetting").stdout)
    assert {r["PARTITION"]: (r["CURRENT-OFFSET"], r["LAG"]) for r in rows} == {
        "0": ("2", "8"), "1": ("25", "0"), "2": ("2", "5")}
    consumer_groups(broker, "--reset-offsets", "--group", "resetting", "--all-topics", "--to-datetime",
                    "2000-01-01T00:00:00.000", "--execute")
    rows = table(consumer_groups(broker, "--describe", "--group", "resetting").stdout)
    assert {r["CURRENT-OFFSET"] for r in rows} == {"0"}
    assert _records_left(broker, "resetting") == PER_PARTITION


def test_list_and_delete(broker: BrokerProcess) -> None:
    _commit(broker, "a-group", {0: 1})
    _commit(broker, "b-group", {1: 1})
    assert consumer_groups(broker, "--list").stdout.split() == ["a-group", "b-group"]
    deleted = consumer_groups(broker, "--delete", "--group", "a-group")
    assert "Deletion of requested consumer groups ('a-group') was successful." in deleted.stdout
    again = consumer_groups(broker, "--delete", "--group", "a-group", check=False)
    assert again.returncode == 1 and "GROUP_ID_NOT_FOUND" in again.stdout
    assert consumer_groups(broker, "--list").stdout.split() == ["b-group"]


def _kcat_group_read(broker: BrokerProcess, group: str) -> list[str]:
    """kcat's balanced consumer (-G): reads to the end of every partition, commits on exit."""
    result = subprocess.run(["kcat", "-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q",
                             "-f", "%p:%o\\n", TOPIC], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_kcat_group_commits_and_lag_follows_new_records(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    assert shutil.which("kcat"), "kcat is not installed (apt-get install -y kcat)"
    assert len(_kcat_group_read(broker, "kcat-group")) == sum(PER_PARTITION.values())
    rows = table(consumer_groups(broker, "--describe", "--group", "kcat-group").stdout)
    assert {r["PARTITION"]: r["LAG"] for r in rows} == {"0": "0", "1": "0", "2": "0"}
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce(TOPIC, b"more", partition=i % 2)
    assert producer.flush(30) == 0
    rows = table(consumer_groups(broker, "--describe", "--group", "kcat-group").stdout)
    lag = {int(r["PARTITION"]): int(r["LAG"]) for r in rows}
    assert lag == {0: 3, 1: 2, 2: 0}
    read = _kcat_group_read(broker, "kcat-group")
    assert sorted(read) == sorted([f"0:{10 + i}" for i in range(3)] + [f"1:{25 + i}" for i in range(2)])
