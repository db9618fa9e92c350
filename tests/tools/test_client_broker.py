"""KafkaClient against a real ``pafka broker`` process."""

from __future__ import annotations

import pytest

from client import (
    AdminClient,
    KafkaApiError,
    KafkaClient,
    KafkaConnectionError,
    ProducerRecord,
    TopicAlreadyExistsError,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from protocol import compression
from protocol.errors import ErrorCode
from protocol.request_constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from pytest_pafka.broker_process import BrokerProcess


@pytest.fixture
def client(broker: BrokerProcess):  # type: ignore[no-untyped-def]
    with KafkaClient(broker.bootstrap, timeout=15) as c:
        yield c


def _consume_all(client: KafkaClient, topic: str, partitions: int) -> dict[int, list]:
    """Every record of every partition, fetched until each reaches its end offset."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends = {tp: client.latest_offset(tp.topic, tp.partition) for tp in tps}
    positions = {tp: client.earliest_offset(tp.topic, tp.partition) for tp in tps}
    got: dict[int, list] = {p: [] for p in range(partitions)}
    for _ in range(1000):  # bounded: each round moves at least one partition forward
        wanted = {tp: pos for tp, pos in positions.items() if pos < ends[tp]}
        if not wanted:
            return got
        for tp, result in client.fetch_many(wanted, max_wait_ms=100, partition_max_bytes=64 * 1024).items():
            assert result.error is None, result.error
            got[tp.partition].extend(result.records)
            positions[tp] = result.next_offset
    raise AssertionError("fetch made no progress")


def test_metadata_names_the_leader(client: KafkaClient, broker: BrokerProcess) -> None:
    AdminClient(client).create_topic("meta-topic", 2, 1)
    topic = client.topic_metadata("meta-topic", refresh=True)
    assert sorted(topic.partitions) == [0, 1]
    assert topic.has_topic_id
    (node,) = client.cluster.brokers.values()  # type: ignore[union-attr]
    assert (node.host, node.port) == ("127.0.0.1", broker.port)
    for p in topic.partitions.values():
        assert p.leader == node.node_id and p.replicas == [node.node_id] and p.isr == [node.node_id]
    with pytest.raises(TopicAlreadyExistsError) as info:
        AdminClient(client).create_topic("meta-topic", 2, 1)
    assert info.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_10000_records_across_3_partitions_keep_their_order(client: KafkaClient) -> None:
    topic = "round-trip"
    AdminClient(client).create_topic(topic, 3, 1)
    sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    codecs = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
    counts = iter([10_000 // 60 + (1 if i < 10_000 % 60 else 0) for i in range(60)])
    produced = 0
    for round_no in range(20):  # 20 rounds x 3 partitions = 60 batches, 10,000 records
        batches, expected_base = {}, {}
        for p in range(3):
            records = [
                ProducerRecord(value=b"value-%05d" % (produced + i), key=b"key-%d" % i, headers=[("n", b"%d" % i)])
                for i in range(next(counts))
            ]
            produced += len(records)
            tp = TopicPartition(topic, p)
            expected_base[tp] = len(sent[p])
            sent[p].extend(r.value for r in records)  # type: ignore[misc]
            batches[tp] = client.build_batch(records, compression=codecs[(round_no + p) % 5])
        results = client.produce_batches(batches, acks=-1)
        assert {tp: r.base_offset for tp, r in results.items()} == expected_base  # type: ignore[union-attr]
    assert sum(len(v) for v in sent.values()) == 10_000
    got = _consume_all(client, topic, 3)
    for p in range(3):
        assert [r.value for r in got[p]] == sent[p]
        assert [r.offset for r in got[p]] == list(range(len(sent[p])))
    assert client.latest_offset(topic, 0) == len(sent[0])


def test_produce_returns_offsets_and_fetch_starts_mid_batch(client: KafkaClient) -> None:
    AdminClient(client).create_topic("mid-batch", 1, 1)
    first = client.produce("mid-batch", 0, [ProducerRecord(b"a%d" % i) for i in range(10)])
    second = client.produce("mid-batch", 0, [ProducerRecord(b"b%d" % i, key=b"k") for i in range(5)], compression=compression.ZSTD)
    assert (first.base_offset, second.base_offset) == (0, 10)  # type: ignore[union-attr]
    result = client.fetch("mid-batch", 0, 7)
    assert [r.offset for r in result.records] == list(range(7, 15))
    assert [r.value for r in result.records][:3] == [b"a7", b"a8", b"a9"]
    assert result.records[-1].key == b"k" and result.next_offset == 15 and result.high_watermark == 15
    # Nothing past the end: the long poll waits max_wait_ms and returns empty.
    empty = client.fetch("mid-batch", 0, 15, max_wait_ms=50)
    assert empty.records == [] and empty.next_offset == 15


def test_list_offsets_earliest_latest_and_by_timestamp(client: KafkaClient) -> None:
    AdminClient(client).create_topic("by-time", 1, 1)
    for i, ts in enumerate((1000, 2000, 3000)):
        client.produce("by-time", 0, [ProducerRecord(b"v%d" % i, timestamp=ts)])
    tp = TopicPartition("by-time", 0)
    assert client.list_offsets({tp: EARLIEST_TIMESTAMP})[tp].offset == 0
    assert client.list_offsets({tp: LATEST_TIMESTAMP})[tp].offset == 3
    found = client.offset_for_timestamp("by-time", 0, 1500)
    assert (found.offset, found.timestamp) == (1, 2000)
    assert client.offset_for_timestamp("by-time", 0, 9999).offset == -1


def test_acks_0_gets_no_response_but_data_lands(client: KafkaClient) -> None:
    AdminClient(client).create_topic("acks-zero", 1, 1)
    assert client.produce("acks-zero", 0, [ProducerRecord(b"fire-and-forget")], acks=0) is None
    result = client.fetch("acks-zero", 0, 0, max_wait_ms=2000)
    assert [r.value for r in result.records] == [b"fire-and-forget"]


def test_partition_errors_are_typed(client: KafkaClient) -> None:
    AdminClient(client).create_topic("one-partition", 1, 1)
    with pytest.raises(UnknownTopicOrPartitionError) as info:
        client.produce("one-partition", 5, [ProducerRecord(b"x")])
    assert info.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert info.value.topic == "one-partition" and info.value.partition == 5
    with pytest.raises(UnknownTopicOrPartitionError):
        client.topic_metadata("no-such-topic", refresh=True)
    with pytest.raises(KafkaApiError) as out_of_range:
        client.fetch("one-partition", 0, 100)
    assert out_of_range.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_client_reconnects_after_a_broker_restart() -> None:
    with BrokerProcess() as broker:
        with KafkaClient(broker.bootstrap, timeout=10) as client:
            AdminClient(client).create_topic("survivor", 1, 1)
            client.produce("survivor", 0, [ProducerRecord(b"before")])
            broker.terminate()
            with pytest.raises(KafkaConnectionError):
                client.produce("survivor", 0, [ProducerRecord(b"lost")])
            broker.start()  # same data dir and port
            client.produce("survivor", 0, [ProducerRecord(b"after")])
            assert [r.value for r in client.fetch("survivor", 0, 0).records] == [b"before", b"after"]
