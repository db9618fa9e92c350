"""Produce and Fetch on the wire: CRC failures, batch shape rules and KIP-227 incremental sessions."""

from __future__ import annotations

import pytest

from client import AdminClient, KafkaClient, NewTopic
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.records import Record, build_batch
from testing.broker_process import BrokerProcess
from testing.sockets import send_request


def _create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    with KafkaClient(broker.bootstrap) as client:
        AdminClient(client).create_topics([NewTopic(topic, partitions, 1)])


def _produce(broker: BrokerProcess, topic: str, partition: int, batch: bytes | bytearray) -> int:
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=bytes(batch))])])
    response = send_request(broker, 0, 9, request)
    return response.responses[0].partition_responses[0].error_code


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

    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 50})
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


def _legacy_messages(data: object) -> list[tuple[int, int, bytes | None, bytes | None, int | None]]:
    """(magic, offset, key, value, timestamp) of every message, read by kafka-python's own reader."""
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(bytes(data or b""))  # type: ignore[call-overload]
    out: list[tuple[int, int, bytes | None, bytes | None, int | None]] = []
    while (batch := records.next_batch()) is not None:
        out.extend((batch.magic, r.offset, r.key, r.value, r.timestamp) for r in batch)
    return out


_CODEC_TOPICS: set[str] = set()


def _codec_topic(broker: BrokerProcess, codec: str) -> str:
    """A topic holding v0..v4 in one batch of ``codec`` then v5..v6 in another (made once per module)."""
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
    middle = _legacy_messages(_fetch_old(broker, version, [(topic, 0, 3)]).responses[0].partitions[0].records)
    first = 3 if codec == "none" else 0
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
