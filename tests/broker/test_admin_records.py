"""DeleteRecords on a real broker: the low watermark moves, fetches and ListOffsets follow it."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import OffsetOutOfRangeError, PolicyViolationError

from protocol.errors import ErrorCode
from protocol.messages.delete_records import DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request


def produce(broker: BrokerProcess, topic: str, count: int, size: int = 10) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v" * size, partition=0)
        producer.poll(0)
        producer.flush(10)  # one batch per record, so segments roll where expected
    assert producer.flush(10) == 0


def offsets(broker: BrokerProcess, topic: str) -> tuple[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()


def test_delete_records_moves_the_low_watermark(broker, admin):
    admin.create_topics({"dr-a": {"num_partitions": 1}})
    produce(broker, "dr-a", 10)
    result = admin.delete_records({TopicPartition("dr-a", 0): 4})
    assert result[TopicPartition("dr-a", 0)]["low_watermark"] == 4
    assert offsets(broker, "dr-a") == (4, 10)

    # A fetch below the new start offset is out of range...
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none", enable_auto_commit=False)
    try:
        tp = TopicPartition("dr-a", 0)
        consumer.assign([tp])
        consumer.seek(tp, 1)
        with pytest.raises(OffsetOutOfRangeError):
            consumer.poll(timeout_ms=5000)
    finally:
        consumer.close()
    # ...and a consumer resetting to earliest starts at it.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dr-a", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.assign([CTopicPartition("dr-a", 0, 0)])
        seen = []
        for _ in range(50):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg.offset())
            if len(seen) == 6:
                break
        assert seen == [4, 5, 6, 7, 8, 9]
    finally:
        consumer.close()


def test_delete_records_to_high_watermark_and_beyond(broker, admin):
    admin.create_topics({"dr-b": {"num_partitions": 1}})
    produce(broker, "dr-b", 5)
    with pytest.raises(OffsetOutOfRangeError):
        admin.delete_records({TopicPartition("dr-b", 0): 6})
    assert offsets(broker, "dr-b") == (0, 5)
    result = admin.delete_records({TopicPartition("dr-b", 0): -1})  # -1: the high watermark
    assert result[TopicPartition("dr-b", 0)]["low_watermark"] == 5
    assert offsets(broker, "dr-b") == (5, 5)
    # Moving backwards is a no-op that reports the current low watermark.
    result = admin.delete_records({TopicPartition("dr-b", 0): 2})
    assert result[TopicPartition("dr-b", 0)]["low_watermark"] == 5


def test_delete_records_refused_on_compacted_topic(broker, admin):
    admin.create_topics({"dr-c": {"num_partitions": 1, "configs": {"cleanup.policy": "compact"}}})
    produce(broker, "dr-c", 3)
    with pytest.raises(PolicyViolationError):
        admin.delete_records({TopicPartition("dr-c", 0): 1})
    assert offsets(broker, "dr-c") == (0, 3)


def test_delete_records_wire_errors(broker, admin):
    admin.create_topics({"dr-w": {"num_partitions": 1}})
    produce(broker, "dr-w", 2)
    request = DeleteRecordsRequest(topics=[
        DeleteRecordsTopic(name="dr-w", partitions=[DeleteRecordsPartition(partition_index=0, offset=-7),
                                                    DeleteRecordsPartition(partition_index=3, offset=1),
                                                    DeleteRecordsPartition(partition_index=0, offset=1)]),
        DeleteRecordsTopic(name="dr-none", partitions=[DeleteRecordsPartition(partition_index=0, offset=1)]),
    ], timeout_ms=5000)
    response = send_request(broker, 21, 2, request)
    found = [(t.name, p.partition_index, p.error_code, p.low_watermark)
             for t in response.topics for p in t.partitions]
    assert found == [("dr-w", 0, ErrorCode.OFFSET_OUT_OF_RANGE, -1),
                     ("dr-w", 3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
                     ("dr-w", 0, ErrorCode.NO_ERROR, 1),
                     ("dr-none", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]


def test_delete_records_with_confluent(broker, admin):
    admin.create_topics({"dr-k": {"num_partitions": 1}})
    produce(broker, "dr-k", 8)
    cadmin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = cadmin.delete_records([CTopicPartition("dr-k", 0, 3)])
    deleted = next(iter(futures.values())).result(10)
    assert deleted.low_watermark == 3
    futures = cadmin.delete_records([CTopicPartition("dr-k", 0, 100)])
    with pytest.raises(KafkaException) as info:
        next(iter(futures.values())).result(10)
    assert info.value.args[0].code() == ErrorCode.OFFSET_OUT_OF_RANGE
    assert offsets(broker, "dr-k") == (3, 8)


def test_deleted_segments_and_restart():
    """Whole segments below the new start offset go, and the low watermark survives a restart."""
    with BrokerProcess() as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_topics({"dr-r": {"num_partitions": 1, "configs": {"segment.bytes": str(1024 * 1024)}}})
            produce(broker, "dr-r", 6, size=400_000)  # 2 records per 1 MiB segment: 3 segments
            part_dir = Path(broker.data_dir) / "dr-r-0"
            logs = sorted(p.name for p in part_dir.glob("*.log"))
            assert len(logs) == 3, logs
            admin.delete_records({TopicPartition("dr-r", 0): 5})
            remaining = sorted(p.name for p in part_dir.glob("*.log"))
            assert remaining == [f"{4:020d}.log"]
        finally:
            admin.close()
        broker.restart()
        assert offsets(broker, "dr-r") == (5, 6)
        # The new start offset was checkpointed before the answer: even a crash keeps it.
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.delete_records({TopicPartition("dr-r", 0): 6})
        finally:
            admin.close()
        broker.restart(signal.SIGKILL)
        assert offsets(broker, "dr-r") == (6, 6)
