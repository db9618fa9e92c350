"""ListOffsets at every served version against a real broker with data.

aiokafka asks ListOffsets v3 after producing; a v1-v3 response has no leader
epoch field, and a broker that put the partition's epoch there could not
encode the response at all (the connection closed and the client retried
forever). Every version must answer the earliest and latest offsets.

v0 (Kafka 3.9's, removed in 4) answers a list, ``old_style_offsets``: segment
start offsets and the log end offset, descending, at most ``max_num_offsets``.
"""

from __future__ import annotations

import pytest

from broker.handlers import list_offsets
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request
from testing.topics import create_topic

EARLIEST, LATEST = -2, -1


@pytest.fixture(scope="module")
def broker_with_records(broker: BrokerProcess) -> BrokerProcess:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("offsets", value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    return broker


@pytest.mark.parametrize("version", range(list_offsets.MIN_VERSION, list_offsets.MAX_VERSION + 1))
def test_earliest_and_latest_at_every_version(broker_with_records: BrokerProcess, version: int) -> None:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsTopic(
        name="offsets", partitions=[ListOffsetsPartition(partition_index=0, timestamp=t) for t in (EARLIEST, LATEST)])])
    response = send_request(broker_with_records, list_offsets.API_KEY, version, request)
    (topic,) = response.topics
    earliest, latest = topic.partitions
    if version == 0:
        # max_num_offsets defaults to 1: the one offset each end starts from.
        assert (earliest.error_code, earliest.old_style_offsets) == (0, [0])
        assert (latest.error_code, latest.old_style_offsets) == (0, [10])
        return
    assert (earliest.error_code, earliest.offset) == (0, 0)
    assert (latest.error_code, latest.offset) == (0, 10)
    if version >= 4:
        assert latest.leader_epoch == 0


def _v0_offsets(broker: BrokerProcess, topic: str, timestamp: int, max_num_offsets: int) -> tuple[int, list[int]]:
    response = send_request(broker, list_offsets.API_KEY, 0, ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(
            partition_index=0, timestamp=timestamp, max_num_offsets=max_num_offsets)])]))
    (partition,) = response.topics[0].partitions
    return partition.error_code, list(partition.old_style_offsets)


def test_v0_lists_segment_starts(broker: BrokerProcess) -> None:
    import time

    from confluent_kafka import Producer

    # segment.ms=1 and a pause between batches: every batch starts a segment.
    create_topic(broker.bootstrap, "segmented", 1, {"segment.ms": "1"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(5):
        producer.produce("segmented", value=b"%d" % i, partition=0)
        assert producer.flush(30) == 0  # one batch each
        time.sleep(0.01)
    assert _v0_offsets(broker, "segmented", LATEST, 10) == (0, [5, 4, 3, 2, 1, 0])
    assert _v0_offsets(broker, "segmented", LATEST, 3) == (0, [5, 4, 3])
    assert _v0_offsets(broker, "segmented", EARLIEST, 10) == (0, [0])
    # By time: candidates are dated by segment file modification (the log end now).
    future = int(time.time() * 1000) + 3_600_000
    assert _v0_offsets(broker, "segmented", future, 2) == (0, [5, 4])
    assert _v0_offsets(broker, "segmented", 1, 10) == (0, [])  # nothing that old
    error, offsets = _v0_offsets(broker, "no-such-topic", LATEST, 1)
    assert (error, offsets) == (3, [])  # UNKNOWN_TOPIC_OR_PARTITION
