"""Every served version of the core APIs, against a real broker process.

Clients use the newest version both sides know, so older versions are easy to
break unnoticed: a field set that a version cannot carry makes the response
unencodable (ListOffsets v1-v3 once closed the connection that way). Here
Produce, Fetch, Metadata and ApiVersions are each sent raw at every version
the handler serves, and the answers decoded with the generated codecs.
"""

from __future__ import annotations

import time
import uuid

import pytest

from broker.handlers import api_versions, fetch, init_producer_id, metadata, produce
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.record_batch import iter_batch_headers
from protocol.records import Record, build_batch, iter_records
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request
from tests.integration.clients import ConfluentDriver

TOPIC = "sweep"


@pytest.fixture(scope="module")
def sweep_broker(broker: BrokerProcess) -> tuple[BrokerProcess, uuid.UUID]:
    ConfluentDriver().create_topic(broker.bootstrap, TOPIC, 1)
    response = send_request(broker, metadata.API_KEY, 12, MetadataRequest(
        topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    return broker, response.topics[0].topic_id


@pytest.mark.parametrize("version", range(api_versions.MIN_VERSION, api_versions.MAX_VERSION + 1))
def test_api_versions(sweep_broker: tuple[BrokerProcess, uuid.UUID], version: int) -> None:
    broker, _ = sweep_broker
    response = send_request(broker, api_versions.API_KEY, version, ApiVersionsRequest(
        client_software_name="pafka-tests", client_software_version="1.0"))
    assert response.error_code == 0
    listed = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert listed[fetch.API_KEY] == (fetch.MIN_VERSION, fetch.MAX_VERSION)
    assert listed[metadata.API_KEY] == (metadata.MIN_VERSION, metadata.MAX_VERSION)


@pytest.mark.parametrize("version", range(metadata.MIN_VERSION, metadata.MAX_VERSION + 1))
def test_metadata(sweep_broker: tuple[BrokerProcess, uuid.UUID], version: int) -> None:
    broker, topic_id = sweep_broker
    # Before v4 every Metadata request allows auto-creation (the field's default).
    response = send_request(broker, metadata.API_KEY, version, MetadataRequest(
        topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=version < 4,
        include_topic_authorized_operations=version >= 8))
    (topic,) = response.topics
    assert (topic.error_code, topic.name) == (0, TOPIC)
    assert [(p.partition_index, p.leader_id) for p in topic.partitions] == [(0, 0)]
    assert [(b.node_id, b.port) for b in response.brokers] == [(0, broker.port)]
    if version >= 10:
        assert topic.topic_id == topic_id


@pytest.mark.parametrize("version", range(metadata.MIN_VERSION, metadata.MAX_VERSION + 1))
def test_metadata_empty_and_null_topic_lists(sweep_broker: tuple[BrokerProcess, uuid.UUID], version: int) -> None:
    """v0 has no null list: an empty one means every topic. From v1 null means every
    topic and empty means none (Kafka 3.9's MetadataRequest.isAllTopics)."""
    broker, _ = sweep_broker
    empty = send_request(broker, metadata.API_KEY, version, MetadataRequest(
        topics=[], allow_auto_topic_creation=version < 4))
    assert (TOPIC in {t.name for t in empty.topics}) == (version == 0)
    if version >= 1:
        every = send_request(broker, metadata.API_KEY, version, MetadataRequest(
            topics=None, allow_auto_topic_creation=version < 4))
        assert TOPIC in {t.name for t in every.topics}


@pytest.mark.parametrize("version", range(produce.MIN_VERSION, produce.MAX_VERSION + 1))
def test_produce_then_fetch_back(sweep_broker: tuple[BrokerProcess, uuid.UUID], version: int) -> None:
    broker, topic_id = sweep_broker
    now = int(time.time() * 1000)
    value = b"produced at v%d" % version
    batch = build_batch([Record(0, now, b"k", value, [("v", b"%d" % version)])])
    response = send_request(broker, produce.API_KEY, version, ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[TopicProduceData(
            name=TOPIC, topic_id=topic_id, partition_data=[PartitionProduceData(index=0, records=batch)])]))
    (topic,) = response.responses
    (partition,) = topic.partition_responses
    assert partition.error_code == 0, partition
    offset = partition.base_offset
    assert offset >= 0
    # Fetch it back at the newest version: the record is as produced.
    records = _fetch_records(broker, topic_id, fetch.MAX_VERSION, offset)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records[:1]] == [(offset, b"k", value, now)]


def _fetch_records(broker: BrokerProcess, topic_id: uuid.UUID, version: int, offset: int) -> list[Record]:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                           topics=[FetchTopic(topic=TOPIC, topic_id=topic_id, partitions=[FetchPartition(
                               partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                               log_start_offset=-1, partition_max_bytes=1 << 20)])])
    response = send_request(broker, fetch.API_KEY, version, request)
    assert response.error_code == 0
    (topic,) = response.responses
    (partition,) = topic.partitions
    assert partition.error_code == 0, partition
    assert partition.high_watermark > offset
    data = bytes(partition.records or b"")
    if version <= 3:  # message format v0 (Fetch v0-v1) or v1 (v2-v3), read by kafka-python's reader
        from kafka.record.memory_records import MemoryRecords

        legacy = MemoryRecords(data)
        old: list[Record] = []
        while (batch := legacy.next_batch()) is not None:
            assert batch.magic == (0 if version <= 1 else 1)
            old.extend(Record(r.offset, r.timestamp if r.timestamp is not None else -1, r.key, r.value)
                       for r in batch if r.offset >= offset)
        return old
    records: list[Record] = []
    for position, _header in iter_batch_headers(data):
        records.extend(r for r in iter_records(data, position, verify_crc=True) if r.offset >= offset)
    return records


@pytest.mark.parametrize("version", range(fetch.MIN_VERSION, fetch.MAX_VERSION + 1))
def test_fetch(sweep_broker: tuple[BrokerProcess, uuid.UUID], version: int) -> None:
    broker, topic_id = sweep_broker
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "snappy"})
    producer.produce(TOPIC, key=b"fetch", value=b"for v%d" % version, partition=0, headers=[("h", b"1")])
    assert producer.flush(10) == 0
    records = _fetch_records(broker, topic_id, version, 0)
    assert (b"fetch", b"for v%d" % version) in [(r.key, r.value) for r in records]


@pytest.mark.parametrize("version", range(init_producer_id.MIN_VERSION, init_producer_id.MAX_VERSION + 1))
def test_init_producer_id(sweep_broker: tuple[BrokerProcess, uuid.UUID], version: int) -> None:
    broker, _ = sweep_broker
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    if version >= 3:  # KIP-360: a producer recovering passes its old id and epoch
        request.producer_id, request.producer_epoch = -1, -1
    first = send_request(broker, init_producer_id.API_KEY, version, request)
    second = send_request(broker, init_producer_id.API_KEY, version, request)
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert second.producer_id > first.producer_id >= 0  # every idempotent producer gets a new id
