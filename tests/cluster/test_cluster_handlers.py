"""The inter-broker APIs of a cluster member, at every version pafka serves, on the wire.

One real broker joins a real ZooKeeper in which the test holds ``/controller``
(broker 99, epoch 5): the broker's own controller stays inactive, and the test
plays the controller, sending UpdateMetadata, LeaderAndIsr and StopReplica as
Kafka's controller would, with its epoch and the broker's epoch (the czxid of
``/brokers/ids/1``). Older epochs are refused. ControlledShutdown,
AlterPartition and ElectLeaders reach a broker that is not the controller:
NOT_CONTROLLER at every version. A lone broker (no ``zookeeper.connect``)
neither advertises these APIs nor serves them.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kazoo.client import KazooClient

from broker.handlers import (
    alter_partition,
    alter_partition_reassignments,
    controlled_shutdown,
    elect_leaders,
    leader_and_isr,
    list_offsets,
    list_partition_reassignments,
    stop_replica,
)
from broker.handlers import update_metadata as update_metadata_handler
from client.connection import BrokerConnection
from client.errors import KafkaConnectionError
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionRequestPartitionData,
    AlterPartitionRequestTopicData,
    AlterPartitionResponse,
)
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.controlled_shutdown import ControlledShutdownRequest, ControlledShutdownResponse
from protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse, TopicPartitions
from protocol.messages.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicState,
)
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaPartitionV0,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaTopicState,
    StopReplicaTopicV1,
)
from protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    UpdateMetadataTopicState,
)
from protocol.records import Record, build_batch
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from pytest_pafka.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.slow
API_VERSIONS = ApiVersionsRequest(client_software_name="pafka-tests", client_software_version="1")

BROKER_ID = 1
#: The test's stand-in controller: a broker id no process has, and its epoch.
CONTROLLER_ID = 99
CONTROLLER_EPOCH = 5


@dataclass
class Member:
    broker: BrokerProcess
    zk: KazooClient

    @property
    def broker_epoch(self) -> int:
        stat = self.zk.exists(f"/brokers/ids/{BROKER_ID}")
        assert stat is not None
        return int(stat.czxid)


@pytest.fixture(scope="module")
def member(zookeeper: ZooKeeperProcess) -> Iterator[Member]:
    chroot = f"handlers-{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zookeeper.connect_string, timeout=10)
    root.start(timeout=10)
    root.ensure_path(f"/{chroot}")
    root.stop()
    root.close()
    zk = KazooClient(hosts=zookeeper.chroot(chroot), timeout=10)
    zk.start(timeout=10)
    # Held by this session for the whole module: the broker's controller never wins the election.
    zk.create("/controller", json.dumps({"version": 1, "brokerid": CONTROLLER_ID, "timestamp": "0"}).encode(),
              ephemeral=True)
    zk.create("/controller_epoch", str(CONTROLLER_EPOCH).encode())
    broker = BrokerProcess(f"zookeeper.connect={zookeeper.chroot(chroot)}", f"broker.id={BROKER_ID}",
                           "zookeeper.session.timeout.ms=6000")
    try:
        broker.start()
        # Listening comes before registering (the registration names the bound ports): the
        # tests' broker epoch is the registration's, so wait for it.
        wait_until(lambda: zk.exists(f"/brokers/ids/{BROKER_ID}") is not None, 30, f"broker {BROKER_ID} never registered")
        yield Member(broker, zk)
    finally:
        broker.cleanup()
        zk.stop()
        zk.close()


def send(broker: BrokerProcess, body: Any, version: int) -> Any:
    with BrokerConnection(broker.host, broker.port) as conn:
        try:
            return conn.request(body, version=version, timeout=30)
        except KafkaConnectionError as exc:
            raise AssertionError(f"{exc}; the broker's log ends:\n{broker.log_text()[-3000:]}") from exc


def list_offset(broker: BrokerProcess, topic: str, timestamp: int = -1, version: int = 7,
                replica_id: int = -1) -> ListOffsetsPartitionResponse:
    """ListOffsets for ``topic``-0 (latest by default), as a consumer asks unless ``replica_id`` says otherwise."""
    response = send(broker, ListOffsetsRequest(replica_id=replica_id, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)])]), version)
    assert isinstance(response, ListOffsetsResponse)
    (partition,) = response.topics[0].partitions
    return partition


def latest_offset_error(broker: BrokerProcess, topic: str) -> int:
    return list_offset(broker, topic).error_code


def _versions(module: Any) -> range:
    return range(module.MIN_VERSION, module.MAX_VERSION + 1)


# -- UpdateMetadata ------------------------------------------------------------------------------
def _live_brokers(broker: BrokerProcess) -> list[UpdateMetadataBroker]:
    return [
        UpdateMetadataBroker(id=BROKER_ID, v0_host=broker.host, v0_port=broker.port, rack="r1", endpoints=[
            UpdateMetadataEndpoint(host=broker.host, port=broker.port, listener="PLAINTEXT", security_protocol=0)]),
        UpdateMetadataBroker(id=CONTROLLER_ID, v0_host="127.0.0.99", v0_port=9999, rack="r2", endpoints=[
            UpdateMetadataEndpoint(host="127.0.0.99", port=9999, listener="PLAINTEXT", security_protocol=0)]),
    ]


def _update_metadata(member: Member, version: int, topic: str, controller_epoch: int = CONTROLLER_EPOCH,
                     broker_epoch: int | None = None) -> UpdateMetadataRequest:
    states = [UpdateMetadataPartitionState(topic_name=topic, partition_index=p, controller_epoch=controller_epoch,
                                           leader=leader, leader_epoch=3, isr=[BROKER_ID, CONTROLLER_ID], zk_version=2,
                                           replicas=[leader, BROKER_ID + CONTROLLER_ID - leader], offline_replicas=[])
              for p, leader in enumerate((BROKER_ID, CONTROLLER_ID))]
    request = UpdateMetadataRequest(
        controller_id=CONTROLLER_ID, controller_epoch=controller_epoch,
        broker_epoch=member.broker_epoch if broker_epoch is None else broker_epoch,
        live_brokers=_live_brokers(member.broker))
    if version >= 5:
        request.topic_states = [UpdateMetadataTopicState(topic_name=topic, topic_id=uuid.uuid4(),
                                                         partition_states=states)]
    else:
        request.ungrouped_partition_states = states
    return request


@pytest.mark.parametrize("version", _versions(update_metadata_handler))
def test_update_metadata_versions(member: Member, version: int) -> None:
    topic = f"um-v{version}"
    response = send(member.broker, _update_metadata(member, version, topic), version)
    assert isinstance(response, UpdateMetadataResponse) and response.error_code == ErrorCode.NO_ERROR
    shown = send(member.broker, MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                allow_auto_topic_creation=False), 12)
    assert isinstance(shown, MetadataResponse)
    assert shown.controller_id == CONTROLLER_ID
    assert sorted((b.node_id, b.host, b.port) for b in shown.brokers) == [
        (BROKER_ID, member.broker.host, member.broker.port), (CONTROLLER_ID, "127.0.0.99", 9999)]
    assert {b.node_id: b.rack for b in shown.brokers} == (
        {BROKER_ID: "r1", CONTROLLER_ID: "r2"} if version >= 2 else {BROKER_ID: None, CONTROLLER_ID: None})
    [described] = shown.topics
    assert described.error_code == ErrorCode.NO_ERROR
    assert [(p.partition_index, p.leader_id, p.leader_epoch) for p in described.partitions] == [
        (0, BROKER_ID, 3), (1, CONTROLLER_ID, 3)]
    # A deposed controller, and a request meant for an earlier registration, change nothing.
    stale = send(member.broker, _update_metadata(member, version, "stale-" + topic, CONTROLLER_EPOCH - 1), version)
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    if version >= 5:
        old = send(member.broker, _update_metadata(member, version, "old-" + topic,
                                                   broker_epoch=member.broker_epoch - 1), version)
        assert old.error_code == ErrorCode.STALE_BROKER_EPOCH
    gone = send(member.broker, MetadataRequest(topics=[MetadataRequestTopic(name="stale-" + topic)],
                                               allow_auto_topic_creation=False), 12)
    assert gone.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- LeaderAndIsr --------------------------------------------------------------------------------
#: A topic keeps its id from one LeaderAndIsr to the next.
TOPIC_IDS: dict[str, uuid.UUID] = {}


def _leader_and_isr(member: Member, version: int, topic: str, controller_epoch: int = CONTROLLER_EPOCH,
                    broker_epoch: int | None = None, leader_epoch: int = 0,
                    replicas: tuple[int, ...] = (BROKER_ID,)) -> LeaderAndIsrRequest:
    """This broker leads ``topic``-0 at ``leader_epoch``, every replica in sync."""
    state = LeaderAndIsrPartitionState(topic_name=topic, partition_index=0, controller_epoch=controller_epoch,
                                       leader=BROKER_ID, leader_epoch=leader_epoch, isr=list(replicas),
                                       partition_epoch=leader_epoch, replicas=list(replicas), is_new=leader_epoch == 0)
    request = LeaderAndIsrRequest(
        controller_id=CONTROLLER_ID, controller_epoch=controller_epoch,
        broker_epoch=member.broker_epoch if broker_epoch is None else broker_epoch,
        live_leaders=[LeaderAndIsrLiveLeader(broker_id=BROKER_ID, host_name=member.broker.host,
                                             port=member.broker.port)])
    if version >= 2:
        request.topic_states = [LeaderAndIsrTopicState(topic_name=topic, topic_id=TOPIC_IDS.setdefault(topic, uuid.uuid4()),
                                                       partition_states=[state])]
    else:
        request.ungrouped_partition_states = [state]
    return request


def _partition_errors(response: LeaderAndIsrResponse, version: int) -> list[int]:
    if version >= 5:
        return [p.error_code for t in response.topics for p in t.partition_errors]
    return [p.error_code for p in response.partition_errors]


@pytest.mark.parametrize("version", _versions(leader_and_isr))
def test_leader_and_isr_versions(member: Member, version: int) -> None:
    topic = f"lai-v{version}"
    response = send(member.broker, _leader_and_isr(member, version, topic), version)
    assert isinstance(response, LeaderAndIsrResponse)
    assert response.error_code == ErrorCode.NO_ERROR and _partition_errors(response, version) == [ErrorCode.NO_ERROR]
    assert latest_offset_error(member.broker, topic) == ErrorCode.NO_ERROR  # led here now

    stale = send(member.broker, _leader_and_isr(member, version, "stale-" + topic, CONTROLLER_EPOCH - 1), version)
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    if version >= 2:
        old = send(member.broker, _leader_and_isr(member, version, "old-" + topic,
                                                  broker_epoch=member.broker_epoch - 1), version)
        assert old.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert _partition_errors(old, version) == [ErrorCode.STALE_BROKER_EPOCH]
    for refused in ("stale-" + topic, "old-" + topic):
        assert latest_offset_error(member.broker, refused) != ErrorCode.NO_ERROR


# -- ListOffsets at a new leader behind its epoch's start (KIP-207) -------------------------------
def _lead_with_absent_follower(member: Member, topic: str, leader_epoch: int) -> None:
    """This broker leads ``topic``-0 at ``leader_epoch`` with the stand-in controller's broker as
    an in-sync follower that never fetches: the high watermark stays where it is."""
    request = _leader_and_isr(member, leader_and_isr.MAX_VERSION, topic, leader_epoch=leader_epoch,
                              replicas=(BROKER_ID, CONTROLLER_ID))
    response = send(member.broker, request, leader_and_isr.MAX_VERSION)
    assert response.error_code == ErrorCode.NO_ERROR
    assert _partition_errors(response, leader_and_isr.MAX_VERSION) == [ErrorCode.NO_ERROR]


def test_a_new_leader_behind_its_epoch_start_has_no_latest_offset_for_clients(member: Member) -> None:
    topic = "kip207"
    _lead_with_absent_follower(member, topic, leader_epoch=0)
    produced = send(member.broker, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=0, records=bytes(build_batch(
            [Record(i, 0, None, b"v") for i in range(5)])))])]), 9)
    assert isinstance(produced, ProduceResponse)
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NO_ERROR
    # Still the first epoch, which started at 0: the high watermark (0) is not behind it.
    latest = list_offset(member.broker, topic, -1, list_offsets.MAX_VERSION)
    assert (latest.error_code, latest.offset) == (ErrorCode.NO_ERROR, 0)

    _lead_with_absent_follower(member, topic, leader_epoch=1)  # epoch 1 starts at 5; the HW is 0
    assert list_offset(member.broker, topic, -1, list_offsets.MAX_VERSION).error_code == ErrorCode.OFFSET_NOT_AVAILABLE
    assert list_offset(member.broker, topic, -1, 5).error_code == ErrorCode.OFFSET_NOT_AVAILABLE
    for older in range(1, 5):
        assert list_offset(member.broker, topic, -1, older).error_code == ErrorCode.LEADER_NOT_AVAILABLE, older
    earliest = list_offset(member.broker, topic, -2, list_offsets.MAX_VERSION)
    assert (earliest.error_code, earliest.offset) == (ErrorCode.NO_ERROR, 0)
    # A debugging client (replica id -2) sees the log end.
    debugging = list_offset(member.broker, topic, -1, list_offsets.MAX_VERSION, replica_id=-2)
    assert (debugging.error_code, debugging.offset) == (ErrorCode.NO_ERROR, 5)


# -- StopReplica ---------------------------------------------------------------------------------
def _stop_replica(member: Member, version: int, topic: str, broker_epoch: int | None = None) -> StopReplicaRequest:
    request = StopReplicaRequest(controller_id=CONTROLLER_ID, controller_epoch=CONTROLLER_EPOCH,
                                 broker_epoch=member.broker_epoch if broker_epoch is None else broker_epoch,
                                 delete_partitions=version <= 2)
    if version == 0:
        request.ungrouped_partitions = [StopReplicaPartitionV0(topic_name=topic, partition_index=0)]
    elif version <= 2:
        request.topics = [StopReplicaTopicV1(name=topic, partition_indexes=[0])]
    else:
        request.topic_states = [StopReplicaTopicState(topic_name=topic, partition_states=[
            StopReplicaPartitionState(partition_index=0, leader_epoch=1, delete_partition=True)])]
    return request


@pytest.mark.parametrize("version", _versions(stop_replica))
def test_stop_replica_versions(member: Member, version: int) -> None:
    topic = f"sr-v{version}"
    led = send(member.broker, _leader_and_isr(member, leader_and_isr.MAX_VERSION, topic), leader_and_isr.MAX_VERSION)
    assert led.error_code == ErrorCode.NO_ERROR
    assert latest_offset_error(member.broker, topic) == ErrorCode.NO_ERROR
    if version >= 1:
        old = send(member.broker, _stop_replica(member, version, topic, member.broker_epoch - 1), version)
        assert isinstance(old, StopReplicaResponse) and old.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert latest_offset_error(member.broker, topic) == ErrorCode.NO_ERROR  # still hosted
    response = send(member.broker, _stop_replica(member, version, topic), version)
    assert isinstance(response, StopReplicaResponse) and response.error_code == ErrorCode.NO_ERROR
    assert [(p.topic_name, p.partition_index, p.error_code) for p in response.partition_errors] == [
        (topic, 0, ErrorCode.NO_ERROR)]
    assert latest_offset_error(member.broker, topic) in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


# -- the controller's APIs, sent to a broker that is not the controller ---------------------------
@pytest.mark.parametrize("version", _versions(controlled_shutdown))
def test_controlled_shutdown_versions(member: Member, version: int) -> None:
    response = send(member.broker, ControlledShutdownRequest(broker_id=BROKER_ID, broker_epoch=member.broker_epoch),
                    version)
    assert isinstance(response, ControlledShutdownResponse)
    assert response.error_code == ErrorCode.NOT_CONTROLLER and response.remaining_partitions == []


@pytest.mark.parametrize("version", _versions(alter_partition))
def test_alter_partition_versions(member: Member, version: int) -> None:
    data = AlterPartitionRequestPartitionData(partition_index=0, leader_epoch=0, partition_epoch=0)
    if version < 3:
        data.new_isr = [BROKER_ID]
    topic = AlterPartitionRequestTopicData(topic_name="lai-v7", topic_id=uuid.uuid4(), partitions=[data])
    response = send(member.broker, AlterPartitionRequest(broker_id=BROKER_ID, broker_epoch=member.broker_epoch,
                                                         topics=[topic]), version)
    assert isinstance(response, AlterPartitionResponse) and response.error_code == ErrorCode.NOT_CONTROLLER


@pytest.mark.parametrize("version", _versions(elect_leaders))
def test_elect_leaders_versions(member: Member, version: int) -> None:
    response = send(member.broker, ElectLeadersRequest(
        election_type=0, timeout_ms=5000,
        topic_partitions=[TopicPartitions(topic="lai-v7", partitions=[0])]), version)
    assert isinstance(response, ElectLeadersResponse)
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in response.replica_election_results] == [("lai-v7", [(0, ErrorCode.NOT_CONTROLLER)])]
    if version >= 1:
        everything = send(member.broker, ElectLeadersRequest(election_type=0, timeout_ms=5000,
                                                             topic_partitions=None), version)
        assert everything.error_code == ErrorCode.NOT_CONTROLLER


@pytest.mark.parametrize("version", _versions(alter_partition_reassignments))
def test_alter_partition_reassignments_versions(member: Member, version: int) -> None:
    response = send(member.broker, AlterPartitionReassignmentsRequest(timeout_ms=5000, topics=[ReassignableTopic(
        name="lai-v7", partitions=[ReassignablePartition(partition_index=0, replicas=[BROKER_ID])])]), version)
    assert isinstance(response, AlterPartitionReassignmentsResponse)
    assert response.error_code == ErrorCode.NOT_CONTROLLER and response.responses == []


@pytest.mark.parametrize("version", _versions(list_partition_reassignments))
def test_list_partition_reassignments_versions(member: Member, version: int) -> None:
    response = send(member.broker, ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None), version)
    assert isinstance(response, ListPartitionReassignmentsResponse)
    assert response.error_code == ErrorCode.NOT_CONTROLLER and response.topics == []


# -- a lone broker has none of them ---------------------------------------------------------------
INTER_BROKER = {4: LeaderAndIsrRequest, 5: StopReplicaRequest, 6: UpdateMetadataRequest,
                7: ControlledShutdownRequest, 43: ElectLeadersRequest, 45: AlterPartitionReassignmentsRequest,
                46: ListPartitionReassignmentsRequest, 56: AlterPartitionRequest}


@pytest.fixture(scope="module")
def lone_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess() as running:
        yield running


def test_a_lone_broker_neither_advertises_nor_serves_inter_broker_apis(lone_broker: BrokerProcess) -> None:
    keys = {k.api_key for k in send(lone_broker, API_VERSIONS, 3).api_keys}
    assert 3 in keys and not keys & set(INTER_BROKER)
    for key, request_class in INTER_BROKER.items():
        with BrokerConnection(lone_broker.host, lone_broker.port) as conn:
            with pytest.raises((KafkaConnectionError, ConnectionError, socket.timeout, OSError)):
                conn.request(request_class(), version=0, timeout=10)
        assert key not in keys
    # And it still serves everyone else.
    assert send(lone_broker, MetadataRequest(topics=[]), 12).controller_id == 0
