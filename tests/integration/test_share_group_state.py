"""The persister APIs (83-87) on a real broker process: state written through them survives a restart.

The share switch (``group.coordinator.rebalance.protocols`` listing ``share``)
serves and advertises them; without it a broker neither lists nor serves them.
"""

from __future__ import annotations

import signal
import uuid
from typing import Any

from coordinator.common.partitioner import partition_for
from coordinator.share.share_coordinator_records import SharePartitionKey, kafka_uuid_string
from protocol.errors import ErrorCode
from protocol.messages import api_versions as av
from protocol.messages import delete_share_group_state as delete_
from protocol.messages import find_coordinator as fc
from protocol.messages import initialize_share_group_state as init_
from protocol.messages import list_offsets as lo
from protocol.messages import read_share_group_state as read_
from protocol.messages import read_share_group_state_summary as summary_
from protocol.messages import write_share_group_state as write_
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.plugin import BrokerFactory
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request

SHARE_ON = ("group.coordinator.rebalance.protocols=classic,share", "share.coordinator.state.topic.num.partitions=3",
            "share.coordinator.snapshot.update.records.per.snapshot=2",
            "share.coordinator.state.topic.prune.interval.ms=200")
PERSISTER_APIS = {83, 84, 85, 86, 87}
TOPIC = uuid.UUID("6a3b6d1e-0f4b-4c55-9a51-0d4f3b2c1a00")
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4


def _partition(response: Any) -> Any:
    [result] = response.results
    [partition] = result.partitions
    return partition


def initialize(broker: BrokerProcess, group: str, partition: int, state_epoch: int, start_offset: int) -> Any:
    return _partition(send_request(broker, 83, 0, init_.InitializeShareGroupStateRequest(
        group_id=group, topics=[init_.InitializeStateData(topic_id=TOPIC, partitions=[init_.PartitionData(
            partition=partition, state_epoch=state_epoch, start_offset=start_offset)])])))


def write(broker: BrokerProcess, group: str, partition: int, state_epoch: int, leader_epoch: int,
          start_offset: int, batches: list[tuple[int, int, int, int]], version: int = 1) -> Any:
    return _partition(send_request(broker, 85, version, write_.WriteShareGroupStateRequest(
        group_id=group, topics=[write_.WriteStateData(topic_id=TOPIC, partitions=[write_.PartitionData(
            partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            state_batches=[write_.StateBatch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                           for f, la, s, c in batches])])])))


def read(broker: BrokerProcess, group: str, partition: int, leader_epoch: int) -> Any:
    return _partition(send_request(broker, 84, 0, read_.ReadShareGroupStateRequest(
        group_id=group, topics=[read_.ReadStateData(topic_id=TOPIC, partitions=[read_.PartitionData(
            partition=partition, leader_epoch=leader_epoch)])])))


def summary(broker: BrokerProcess, group: str, partition: int, version: int = 1) -> Any:
    return _partition(send_request(broker, 87, version, summary_.ReadShareGroupStateSummaryRequest(
        group_id=group, topics=[summary_.ReadStateSummaryData(topic_id=TOPIC, partitions=[summary_.PartitionData(
            partition=partition, leader_epoch=-1)])])))


def delete(broker: BrokerProcess, group: str, partition: int) -> Any:
    return _partition(send_request(broker, 86, 0, delete_.DeleteShareGroupStateRequest(
        group_id=group, topics=[delete_.DeleteStateData(topic_id=TOPIC, partitions=[delete_.PartitionData(
            partition=partition)])])))


def state_of(result: Any) -> tuple[int, int, list[tuple[int, int, int, int]]]:
    assert result.error_code == ErrorCode.NO_ERROR, result.error_message
    return result.state_epoch, result.start_offset, [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches]


def find_share_coordinator(broker: BrokerProcess, key: str) -> Any:
    return send_request(broker, 10, 6, fc.FindCoordinatorRequest(key_type=2, coordinator_keys=[key]))


def log_start_offset(broker: BrokerProcess, partition: int) -> int:
    response = send_request(broker, 2, 1, lo.ListOffsetsRequest(replica_id=-1, topics=[lo.ListOffsetsTopic(
        name="__share_group_state", partitions=[lo.ListOffsetsPartition(partition_index=partition, timestamp=-2)])]))
    [topic] = response.topics
    [result] = topic.partitions
    assert result.error_code == ErrorCode.NO_ERROR
    return int(result.offset)


def advertised(broker: BrokerProcess) -> dict[int, int]:
    response = send_request(broker, 18, 3, av.ApiVersionsRequest(client_software_name="pafka-tests",
                                                                 client_software_version="1"))
    return {k.api_key: k.max_version for k in response.api_keys}


def test_the_persister_apis_are_served_only_behind_the_share_switch(pafka_broker_factory: BrokerFactory) -> None:
    off = advertised(pafka_broker_factory("group.coordinator.rebalance.protocols=classic,consumer"))
    assert not set(off) & PERSISTER_APIS
    assert off[10] == 5  # FindCoordinator v6 only adds key type SHARE
    on = advertised(pafka_broker_factory())  # on by default
    assert set(on) >= PERSISTER_APIS
    assert (on[10], on[85], on[87]) == (6, 1, 1)


def test_a_share_key_must_be_group_topic_partition(pafka_broker_factory: BrokerFactory) -> None:
    broker = pafka_broker_factory(*SHARE_ON)
    [bad] = find_share_coordinator(broker, "no-partition").coordinators
    assert bad.error_code == ErrorCode.INVALID_REQUEST


def test_state_written_through_the_apis_survives_restarts(pafka_broker_factory: BrokerFactory) -> None:
    broker = pafka_broker_factory(*SHARE_ON)
    # As a broker's persister does: FindCoordinator (key type SHARE, v6) creates __share_group_state.
    [found] = find_share_coordinator(broker, f"g:{kafka_uuid_string(TOPIC)}:0").coordinators
    assert (found.error_code, found.node_id, found.port) == (ErrorCode.NO_ERROR, 0, broker.port)
    never = read(broker, "g", 0, 3)
    assert (never.error_code, never.error_message) == (
        ErrorCode.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed.")
    assert initialize(broker, "g", 0, 1, 0).error_code == ErrorCode.NO_ERROR
    assert write(broker, "g", 0, 1, 3, 0, [(0, 9, ACKED, 1)]).error_code == ErrorCode.NO_ERROR
    assert write(broker, "g", 0, 1, 3, 5, [(8, 12, AVAILABLE, 2)], version=0).error_code == ErrorCode.NO_ERROR
    assert write(broker, "g", 0, 1, 3, 5, [(13, 13, ARCHIVED, 5)]).error_code == ErrorCode.NO_ERROR
    assert initialize(broker, "other", 4, 1, 77).error_code == ErrorCode.NO_ERROR
    fenced = write(broker, "g", 0, 0, 3, 20, [(20, 21, ACKED, 1)])
    assert fenced.error_code == ErrorCode.FENCED_STATE_EPOCH
    expected = (1, 5, [(5, 7, ACKED, 1), (8, 12, AVAILABLE, 2), (13, 13, ARCHIVED, 5)])
    assert state_of(read(broker, "g", 0, 3)) == expected
    # Records before the key's latest snapshot are deleted; what remains holds the same state.
    state_partition = partition_for(SharePartitionKey("g", TOPIC, 0).coordinator_key(), 3)
    wait_until(lambda: log_start_offset(broker, state_partition) > 0, 30, "__share_group_state pruned")

    broker.restart(signal.SIGKILL)  # answered writes are in the log, whatever the shutdown
    after = wait_until(lambda: read(broker, "g", 0, 3), 30, "the state loaded again",
                       until=lambda r: r.error_code == ErrorCode.NO_ERROR)
    assert state_of(after) == expected
    other = summary(broker, "other", 4)
    assert (other.error_code, other.state_epoch, other.start_offset) == (ErrorCode.NO_ERROR, 1, 77)
    assert summary(broker, "other", 4, version=0).start_offset == 77  # v0: Kafka 4.1's, without the lag fields
    assert read(broker, "g", 0, 2).error_code == ErrorCode.FENCED_LEADER_EPOCH

    assert delete(broker, "g", 0).error_code == ErrorCode.NO_ERROR
    broker.restart()
    gone = wait_until(lambda: read(broker, "g", 0, -1), 30, "the state loaded again",
                      until=lambda r: r.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert gone.error_code == ErrorCode.INVALID_REQUEST  # deleted: never initialized again
    assert summary(broker, "other", 4).start_offset == 77

