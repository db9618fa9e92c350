"""Produce and Fetch on the wire: CRC failures, batch shape rules, Produce v0-v2's
message formats v0/v1 (built by kafka-python's independent legacy builder, read
back by confluent-kafka), the zstd version rule and KIP-227 incremental sessions."""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from client import AdminClient, KafkaClient, NewTopic
from protocol import compression
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from protocol.messages.produce import PartitionProduceData, PartitionProduceResponse, ProduceRequest, TopicProduceData
from protocol.records import Record, build_batch
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request


def _create(broker: BrokerProcess, topic: str, partitions: int, configs: dict[str, str | None] | None = None) -> None:
    with KafkaClient(broker.bootstrap) as client:
        AdminClient(client).create_topics([NewTopic(topic, partitions, 1, configs or {})])


def _produce_at(broker: BrokerProcess, version: int, topic: str, partition: int, batch: bytes | bytearray
                ) -> PartitionProduceResponse:
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=bytes(batch))])])
    response = send_request(broker, 0, version, request)
    (answer,) = response.responses[0].partition_responses
    return answer


def _produce(broker: BrokerProcess, topic: str, partition: int, batch: bytes | bytearray) -> int:
    return _produce_at(broker, 9, topic, partition, batch).error_code


def _batch(*values: bytes) -> bytearray:
    return build_batch([Record(offset=i, timestamp=1_700_000_000_000 + i, key=None, value=v)
                        for i, v in enumerate(values)])


def test_a_batch_failing_its_crc_gets_corrupt_message_and_nothing_is_written(broker: BrokerProcess) -> None:
    _create(broker, "crc", 1)
    corrupt = _batch(b"hello", b"world")
    corrupt[-1] ^= 0xFF  # inside the CRC-covered part
    assert _produce(broker, "crc", 0, corrupt) == ErrorCode.CORRUPT_MESSAGE
    assert _produce(broker, "crc", 0, _batch(b"fine")) == ErrorCode.NO_ERROR
    with KafkaClient(broker.bootstrap) as client:
        assert [r.value for r in client.fetch("crc", 0, 0).records] == [b"fine"]


def test_v3_plus_produce_needs_exactly_one_batch(broker: BrokerProcess) -> None:
    _create(broker, "one-batch", 1)
    assert _produce(broker, "one-batch", 0, _batch(b"a") + _batch(b"b")) == ErrorCode.INVALID_RECORD
    assert _produce(broker, "one-batch", 0, b"") == ErrorCode.INVALID_RECORD
    assert _produce(broker, "no-such-topic", 0, _batch(b"a")) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _fetch(broker: BrokerProcess, session_id: int, epoch: int, partitions: list[tuple[str, int, int]],
           forgotten: list[tuple[str, list[int]]] = ()):  # type: ignore[no-untyped-def]
    topics: dict[str, list[FetchPartition]] = {}
    for topic, partition, offset in partitions:
        topics.setdefault(topic, []).append(FetchPartition(partition=partition, fetch_offset=offset,
                                                           partition_max_bytes=1 << 20, current_leader_epoch=-1))
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=session_id, session_epoch=epoch,
                           topics=[FetchTopic(topic=t, partitions=p) for t, p in topics.items()],
                           forgotten_topics_data=[ForgottenTopic(topic=t, partitions=p) for t, p in forgotten],
                           rack_id="")
    return send_request(broker, 1, 12, request)


def _answered(response) -> set[tuple[str, int]]:  # type: ignore[no-untyped-def]
    return {(t.topic, p.partition_index) for t in response.responses for p in t.partitions}


def test_incremental_fetch_session_sends_only_what_changed(broker: BrokerProcess) -> None:
    _create(broker, "sess", 2)
    assert _produce(broker, "sess", 0, _batch(b"a")) == ErrorCode.NO_ERROR

    full = _fetch(broker, 0, 0, [("sess", 0, 0), ("sess", 1, 0)])  # epoch 0: new session
    assert full.error_code == 0 and full.session_id != 0
    assert _answered(full) == {("sess", 0), ("sess", 1)}
    session = full.session_id

    # Nothing changed: an incremental fetch carries no partitions at all.
    quiet = _fetch(broker, session, 1, [("sess", 0, 1)])
    assert quiet.error_code == 0 and quiet.session_id == session and _answered(quiet) == set()

    # New data on partition 1 only: only partition 1 comes back.
    assert _produce(broker, "sess", 1, _batch(b"b")) == ErrorCode.NO_ERROR
    changed = _fetch(broker, session, 2, [])
    assert _answered(changed) == {("sess", 1)}

    # A forgotten partition is never answered again; the epoch must advance by one.
    _fetch(broker, session, 3, [], forgotten=[("sess", [1])])
    assert _produce(broker, "sess", 1, _batch(b"c")) == ErrorCode.NO_ERROR
    assert _answered(_fetch(broker, session, 4, [])) == set()
    assert _fetch(broker, session, 4, []).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert _fetch(broker, session + 1, 1, []).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    # Epoch -1 closes the session: its id is unknown afterwards.
    final = _fetch(broker, session, -1, [("sess", 0, 0)])
    assert final.session_id == 0 and _answered(final) == {("sess", 0)}
    assert _fetch(broker, session, 5, []).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


# -- Fetch v0-v3: message formats v0/v1 down-converted from the stored v2 batches (Kafka 3.9) ---------

_HEADERS = [("h", b"1")]
_T0 = 1_700_000_000_000


def _value(i: int) -> bytes:
    # Compressible: librdkafka sends a batch uncompressed when compression would not shrink it.
    return b"v%d-" % i + b"x" * 200


def _produce_with_confluent(broker: BrokerProcess, topic: str, codec: str, count: int,
                            first_value: int = 0) -> None:
    """``count`` records with keys, values, headers and timestamps, in one batch (linger) of ``codec``."""
    from confluent_kafka import Producer

    # A long linger keeps the records in one batch even on a loaded machine; flush() sends at once.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5000})
    # Records produced before the client knows the topic wait in its unassigned queue; with the
    # metadata first they all go straight to the partition's queue.
    producer.list_topics(topic, timeout=10)
    for i in range(first_value, first_value + count):
        producer.produce(topic, key=b"k%d" % i, value=_value(i), partition=0, headers=_HEADERS,
                         timestamp=_T0 + i)
    assert producer.flush(10) == 0


def _create_with_configs(broker: BrokerProcess, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin import NewTopic as ConfluentNewTopic

    admin = ConfluentAdmin({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([ConfluentNewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=30)


def _fetch_old(broker: BrokerProcess, version: int, parts: list[tuple[str, int, int]], *, max_wait_ms: int = 0,
               min_bytes: int = 0, max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20
               ):  # type: ignore[no-untyped-def]
    topics: dict[str, list[FetchPartition]] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append(FetchPartition(partition=partition, fetch_offset=offset,
                                                           partition_max_bytes=partition_max_bytes))
    request = FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                           topics=[FetchTopic(topic=t, partitions=p) for t, p in topics.items()])
    return send_request(broker, 1, version, request, timeout=30)


def _kafka_python_batches(data: object) -> Iterator[Any]:
    """The batches (or v0/v1 wrappers) of a fetched records field, read by kafka-python's own reader."""
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(bytes(data or b""))  # type: ignore[call-overload]
    while (batch := records.next_batch()) is not None:
        yield batch


def _legacy_messages(data: object) -> list[tuple[int, int, bytes | None, bytes | None, int | None]]:
    """(magic, offset, key, value, timestamp) of every message."""
    return [(batch.magic, r.offset, r.key, r.value, r.timestamp) for batch in _kafka_python_batches(data)
            for r in batch]


def _stored_batches(broker: BrokerProcess, topic: str) -> list[tuple[int, int]]:
    """(base offset, last offset) of each batch of partition 0 as stored (Fetch v4: no conversion)."""
    stored = _fetch_old(broker, 4, [(topic, 0, 0)]).responses[0].partitions[0].records
    return [(batch.base_offset, max(r.offset for r in batch)) for batch in _kafka_python_batches(stored)]


_CODEC_TOPICS: set[str] = set()


def _codec_topic(broker: BrokerProcess, codec: str) -> str:
    """A topic holding v0..v4 then v5..v6, each sent as one batch of ``codec`` (made once per module;
    librdkafka may still split one, and the tests read what was stored)."""
    topic = f"old-fetch-{codec}"
    if topic not in _CODEC_TOPICS:
        _create(broker, topic, 1)
        _produce_with_confluent(broker, topic, codec, 5)
        _produce_with_confluent(broker, topic, codec, 2, first_value=5)
        _CODEC_TOPICS.add(topic)
    return topic


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_old_fetch_answers_message_format_v0_or_v1(broker: BrokerProcess, version: int, codec: str) -> None:
    topic = _codec_topic(broker, codec)
    magic = 0 if version <= 1 else 1
    # Converted messages may take more room than the stored batches; as Kafka, the answer
    # is cut to max(stored size, first converted batch), so a consumer may need another fetch.
    messages: list[tuple[int, int, bytes | None, bytes | None, int | None]] = []
    for _ in range(7):
        next_offset = messages[-1][1] + 1 if messages else 0
        if next_offset == 7:
            break
        (partition,) = _fetch_old(broker, version, [(topic, 0, next_offset)]).responses[0].partitions
        assert (partition.error_code, partition.high_watermark) == (0, 7)
        messages += [m for m in _legacy_messages(partition.records) if m[1] >= next_offset]
    # Offsets, keys and values as produced (headers cannot be carried and are dropped);
    # message format v1 keeps each record's CreateTime, v0 has none.
    assert messages == [(magic, i, b"k%d" % i, _value(i), _T0 + i if magic else None) for i in range(7)]

    # From the middle of a batch: an uncompressed v2 batch loses the records below the
    # fetch offset (v0/v1 messages are single when uncompressed, KAFKA-5360); a compressed
    # one stays one whole wrapper, and the consumer skips what lies below its position.
    # The client chooses the batching (a loaded CI once got v0..v2 and v3..v4 from librdkafka), so
    # the expected first offset is the stored batch's, read back unconverted.
    middle = _legacy_messages(_fetch_old(broker, version, [(topic, 0, 3)]).responses[0].partitions[0].records)
    first = 3 if codec == "none" else next(base for base, last in _stored_batches(broker, topic) if base <= 3 <= last)
    assert [m[1] for m in middle] == list(range(first, first + len(middle)))


def test_old_fetch_long_polls(broker: BrokerProcess) -> None:
    import threading
    import time

    _create(broker, "old-poll", 1)
    started = time.monotonic()
    empty = _fetch_old(broker, 0, [("old-poll", 0, 0)], max_wait_ms=400, min_bytes=1)
    assert time.monotonic() - started >= 0.35  # waited out max_wait_ms: nothing arrived
    assert (empty.responses[0].partitions[0].error_code, bytes(empty.responses[0].partitions[0].records)) == (0, b"")

    timer = threading.Timer(0.5, _produce_with_confluent, (broker, "old-poll", "none", 1))
    timer.start()
    try:
        started = time.monotonic()
        woken = _fetch_old(broker, 1, [("old-poll", 0, 0)], max_wait_ms=20_000, min_bytes=1)
        waited = time.monotonic() - started
    finally:
        timer.join()
    assert 0.3 < waited < 10  # answered by the append, not by max_wait_ms
    assert [m[1:4] for m in _legacy_messages(woken.responses[0].partitions[0].records)] == [(0, b"k0", _value(0))]


def test_old_fetch_size_limits_as_kafka(broker: BrokerProcess) -> None:
    """v0-v2 have a hard partition limit (no KIP-74); v3 has max_bytes and returns a first oversized batch."""
    _create(broker, "old-limits", 2)
    big = bytes(2000)
    for partition in (0, 1):
        assert _produce(broker, "old-limits", partition, build_batch(
            [Record(offset=0, timestamp=_T0, key=None, value=big)])) == ErrorCode.NO_ERROR
        assert _produce(broker, "old-limits", partition, build_batch(
            [Record(offset=0, timestamp=_T0, key=None, value=b"small")])) == ErrorCode.NO_ERROR
    both = [("old-limits", 0, 0), ("old-limits", 1, 0)]

    # v2: a first batch larger than partition_max_bytes is not returned, not even to the first partition.
    hard = _fetch_old(broker, 2, both, partition_max_bytes=1000)
    assert [(p.error_code, bytes(p.records)) for p in hard.responses[0].partitions] == [(0, b""), (0, b"")]
    # ... and a limit that holds the first batch only returns exactly that one.
    one = _fetch_old(broker, 2, both, partition_max_bytes=2100)
    assert [[m[1] for m in _legacy_messages(p.records)] for p in one.responses[0].partitions] == [[0], [0]]

    # v3 (KIP-74): the first partition with data gets its first batch whole; max_bytes then
    # leaves nothing for the second.
    soft = _fetch_old(broker, 3, both, partition_max_bytes=1000, max_bytes=1000)
    assert [[m[1] for m in _legacy_messages(p.records)] for p in soft.responses[0].partitions] == [[0], []]
    assert _legacy_messages(soft.responses[0].partitions[0].records)[0][3] == big
    # max_bytes bounds the response across partitions: room for partition 0's two batches only.
    bounded = _fetch_old(broker, 3, both, max_bytes=2200)
    assert [[m[1] for m in _legacy_messages(p.records)] for p in bounded.responses[0].partitions] == [[0, 1], []]


def test_zstd_below_fetch_v10_is_unsupported_compression_type(broker: BrokerProcess) -> None:
    # (a) A topic whose compression.type is zstd: every Fetch below v10 (KIP-110), by the topic's config.
    _create_with_configs(broker, "zstd-topic", {"compression.type": "zstd"})
    _produce_with_confluent(broker, "zstd-topic", "zstd", 3)
    for version in (3, 4, 9):
        (partition,) = _fetch_old(broker, version, [("zstd-topic", 0, 0)]).responses[0].partitions
        assert (partition.error_code, partition.high_watermark) == (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1)
    for version in (10, 12):
        (partition,) = _fetch_old(broker, version, [("zstd-topic", 0, 0)]).responses[0].partitions
        assert partition.error_code == 0 and len(partition.records) > 0

    # (b) Producer-compressed zstd in a compression.type=producer topic: down-conversion (v0-v3)
    # meets the zstd batch and answers UNSUPPORTED_COMPRESSION_TYPE; the gzip batch before it is
    # served, so the consumer reads up to the zstd batch and gets the error fetching from there.
    _create(broker, "zstd-producer", 1)
    _produce_with_confluent(broker, "zstd-producer", "gzip", 2)
    _produce_with_confluent(broker, "zstd-producer", "zstd", 2, first_value=2)
    # (As Kafka's chunked conversion, a chunk holding the zstd batch is not sent: the gzip
    # records may take more than one fetch when the producer sent them in two batches.)
    read: list[int] = []
    answer = None
    for _ in range(3):
        (answer,) = _fetch_old(broker, 3, [("zstd-producer", 0, len(read))]).responses[0].partitions
        if answer.error_code:
            break
        read += [m[1] for m in _legacy_messages(answer.records) if m[1] >= len(read)]
    assert answer is not None and (read, answer.error_code) == ([0, 1], ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    for version in (0, 3):
        (at_zstd,) = _fetch_old(broker, version, [("zstd-producer", 0, 2)]).responses[0].partitions
        assert at_zstd.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    # Kafka 3.9 serves Fetch v4-v9 the stored zstd batch as it is (only the topic config is checked).
    (served,) = _fetch_old(broker, 4, [("zstd-producer", 0, 2)]).responses[0].partitions
    assert served.error_code == 0 and len(served.records) > 0


# -- Produce v0-v2: message formats v0/v1 -------------------------------------

LEGACY_CODECS = {"none": compression.NONE, "gzip": compression.GZIP, "snappy": compression.SNAPPY,
                 "lz4": compression.LZ4}
MESSAGES = [(b"k0", b"first"), (None, b"no key"), (b"k2", None), (b"k3", b"x" * 300)]


def _message_set(magic: int, codec: int, timestamp: int, messages: list[tuple[bytes | None, bytes | None]]
                 = MESSAGES) -> bytes:
    """Kafka's message set as a pre-0.11 client sends it (kafka-python's own legacy builder)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (key, value) in enumerate(messages):
        builder.append(i, timestamp=timestamp + i, key=key, value=value)
    return bytes(builder.build())


def _read_back(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes | None, bytes | None, tuple[int, int]]]:
    """(offset, key, value, (timestamp type, timestamp)) of every record, read by librdkafka (a current client)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pafka-tests-unused",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    out = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            batch = consumer.consume(num_messages=1000, timeout=1.0)
            if any(m.error() is not None for m in batch):
                (eof,) = [m for m in batch if m.error() is not None]
                assert eof.error().code() == eof.error()._PARTITION_EOF, eof.error()
                out += [(m.offset(), m.key(), m.value(), m.timestamp()) for m in batch if m.error() is None]
                return out
            out += [(m.offset(), m.key(), m.value(), m.timestamp()) for m in batch]
    finally:
        consumer.close()
    raise AssertionError(f"end of {topic} not reached; read {out}")


@pytest.mark.parametrize("codec", list(LEGACY_CODECS))
@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_message_sets_are_read_back_by_a_current_consumer(
        broker: BrokerProcess, version: int, codec: str) -> None:
    topic = f"legacy-v{version}-{codec}"
    _create(broker, topic, 1)
    magic = 1 if version == 2 else 0  # what Kafka's clients send at each version
    now = int(time.time() * 1000)
    first = _produce_at(broker, version, topic, 0, _message_set(magic, LEGACY_CODECS[codec], now))
    second = _produce_at(broker, version, topic, 0, _message_set(magic, LEGACY_CODECS[codec], now + 10))
    assert (first.error_code, first.base_offset, second.error_code, second.base_offset) == (0, 0, 0, len(MESSAGES))
    # v2's log_append_time_ms: -1 on a CreateTime topic (v0/v1 cannot carry it).
    assert first.log_append_time_ms == -1

    expected = []
    for base, stamp in ((0, now), (len(MESSAGES), now + 10)):
        for i, (key, value) in enumerate(MESSAGES):
            # A v0 message has no timestamp: stored as -1, which librdkafka reads as -1.
            expected.append((base + i, key, value, (TIMESTAMP_CREATE_TIME, stamp + i if magic else -1)))
    assert _read_back(broker, topic) == expected


def test_produce_v2_on_a_log_append_time_topic_answers_the_append_time(broker: BrokerProcess) -> None:
    _create(broker, "legacy-lat", 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    answer = _produce_at(broker, 2, "legacy-lat", 0, _message_set(1, compression.GZIP, 1_000))
    assert answer.error_code == 0 and answer.log_append_time_ms >= before
    stamps = {ts for _, _, _, ts in _read_back(broker, "legacy-lat")}
    assert stamps == {(TIMESTAMP_LOG_APPEND_TIME, answer.log_append_time_ms)}


def test_legacy_message_sets_kafka_refuses(broker: BrokerProcess) -> None:
    _create(broker, "legacy-bad", 1)
    now = int(time.time() * 1000)
    good = _message_set(1, compression.NONE, now)

    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # a value byte: the message's CRC32 no longer holds
    assert _produce_at(broker, 2, "legacy-bad", 0, corrupt).error_code == ErrorCode.CORRUPT_MESSAGE
    inner = bytearray(_message_set(0, compression.NONE, now))
    inner[-1] ^= 0xFF
    # A compressed wrapper whose inner message fails its CRC: also CORRUPT_MESSAGE.
    assert _produce_at(broker, 0, "legacy-bad", 0, _rewrap(bytes(inner))).error_code == ErrorCode.CORRUPT_MESSAGE

    # Two compressed wrappers in one set: Kafka's "Compressed outer record has more than one batch".
    two = _message_set(1, compression.GZIP, now) + _message_set(1, compression.GZIP, now)
    assert _produce_at(broker, 2, "legacy-bad", 0, two).error_code == ErrorCode.INVALID_RECORD
    # A client may not claim LogAppendTime.
    claimed = bytearray(good)
    for pos in _message_positions(claimed):
        claimed[pos + 17] |= 0x08
        claimed[pos + 12:pos + 16] = zlib.crc32(bytes(claimed[pos + 16:pos + 12 + _size(claimed, pos)])).to_bytes(4, "big")
    assert _produce_at(broker, 2, "legacy-bad", 0, claimed).error_code == ErrorCode.INVALID_TIMESTAMP
    # Timestamps far in the future: INVALID_TIMESTAMP (message.timestamp.after.max.ms is an hour).
    future = _message_set(1, compression.SNAPPY, now + 10 * 3_600_000)
    assert _produce_at(broker, 2, "legacy-bad", 0, future).error_code == ErrorCode.INVALID_TIMESTAMP

    assert _produce_at(broker, 1, "legacy-bad", 0, _message_set(0, compression.LZ4, now)).error_code == 0
    assert [offset for offset, *_ in _read_back(broker, "legacy-bad")] == list(range(len(MESSAGES)))


def _size(buf: bytes | bytearray, pos: int) -> int:
    return int.from_bytes(buf[pos + 8:pos + 12], "big", signed=True)


def _message_positions(buf: bytes | bytearray) -> list[int]:
    positions, pos = [], 0
    while pos < len(buf):
        positions.append(pos)
        pos += 12 + _size(buf, pos)
    return positions


def _rewrap(inner: bytes) -> bytes:
    """A v0 gzip wrapper around ``inner`` (an uncompressed message set), with a valid wrapper CRC."""
    value = compression.compress(compression.GZIP, inner)
    body = bytes([0, compression.GZIP]) + (-1).to_bytes(4, "big", signed=True) + len(value).to_bytes(4, "big") + value
    message = zlib.crc32(body).to_bytes(4, "big") + body
    return (len(MESSAGES) - 1).to_bytes(8, "big") + len(message).to_bytes(4, "big") + message


def test_zstd_needs_produce_v7(broker: BrokerProcess) -> None:
    _create(broker, "zstd-versions", 1)
    batch = build_batch([Record(0, int(time.time() * 1000), b"k", b"zstd value")], compression=compression.ZSTD)
    for version in range(7):  # KIP-110; Kafka's validateRecords checks v3-v6, and v0-v2 carry no zstd
        answer = _produce_at(broker, version, "zstd-versions", 0, batch)
        assert answer.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, version
    answer = _produce_at(broker, 7, "zstd-versions", 0, batch)
    assert (answer.error_code, answer.base_offset) == (0, 0)
    # A legacy message whose attributes name codec 4 (zstd, which v0/v1 cannot carry).
    zstd_message = bytearray(_message_set(1, compression.NONE, int(time.time() * 1000), [(b"k", b"v")]))
    zstd_message[17] = compression.ZSTD
    zstd_message[12:16] = zlib.crc32(bytes(zstd_message[16:])).to_bytes(4, "big")
    answer = _produce_at(broker, 2, "zstd-versions", 0, zstd_message)
    assert answer.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert [v for _, _, v, _ in _read_back(broker, "zstd-versions")] == [b"zstd value"]


def test_keyless_message_on_a_compacted_topic_via_produce_v2(broker: BrokerProcess) -> None:
    _create(broker, "legacy-compacted", 1, {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    keyless = _message_set(1, compression.GZIP, now, [(b"k", b"v"), (None, b"no key")])
    assert _produce_at(broker, 2, "legacy-compacted", 0, keyless).error_code == ErrorCode.INVALID_RECORD
    keyed = _message_set(1, compression.NONE, now, [(b"k", b"v"), (b"k2", b"v2")])
    assert _produce_at(broker, 2, "legacy-compacted", 0, keyed).error_code == 0
    assert [(k, v) for _, k, v, _ in _read_back(broker, "legacy-compacted")] == [(b"k", b"v"), (b"k2", b"v2")]
