"""Leader epochs on the wire of a lone broker (epoch 0 throughout): OffsetForLeaderEpoch at every
served version, and Fetch v12+'s diverging epoch (KIP-320) for a fetcher whose last fetched
epoch or offset the log does not have. The cluster's epoch changes are tested with real
brokers in tests/cluster and with replica managers in tests/replication."""

from __future__ import annotations

import uuid

import pytest

from broker.handlers import fetch, metadata, offset_for_leader_epoch
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.record_batch import iter_batch_headers
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request

TOPIC = "epochs"
RECORDS = 10


@pytest.fixture(scope="module")
def broker_with_records(broker: BrokerProcess) -> tuple[BrokerProcess, uuid.UUID]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    response = send_request(broker, metadata.API_KEY, 12, MetadataRequest(
        topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    return broker, response.topics[0].topic_id


def _ask(broker: BrokerProcess, version: int, *partitions: tuple[str, int, int, int]) -> list[tuple[int, int, int]]:
    """(error, epoch, end offset) for each (topic, partition, current leader epoch, leader epoch)."""
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderTopic(topic=topic, partitions=[OffsetForLeaderPartition(
            partition=index, current_leader_epoch=current, leader_epoch=epoch)])
        for topic, index, current, epoch in partitions])
    response = send_request(broker, offset_for_leader_epoch.API_KEY, version, request)
    return [(p.error_code, p.leader_epoch, p.end_offset) for t in response.topics for p in t.partitions]


@pytest.mark.parametrize("version", range(offset_for_leader_epoch.MIN_VERSION, offset_for_leader_epoch.MAX_VERSION + 1))
def test_offset_for_leader_epoch_at_every_version(broker_with_records: tuple[BrokerProcess, uuid.UUID],
                                                   version: int) -> None:
    broker, _ = broker_with_records
    known = -1 if version == 0 else 0  # v0 carries no epoch in its answer
    assert _ask(broker, version, (TOPIC, 0, -1, 0)) == [(0, known, RECORDS)]
    # An epoch above every one the log knows: Kafka answers UNDEFINED, without an error.
    assert _ask(broker, version, (TOPIC, 0, -1, 7)) == [(0, -1, -1)]
    assert _ask(broker, version, ("no-such-topic", 0, -1, 0)) == [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    if version >= 2:
        # A caller that believes in a newer leader epoch than the broker's is told it is unknown here.
        assert _ask(broker, version, (TOPIC, 0, 3, 0)) == [(ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)]
        assert _ask(broker, version, (TOPIC, 0, 0, 0)) == [(0, 0, RECORDS)]


def _fetch(broker: BrokerProcess, topic_id: uuid.UUID, version: int, fetch_offset: int,
           last_fetched_epoch: int) -> tuple[int, int, int, list[int]]:
    """(error, diverging epoch, its end offset, base offsets of the batches answered)."""
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[FetchTopic(
                               topic=TOPIC, topic_id=topic_id, partitions=[FetchPartition(
                                   partition=0, current_leader_epoch=0, fetch_offset=fetch_offset,
                                   last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                                   partition_max_bytes=1 << 20)])])
    response = send_request(broker, fetch.API_KEY, version, request)
    (data,) = response.responses[0].partitions
    records = bytes(data.records or b"")
    bases = [h.base_offset for _, h in iter_batch_headers(records)] if records else []
    return data.error_code, data.diverging_epoch.epoch, data.diverging_epoch.end_offset, bases


@pytest.mark.parametrize("version", range(12, fetch.MAX_VERSION + 1))
def test_fetch_answers_a_diverging_epoch(broker_with_records: tuple[BrokerProcess, uuid.UUID],
                                         version: int) -> None:
    broker, topic_id = broker_with_records
    # In step with the log: records, no divergence.
    error, epoch, end, bases = _fetch(broker, topic_id, version, 4, 0)
    assert (error, epoch, end) == (0, -1, -1) and bases and bases[0] <= 4
    # The fetcher's epoch 0 goes past where the leader's epoch 0 ends: truncate to 10 first.
    assert _fetch(broker, topic_id, version, RECORDS + 3, 0) == (0, 0, RECORDS, [])
    # An epoch the leader never had, above its own: no common epoch is known.
    assert _fetch(broker, topic_id, version, 4, 5) == (0, -1, -1, [])
    # No last fetched epoch (a consumer): no check, the fetch offset is simply out of range.
    assert _fetch(broker, topic_id, version, RECORDS + 3, -1)[0] == ErrorCode.OFFSET_OUT_OF_RANGE
