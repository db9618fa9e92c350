"""kafka-python pinned to brokers of 2016-2017 (``api_version``), as old applications pin it.

With ``api_version=(0, 10, 1)`` kafka-python produces with Produce v2 (message
format v1), fetches with Fetch v3 and joins with JoinGroup v1; ``(0, 11)`` uses
Produce v3 / Fetch v4 / JoinGroup v2. Both use OffsetCommit v2, OffsetFetch
v1-v3, ListGroups and DescribeGroups v0-v1: versions Kafka 4 removed. Two
members share a group, commit, and the admin client lists and describes the
group and its offsets.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pytest_pafka.broker_process import BrokerProcess
from testing.topics import create_topic
from tests.integration.group_helpers import fetch_subscription_metadata

PARTITIONS = 2
COUNT = 20
DEADLINE_S = 60


pytestmark = pytest.mark.pafka_broker_config("group.initial.rebalance.delay.ms=0")


def _member(broker: BrokerProcess, version: tuple[int, ...], group: str, topic: str,
            seen: dict[bytes, int], lock: threading.Lock, index: int, stop: threading.Event,
            assigned: list[set[int]]) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, api_version=version, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, client_id=f"old-{index}")
    try:
        fetch_subscription_metadata(consumer)
        deadline = time.monotonic() + DEADLINE_S
        while not stop.is_set() and time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=200)
            assigned[index] = {tp.partition for tp in consumer.assignment()}
            with lock:
                for records in batches.values():
                    for record in records:
                        seen.setdefault(record.value, index)
            if batches:
                consumer.commit()
        consumer.commit()
    finally:
        consumer.close(autocommit=False)


def _committed(broker: BrokerProcess, version: tuple[int, ...], group: str, topic: str, admin: Any) -> dict[int, int]:
    """The group's committed offsets, read as that client version reads them.

    kafka-python's admin client needs OffsetFetch v2+ (listing a group's
    offsets), which brokers of 0.10.1 did not have: pinned there it refuses to
    ask, so the consumer's own lookup (OffsetFetch v1) reads them instead.
    """
    if version >= (0, 10, 2):
        offsets = admin.list_group_offsets({group: None})[group]
        return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}
    from kafka import KafkaConsumer, TopicPartition

    reader = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=version, group_id=group,
                           enable_auto_commit=False)
    try:
        found = {p: reader.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        reader.close(autocommit=False)
    return {p: o for p, o in found.items() if o is not None}


@pytest.mark.parametrize("version", [(0, 10, 1), (0, 11)], ids=["0.10.1", "0.11"])
def test_produce_group_consume_commit_and_admin(broker: BrokerProcess, version: tuple[int, ...]) -> None:
    from kafka import KafkaAdminClient, KafkaProducer

    tag = "-".join(map(str, version))
    topic, group = f"old-kp-{tag}", f"old-kp-group-{tag}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=version)
    futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(COUNT)]
    producer.flush(30)
    ends = dict.fromkeys(range(PARTITIONS), 0)
    for f in futures:
        meta = f.get(30)
        ends[meta.partition] = max(ends[meta.partition], meta.offset + 1)
    producer.close()
    assert sum(ends.values()) == COUNT

    seen: dict[bytes, int] = {}
    lock, stop = threading.Lock(), threading.Event()
    assigned: list[set[int]] = [set(), set()]
    threads = [threading.Thread(target=_member, args=(broker, version, group, topic, seen, lock, i, stop, assigned),
                                daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=version)
    try:
        deadline = time.monotonic() + DEADLINE_S
        described = None
        while time.monotonic() < deadline:
            with lock:
                done = len(seen) == COUNT
            # A member's assignment is read after its own poll, so it lags the
            # group's rebalance: wait until both members have seen the final one.
            if done and assigned[0] and assigned[1] and not assigned[0] & assigned[1]:
                described = admin.describe_groups([group])[group]
                if len(described["members"]) == 2:
                    break
            time.sleep(0.1)
        assert len(seen) == COUNT, sorted(seen)
        assert assigned[0] and assigned[1] and not assigned[0] & assigned[1], assigned
        assert described is not None and described["group_state"] == "Stable" and len(described["members"]) == 2
        assert group in [g["group_id"] for g in admin.list_groups()]
        committed: dict[int, int] = {}
        while time.monotonic() < deadline:  # the members commit after their last poll
            committed = _committed(broker, version, group, topic, admin)
            if committed == ends:
                break
            time.sleep(0.1)
        assert committed == ends
    finally:
        stop.set()
        for t in threads:
            t.join(DEADLINE_S)
        admin.close()
