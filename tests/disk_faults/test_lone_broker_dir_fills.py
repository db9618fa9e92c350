"""A lone broker with two log directories, one on a small tmpfs that fills up (real filesystem).

The full directory goes offline: its partitions answer KAFKA_STORAGE_ERROR, DescribeLogDirs
reports it, the log says so once (no traceback per request); the other directory keeps
taking writes. With space freed and the broker restarted, every acknowledged record is there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from protocol.errors import ErrorCode
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.plugin import BrokerFactory
from testing.disk_faults import can_mount, grow, tmpfs
from tools.dump_log import dump_log_segment

pytestmark = [pytest.mark.process, pytest.mark.skipif(not can_mount(), reason="mounting a tmpfs needs root")]

TOPIC = "fills"
RECORD = 8 * 1024


@pytest.fixture
def small_dir(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "small", 6) as path:
        yield path


def produce(bootstrap: str, partition: int, count: int, start: int, **config: object
            ) -> tuple[list[int], set[int]]:
    """``count`` records numbered from ``start``: (the numbers acknowledged, the error codes seen)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **config})
    acked: list[int] = []
    errors: set[int] = set()

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked.append(int(msg.key()))  # type: ignore[arg-type]
        else:
            errors.add(err.code())

    for n in range(start, start + count):
        producer.produce(TOPIC, key=str(n).encode(), value=os.urandom(RECORD), partition=partition,
                         on_delivery=report)
        producer.poll(0)
    producer.flush(60)
    return acked, errors


def read_keys(bootstrap: str, partition: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{partition}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10)
        consumer.assign([TopicPartition(TOPIC, partition, low)])
        keys: list[int] = []
        while len(keys) < high - low:
            msg = consumer.poll(5)
            assert msg is not None, f"partition {partition}: read {len(keys)} of {high - low}"
            assert msg.error() is None, msg.error()
            keys.append(int(msg.key()))  # type: ignore[arg-type]
        return keys
    finally:
        consumer.close()


def dirs_of(broker: BrokerProcess) -> dict[str, tuple[int, set[int]]]:
    """DescribeLogDirs: log dir -> (error code, the partitions of TOPIC it holds)."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        (described,) = admin.describe_log_dirs()
    finally:
        admin.close()
    return {d["log_dir"]: (d["error_code"], {p["partition_index"] for t in d["topics"] if t["name"] == TOPIC
                                             for p in t["partitions"]})
            for d in described["log_dirs"]}


def test_full_dir_goes_offline_and_the_other_serves(pafka_broker_factory: BrokerFactory, tmp_path: Path,
                                                     small_dir: Path) -> None:
    big_dir = tmp_path / "big"
    broker = pafka_broker_factory(f"log.dirs={big_dir},{small_dir}", "log.segment.bytes=1048576")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    admin.create_topics([NewTopic(TOPIC, 2, 1)])
    admin.close()
    placed = dirs_of(broker)
    (small,) = placed[str(small_dir.resolve())][1]  # new partitions go to the dir with the fewest
    (big,) = placed[str(big_dir.resolve())][1]

    # 12 MB at a 6 MB directory: it fills; with no retries each refusal reaches the producer.
    acked_small, errors = produce(broker.bootstrap, small, 1500, 0, retries=0)
    assert acked_small and errors == {ErrorCode.KAFKA_STORAGE_ERROR}
    # Later writes there answer KAFKA_STORAGE_ERROR at once, without touching the disk.
    late, late_errors = produce(broker.bootstrap, small, 20, 1500, retries=0)
    assert late == [] and late_errors == {ErrorCode.KAFKA_STORAGE_ERROR}
    acked_big, big_errors = produce(broker.bootstrap, big, 300, 0)
    assert big_errors == set() and len(acked_big) == 300

    state = dirs_of(broker)
    assert state[str(small_dir.resolve())] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
    assert state[str(big_dir.resolve())] == (0, {big})
    text = broker.log_text()
    assert text.count(f"Log directory {small_dir} is offline") == 1, text[-3000:]
    assert "Traceback" not in text, text[-3000:]

    broker.terminate()
    grow(small_dir, 64)
    broker.start()
    assert read_keys(broker.bootstrap, big) == acked_big
    kept = read_keys(broker.bootstrap, small)
    assert kept[:len(acked_small)] == sorted(acked_small) == acked_small
    assert kept == sorted(set(kept))  # no record twice, in order
    # As `pafka dump-log --deep-iteration` reads them: every batch whole and valid, no torn tail.
    lines: list[str] = []
    for segment in sorted([*small_dir.glob(f"{TOPIC}-*/*.log"), *big_dir.glob(f"{TOPIC}-*/*.log")]):
        dump_log_segment(segment, lines.append, deep=True, print_data=False)
    assert any("isvalid: true" in line for line in lines)
    assert not [line for line in lines if "isvalid: false" in line or "invalid" in line.split("isvalid")[0]]
