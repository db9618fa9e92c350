"""A real broker's record-level validation, as clients see it.

- A batch whose header says maxTimestamp -1 (sarama 1.22 writes one) or a maximum below its
  first timestamp is stored with its records' real maximum, as Kafka's LogValidator rewrites
  it: the stored header, the .timeindex, ListOffsets by timestamp and confluent-kafka's
  offsets_for_times all agree with Kafka's answers.
- Records a topic refuses (keyless on a compacted topic, timestamps out of the accepted range)
  are named by batch index (KIP-467): librdkafka fails exactly those with the broker's error
  and the rest of their batch with _INVALID_DIFFERENT_RECORD.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from crc32c import crc32c

from protocol import compression
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.record_batch import iter_batch_headers, validate_batch
from protocol.records import Record, build_batch, iter_records
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request

HOUR = 3_600_000


def _create(broker: BrokerProcess, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                                config=config)]).values():
        future.result(timeout=30)


def _with_header_max(batch: bytearray, max_timestamp: int) -> bytearray:
    """The header's maxTimestamp replaced, CRC32C recomputed (struct + crc32c, not the broker's code)."""
    struct.pack_into(">q", batch, 35, max_timestamp)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return batch


def _produce(broker: BrokerProcess, version: int, topic: str, batch: bytes | bytearray):  # type: ignore[no-untyped-def]
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=bytes(batch))])])
    return send_request(broker, 0, version, request).responses[0].partition_responses[0]


def _fetch_all(broker: BrokerProcess, topic: str) -> bytes:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, rack_id="",
                           topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                               partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1)])])
    partition = send_request(broker, 1, 12, request).responses[0].partitions[0]
    assert partition.error_code == 0
    return bytes(partition.records)


def _offset_for_time(broker: BrokerProcess, version: int, topic: str, timestamp: int) -> int:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    answer = send_request(broker, 2, version, request).topics[0].partitions[0]
    assert answer.error_code == 0
    return int(answer.offset)


def _time_index(path: Path) -> list[tuple[int, int]]:
    """(timestamp, relative offset) entries of a live .timeindex, read as bytes (12 per entry)."""
    data = path.read_bytes()
    entries = []
    for pos in range(0, len(data) - 11, 12):
        timestamp, relative = struct.unpack_from(">qi", data, pos)
        if timestamp == 0 and relative == 0:  # the preallocated, unused tail
            break
        entries.append((timestamp, relative))
    return entries


def test_an_implausible_max_timestamp_is_stored_as_the_records_maximum(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = "max-timestamp"
    _create(broker, topic, {"index.interval.bytes": "1"})  # a time index entry per batch after the first
    base = int(time.time() * 1000) - 60_000
    sent = [  # (Produce version, codec, record timestamps, header maxTimestamp)
        (3, compression.NONE, [base, base + 40, base + 7], -1),
        (5, compression.GZIP, [base + 100, base + 250, base + 90], base + 99),  # below its first timestamp
        (8, compression.LZ4, [base + 300, base + 310, base + 305], -1),
        (9, compression.ZSTD, [base + 400, base + 420, base + 410], -1),
    ]
    for n, (version, codec, stamps, header_max) in enumerate(sent):
        records = [Record(offset=i, timestamp=ts, key=b"k%d" % i, value=b"v") for i, ts in enumerate(stamps)]
        batch = _with_header_max(build_batch(records, compression=codec), header_max)
        answer = _produce(broker, version, topic, batch)
        assert (answer.error_code, answer.base_offset) == (0, 3 * n)

    stored = _fetch_all(broker, topic)
    batches = [stored[pos:pos + h.size_in_bytes] for pos, h in iter_batch_headers(stored)]
    assert len(batches) == len(sent)
    for batch, (_, _, stamps, _) in zip(batches, sent, strict=True):
        assert validate_batch(batch).max_timestamp == max(stamps)  # CRC32C right for the new field
        assert [r.timestamp for r in iter_records(batch)] == stamps

    index = broker.data_dir / f"{topic}-0" / "00000000000000000000.timeindex"
    assert _time_index(index) == [(base + 250, 5), (base + 310, 8), (base + 420, 11)]

    # Kafka's answer: the first offset (in log order) whose record timestamp is >= the target.
    expected = {base: 0, base + 8: 1, base + 41: 3, base + 95: 3, base + 251: 6, base + 311: 9, base + 421: -1}
    for version in (1, 4, 8):
        assert {t: _offset_for_time(broker, version, topic, t) for t in expected} == expected, version
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pafka-tests-unused"})
    try:
        for target, offset in expected.items():  # one partition: one target per request
            (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, target)], timeout=10)
            assert found.error is None and found.offset == offset, (target, found)
    finally:
        consumer.close()


def _produce_with_confluent(broker: BrokerProcess, topic: str, keys: list[bytes | None],
                            timestamps: list[int]) -> list[tuple[int, int | None]]:
    """(index, error code or None) of every delivery, all records in one batch."""
    from confluent_kafka import Producer

    reports: list[tuple[int, int | None]] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 60_000, "batch.num.messages": 100,
                         "enable.idempotence": False, "retries": 0})
    producer.list_topics(topic, timeout=10)  # known first: no record waits in the unassigned queue
    for i, (key, ts) in enumerate(zip(keys, timestamps, strict=True)):
        producer.produce(topic, key=key, value=b"value-%d" % i, partition=0, timestamp=ts,
                         on_delivery=lambda err, _msg, i=i: reports.append((i, None if err is None else err.code())))
    assert producer.flush(30) == 0
    return sorted(reports)


def _watermarks(broker: BrokerProcess, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pafka-tests-unused"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)  # type: ignore[no-any-return]
    finally:
        consumer.close()


def test_librdkafka_fails_exactly_the_keyless_records_of_a_batch_to_a_compacted_topic(
        broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError

    topic = "compacted-keyless"
    _create(broker, topic, {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    keys = [None if i % 10 == 3 else b"key-%d" % i for i in range(100)]
    reports = _produce_with_confluent(broker, topic, keys, [now] * 100)
    assert reports == [(i, KafkaError.INVALID_RECORD if i % 10 == 3 else KafkaError._INVALID_DIFFERENT_RECORD)
                       for i in range(100)]
    assert _watermarks(broker, topic) == (0, 0)  # the batch is refused whole
    # The 90 keyed records, sent again, are accepted.
    good = [k for k in keys if k is not None]
    assert _produce_with_confluent(broker, topic, good, [now] * 90) == [(i, None) for i in range(90)]


@pytest.mark.parametrize("side", ["before", "after"])
def test_librdkafka_fails_exactly_the_records_with_out_of_range_timestamps(broker: BrokerProcess,
                                                                           side: str) -> None:
    from confluent_kafka import KafkaError

    topic = f"timestamps-{side}"
    _create(broker, topic, {f"message.timestamp.{side}.max.ms": str(HOUR)})
    now = int(time.time() * 1000)
    bad = now - 2 * HOUR if side == "before" else now + 2 * HOUR
    # Bad ones at 0, 10, ...: the batch's first timestamp (before) or maximum (after) shows them.
    stamps = [bad if i % 10 == 0 else now + i for i in range(100)]
    reports = _produce_with_confluent(broker, topic, [b"k"] * 100, stamps)
    # librdkafka fails the records a response names with INVALID_RECORD whatever the partition's
    # code (INVALID_TIMESTAMP here, checked on the wire below); without record_errors it would
    # fail all 100 with INVALID_TIMESTAMP.
    assert reports == [(i, KafkaError.INVALID_RECORD if i % 10 == 0 else KafkaError._INVALID_DIFFERENT_RECORD)
                       for i in range(100)]
    assert _watermarks(broker, topic) == (0, 0)
    # The same records on the wire: INVALID_TIMESTAMP naming exactly the ten.
    records = [Record(offset=i, timestamp=ts, key=b"k", value=b"v") for i, ts in enumerate(stamps)]
    answer = _produce(broker, 9, topic, build_batch(records, compression=compression.LZ4))
    assert answer.error_code == ErrorCode.INVALID_TIMESTAMP
    assert answer.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in answer.record_errors] == list(range(0, 100, 10))
    assert answer.record_errors[0].batch_index_error_message.startswith(
        f"Timestamp {bad} of message with offset 0 is out of range. The timestamp should be within [")


def test_record_errors_on_the_wire_from_produce_v8(broker: BrokerProcess) -> None:
    topic = "compacted-wire"
    _create(broker, topic, {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    records = [Record(offset=i, timestamp=now, key=None if i in (0, 2, 3, 7) else b"k", value=b"v")
               for i in range(9)]
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    summary = ("One or more records have been rejected due to 4 record errors in total, and only showing the "
               "first three errors at most: [" + ", ".join(
                   f"RecordError(batchIndex={i}, message='{message}')" for i in (0, 2, 3)) + "]")
    for version in range(3, 13):
        answer = _produce(broker, version, topic, build_batch(records, compression=compression.GZIP))
        assert answer.error_code == ErrorCode.INVALID_RECORD and answer.base_offset == -1
        if version >= 8:
            assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
                (i, message) for i in (0, 2, 3, 7)]
            assert answer.error_message == summary
        else:  # neither field exists before v8: the response decoded whole without them
            assert answer.record_errors == [] and answer.error_message is None
    assert _watermarks(broker, topic) == (0, 0)
