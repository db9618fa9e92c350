"""ListOffsets at every served version against a real broker with data.

aiokafka asks ListOffsets v3 after producing; a v1-v3 response has no leader
epoch field, and a broker that put the partition's epoch there could not
encode the response at all (the connection closed and the client retried
forever). Every version must answer the earliest and latest offsets.
"""

from __future__ import annotations

import pytest

from broker.handlers import list_offsets
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from testing.broker_process import BrokerProcess
from testing.sockets import send_request

EARLIEST, LATEST = -2, -1


@pytest.fixture(scope="module")
def broker_with_records(module_broker: BrokerProcess) -> BrokerProcess:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": module_broker.bootstrap})
    for i in range(10):
        producer.produce("offsets", value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    return module_broker


@pytest.mark.parametrize("version", range(list_offsets.MIN_VERSION, list_offsets.MAX_VERSION + 1))
def test_earliest_and_latest_at_every_version(broker_with_records: BrokerProcess, version: int) -> None:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsTopic(
        name="offsets", partitions=[ListOffsetsPartition(partition_index=0, timestamp=t) for t in (EARLIEST, LATEST)])])
    response = send_request(broker_with_records, list_offsets.API_KEY, version, request)
    (topic,) = response.topics
    earliest, latest = topic.partitions
    assert (earliest.error_code, earliest.offset) == (0, 0)
    assert (latest.error_code, latest.offset) == (0, 10)
    if version >= 4:
        assert latest.leader_epoch == 0
