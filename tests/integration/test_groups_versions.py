"""Every advertised version of every group API, request and response, against a real broker.

ApiVersions advertises exactly what the handler modules declare; this walks
each version with raw requests (so no client's version choice hides one) and
checks the fields that version carries.
"""

from __future__ import annotations

from typing import Any

import pytest

from broker.handlers import (
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from protocol.consumer_protocol import encode_assignment, encode_subscription
from protocol.errors import ErrorCode
from protocol.messages import delete_groups as dg
from protocol.messages import describe_groups as dsc
from protocol.messages import find_coordinator as fc
from protocol.messages import heartbeat as hb
from protocol.messages import join_group as jg
from protocol.messages import leave_group as lg
from protocol.messages import list_groups as lsg
from protocol.messages import offset_commit as oc
from protocol.messages import offset_delete as od
from protocol.messages import offset_fetch as of
from protocol.messages import sync_group as sg
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request
from testing.topics import create_topic

TOPIC = "versions"


pytestmark = pytest.mark.pafka_broker_config("group.initial.rebalance.delay.ms=0")


@pytest.fixture(scope="module")
def broker(pafka_module_broker: BrokerProcess) -> BrokerProcess:
    """The module's broker, with the topic its tests read."""
    create_topic(pafka_module_broker.bootstrap, TOPIC, 2)
    return pafka_module_broker


def versions(module: Any) -> range:
    return range(module.MIN_VERSION, module.MAX_VERSION + 1)


def topic_id(broker: BrokerProcess) -> Any:
    from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic

    response = send_request(broker, 3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]))
    return response.topics[0].topic_id


@pytest.mark.parametrize("version", versions(find_coordinator))
def test_find_coordinator(broker: BrokerProcess, version: int) -> None:
    if version >= 4:
        response = send_request(broker, 10, version, fc.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]))
        assert [(c.key, c.node_id, c.port, c.error_code) for c in response.coordinators] == [
            ("a", 0, broker.port, 0), ("b", 0, broker.port, 0)]
        txn = send_request(broker, 10, version, fc.FindCoordinatorRequest(key_type=1, coordinator_keys=["t"]))
        assert [(c.key, c.node_id, c.error_code) for c in txn.coordinators] == [("t", 0, 0)]
    else:
        request = fc.FindCoordinatorRequest(key="a", key_type=0) if version >= 1 else fc.FindCoordinatorRequest(key="a")
        response = send_request(broker, 10, version, request)
        assert (response.error_code, response.node_id, response.host, response.port) == (0, 0, "127.0.0.1", broker.port)


def _join(broker: BrokerProcess, version: int, group: str, member_id: str = "", instance: str | None = None) -> Any:
    request = jg.JoinGroupRequest(group_id=group, session_timeout_ms=10000, member_id=member_id,
                                  protocol_type="consumer",
                                  protocols=[jg.JoinGroupRequestProtocol(name="range",
                                                                         metadata=encode_subscription([TOPIC]))])
    if version >= 1:
        request.rebalance_timeout_ms = 10000
    if version >= 5:
        request.group_instance_id = instance
    if version >= 8:
        request.reason = "testing"
    return send_request(broker, 11, version, request)


def _member(broker: BrokerProcess, version: int, group: str) -> tuple[str, int]:
    first = _join(broker, version, group)
    if version >= 4:
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.generation_id == -1
        first = _join(broker, version, group, first.member_id)
    assert first.error_code == ErrorCode.NO_ERROR, first
    assert first.leader == first.member_id and first.protocol_name == "range"
    assert [m.member_id for m in first.members] == [first.member_id]
    if version >= 7:
        assert first.protocol_type == "consumer"
    return first.member_id, first.generation_id


@pytest.mark.parametrize("version", versions(join_group))
def test_join_sync_heartbeat_leave(broker: BrokerProcess, version: int) -> None:
    group = f"join-v{version}"
    member_id, generation = _member(broker, version, group)
    assert generation == 1
    sync_version = min(version, sync_group.MAX_VERSION)
    assignment = encode_assignment({TOPIC: [0, 1]})
    request = sg.SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                                  assignments=[sg.SyncGroupRequestAssignment(member_id=member_id,
                                                                             assignment=assignment)])
    if sync_version >= 5:
        request.protocol_type, request.protocol_name = "consumer", "range"
    synced = send_request(broker, 14, sync_version, request)
    assert (synced.error_code, synced.assignment) == (0, assignment)
    hb_version = min(version, heartbeat.MAX_VERSION)
    beat = send_request(broker, 12, hb_version, hb.HeartbeatRequest(group_id=group, generation_id=generation,
                                                                    member_id=member_id))
    assert beat.error_code == 0
    stale = send_request(broker, 12, hb_version, hb.HeartbeatRequest(group_id=group, generation_id=generation + 5,
                                                                     member_id=member_id))
    assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
    leave_version = min(version, leave_group.MAX_VERSION)
    if leave_version >= 3:
        left = send_request(broker, 13, leave_version, lg.LeaveGroupRequest(
            group_id=group, members=[lg.MemberIdentity(member_id=member_id), lg.MemberIdentity(member_id="ghost")]))
        assert left.error_code == 0
        assert [(m.member_id, m.error_code) for m in left.members] == [(member_id, 0),
                                                                        ("ghost", ErrorCode.UNKNOWN_MEMBER_ID)]
    else:
        left = send_request(broker, 13, leave_version, lg.LeaveGroupRequest(group_id=group, member_id=member_id))
        assert left.error_code == 0
        again = send_request(broker, 13, leave_version, lg.LeaveGroupRequest(group_id=group, member_id=member_id))
        assert again.error_code == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", versions(offset_commit))
def test_offset_commit_and_fetch(broker: BrokerProcess, version: int) -> None:
    group = f"commit-v{version}"
    partition = oc.OffsetCommitRequestPartition(partition_index=1, committed_offset=40 + version,
                                                committed_metadata=f"meta-{version}")
    if version >= 6:
        partition.committed_leader_epoch = 0
    topic = oc.OffsetCommitRequestTopic(partitions=[partition])
    if version >= 10:
        topic.topic_id = topic_id(broker)
    else:
        topic.name = TOPIC
    response = send_request(broker, 8, version, oc.OffsetCommitRequest(group_id=group, topics=[topic]))
    assert [p.error_code for t in response.topics for p in t.partitions] == [0]
    unknown = oc.OffsetCommitRequestTopic(partitions=[oc.OffsetCommitRequestPartition(partition_index=0)])
    if version >= 10:
        unknown.topic_id = __import__("uuid").uuid4()
    else:
        unknown.name = "no-such-topic"
    response = send_request(broker, 8, version, oc.OffsetCommitRequest(group_id=group, topics=[unknown]))
    expected = ErrorCode.UNKNOWN_TOPIC_ID if version >= 10 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert response.topics[0].partitions[0].error_code == expected
    fetched = _fetch(broker, min(version, offset_fetch.MAX_VERSION), group)
    assert fetched == {1: (40 + version, f"meta-{version}")}


@pytest.mark.parametrize("version", [v for v in versions(offset_commit) if v >= 1])
def test_offset_commit_with_a_member_id_and_no_generation(broker: BrokerProcess, version: int) -> None:
    """An assign-only consumer commits with its own member id and generation -1: an empty group takes it,
    as Kafka does; a group with members refuses a stranger's (UNKNOWN_MEMBER_ID)."""
    group = f"assign-only-v{version}"
    topic = oc.OffsetCommitRequestTopic(partitions=[oc.OffsetCommitRequestPartition(
        partition_index=1, committed_offset=70 + version)])
    if version >= 10:
        topic.topic_id = topic_id(broker)
    else:
        topic.name = TOPIC
    request = oc.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1,
                                     member_id="rdkafka-assign-only", topics=[topic])

    def errors() -> list[int]:
        send_request(broker, 10, 1, fc.FindCoordinatorRequest(key=group, key_type=0))  # creates __consumer_offsets
        response = send_request(broker, 8, version, request)
        return [p.error_code for t in response.topics for p in t.partitions]

    # The first group request of the broker creates __consumer_offsets: its coordinator may not be ready yet.
    assert wait_until(errors, 30, "the coordinator", until=lambda e: e not in (
        [ErrorCode.NOT_COORDINATOR], [ErrorCode.COORDINATOR_NOT_AVAILABLE],
        [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS])) == [0]
    fetched = _fetch(broker, min(version, offset_fetch.MAX_VERSION), group)
    assert fetched == {1: (70 + version, "")}
    _member(broker, 5, group)  # a member joins (JoinGroup v5): the group is no longer empty
    response = send_request(broker, 8, version, request)
    assert [p.error_code for t in response.topics for p in t.partitions] == [ErrorCode.UNKNOWN_MEMBER_ID]


def _fetch(broker: BrokerProcess, version: int, group: str) -> dict[int, tuple[int, str]]:
    if version >= 8:
        t = of.OffsetFetchRequestTopics(partition_indexes=[0, 1])
        if version >= 10:
            t.topic_id = topic_id(broker)
        else:
            t.name = TOPIC
        response = send_request(broker, 9, version, of.OffsetFetchRequest(
            groups=[of.OffsetFetchRequestGroup(group_id=group, topics=[t])]))
        (g,) = response.groups
        assert g.error_code == 0 and g.group_id == group
        parts = [p for topic in g.topics for p in topic.partitions]
    else:
        response = send_request(broker, 9, version, of.OffsetFetchRequest(
            group_id=group, topics=[of.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0, 1])]))
        parts = [p for topic in response.topics for p in topic.partitions]
    assert all(p.error_code == 0 for p in parts)
    assert {p.partition_index: p.committed_offset for p in parts}[0] == -1  # none committed: -1, no error
    return {p.partition_index: (p.committed_offset, p.metadata) for p in parts if p.committed_offset >= 0}


@pytest.mark.parametrize("version", versions(offset_fetch))
def test_offset_fetch_all_topics(broker: BrokerProcess, version: int) -> None:
    group = f"fetch-all-v{version}"
    send_request(broker, 8, 8, oc.OffsetCommitRequest(group_id=group, topics=[oc.OffsetCommitRequestTopic(
        name=TOPIC, partitions=[oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=3)])]))
    if version >= 8:  # batched: several groups in one request (KIP-709)
        response = send_request(broker, 9, version, of.OffsetFetchRequest(
            groups=[of.OffsetFetchRequestGroup(group_id=group, topics=None),
                    of.OffsetFetchRequestGroup(group_id="nobody-committed", topics=None)]))
        parts = [(t.name if version < 10 else t.topic_id, p.partition_index, p.committed_offset)
                 for t in response.groups[0].topics for p in t.partitions]
        assert parts == [(TOPIC if version < 10 else topic_id(broker), 0, 3)]
        assert (response.groups[1].group_id, response.groups[1].error_code, response.groups[1].topics) == (
            "nobody-committed", 0, [])
    elif version >= 2:
        response = send_request(broker, 9, version, of.OffsetFetchRequest(group_id=group, topics=None))
        assert [(t.name, p.partition_index, p.committed_offset) for t in response.topics for p in t.partitions] == [
            (TOPIC, 0, 3)]
    else:  # v0 and v1 cannot ask for all topics
        response = send_request(broker, 9, version, of.OffsetFetchRequest(
            group_id=group, topics=[of.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]))
        assert response.topics[0].partitions[0].committed_offset == 3


def _committed_records(broker: BrokerProcess, group: str) -> list[tuple[int, int, int]]:
    """(partition, offset, commit timestamp) of the group's commits, read from __consumer_offsets itself."""
    from coordinator.group.group_metadata_manager import partition_for
    from coordinator.group.record_formats import OffsetCommitKey, decode_key, decode_offset_commit_value
    from protocol.messages import fetch as fe
    from protocol.record_batch import iter_batch_headers
    from protocol.records import iter_records

    partition = partition_for(group, 50)
    response = send_request(broker, 1, 12, fe.FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[fe.FetchTopic(
            topic="__consumer_offsets", partitions=[fe.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=1 << 20)])]))
    data = bytes(response.responses[0].partitions[0].records or b"")
    found = []
    for position, _header in iter_batch_headers(data):
        for record in iter_records(data, position):
            key = decode_key(bytes(record.key or b""))
            if isinstance(key, OffsetCommitKey) and key.group == group and record.value is not None:
                value = decode_offset_commit_value(bytes(record.value))
                found.append((key.partition, value.offset, value.commit_timestamp))
    return found


def test_offset_commit_v0_v1_as_kafka_3_9(broker: BrokerProcess) -> None:
    """v1 commits as a generation's member with Kafka 3.9's per-partition commit time
    (-1: the broker's now); v0 has no generation, so it is a simple commit, refused
    while the group has members (see the handler's docstring for why not ZooKeeper)."""
    import time

    group = "commit-v0-v1"
    member_id, generation = _member(broker, 1, group)
    send_request(broker, 14, 0, sg.SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                                                    assignments=[sg.SyncGroupRequestAssignment(
                                                        member_id=member_id,
                                                        assignment=encode_assignment({TOPIC: [0, 1]}))]))
    then = 1_500_000_000_000  # a client-chosen commit time (2017)
    before = int(time.time() * 1000)

    def commit(version: int, generation_id: int, member: str) -> list[int]:
        partitions = [oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=7),
                      oc.OffsetCommitRequestPartition(partition_index=1, committed_offset=8)]
        if version == 1:  # the only version with a per-partition commit time
            partitions[0].commit_timestamp, partitions[1].commit_timestamp = then, -1
        response = send_request(broker, 8, version, oc.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=generation_id, member_id=member,
            topics=[oc.OffsetCommitRequestTopic(name=TOPIC, partitions=partitions)]))
        return [p.error_code for t in response.topics for p in t.partitions]

    assert commit(1, generation + 1, member_id) == [ErrorCode.ILLEGAL_GENERATION] * 2
    assert commit(1, generation, "someone-else") == [ErrorCode.UNKNOWN_MEMBER_ID] * 2
    assert commit(0, -1, "") == [ErrorCode.UNKNOWN_MEMBER_ID] * 2  # the group has a member
    assert commit(1, generation, member_id) == [0, 0]
    records = _committed_records(broker, group)
    assert [(p, o) for p, o, _ in records] == [(0, 7), (1, 8)]
    assert records[0][2] == then
    assert before <= records[1][2] <= int(time.time() * 1000)
    # Once the group is empty, v0's simple commit is stored, and v0 reads it back.
    left = send_request(broker, 13, 0, lg.LeaveGroupRequest(group_id=group, member_id=member_id))
    assert left.error_code == 0
    assert commit(0, -1, "") == [0, 0]
    fetched = send_request(broker, 9, 0, of.OffsetFetchRequest(
        group_id=group, topics=[of.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0, 1])]))
    assert [(p.partition_index, p.committed_offset, p.error_code) for t in fetched.topics for p in t.partitions] == [
        (0, 7, 0), (1, 8, 0)]
    v0_times = [ts for _, _, ts in _committed_records(broker, group)[2:]]
    assert len(v0_times) == 2 and all(before <= ts <= int(time.time() * 1000) for ts in v0_times)


@pytest.mark.parametrize("version", versions(describe_groups))
def test_describe_groups(broker: BrokerProcess, version: int) -> None:
    group = f"describe-v{version}"
    member_id, generation = _member(broker, 5, group)
    send_request(broker, 14, 3, sg.SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                                                    assignments=[sg.SyncGroupRequestAssignment(
                                                        member_id=member_id, assignment=b"\x00\x00")]))
    request = dsc.DescribeGroupsRequest(groups=[group, "no-such-group"])
    if version >= 3:
        request.include_authorized_operations = True
    response = send_request(broker, 15, version, request)
    found, missing = response.groups
    assert (found.error_code, found.group_state, found.protocol_type, found.protocol_data) == (
        0, "Stable", "consumer", "range")
    assert [(m.member_id, m.client_host, m.member_assignment) for m in found.members] == [
        (member_id, "/127.0.0.1", b"\x00\x00")]
    if version >= 3:
        assert found.authorized_operations > 0
    if version >= 6:
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    else:
        assert (missing.error_code, missing.group_state) == (0, "Dead")


@pytest.mark.parametrize("version", versions(list_groups))
def test_list_groups(broker: BrokerProcess, version: int) -> None:
    group = f"list-v{version}"
    send_request(broker, 8, 8, oc.OffsetCommitRequest(group_id=group, topics=[oc.OffsetCommitRequestTopic(
        name=TOPIC, partitions=[oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]))
    request = lsg.ListGroupsRequest()
    if version >= 4:
        request.states_filter = ["empty"]
    if version >= 5:
        request.types_filter = ["classic"]
    response = send_request(broker, 16, version, request)
    assert response.error_code == 0
    listed = {g.group_id: g for g in response.groups}
    assert group in listed
    if version >= 4:
        assert {g.group_state for g in response.groups} == {"Empty"}
    if version >= 5:
        assert listed[group].group_type == "classic"
        none = send_request(broker, 16, version, lsg.ListGroupsRequest(types_filter=["share"]))
        assert none.groups == []


@pytest.mark.parametrize("version", versions(delete_groups))
def test_delete_groups_and_offset_delete(broker: BrokerProcess, version: int) -> None:
    group = f"delete-v{version}"
    send_request(broker, 8, 8, oc.OffsetCommitRequest(group_id=group, topics=[oc.OffsetCommitRequestTopic(
        name=TOPIC, partitions=[oc.OffsetCommitRequestPartition(partition_index=p, committed_offset=1)
                                for p in (0, 1)])]))
    deleted = send_request(broker, 47, 0, od.OffsetDeleteRequest(group_id=group, topics=[od.OffsetDeleteRequestTopic(
        name=TOPIC, partitions=[od.OffsetDeleteRequestPartition(partition_index=0)])]))
    assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
    assert _fetch(broker, 7, group) == {1: (1, "")}
    response = send_request(broker, 42, version, dg.DeleteGroupsRequest(groups_names=[group, "never-existed"]))
    assert [(r.group_id, r.error_code) for r in response.results] == [
        (group, 0), ("never-existed", ErrorCode.GROUP_ID_NOT_FOUND)]
    assert _fetch(broker, 7, group) == {}


def test_offset_delete_versions_are_what_the_handler_serves() -> None:
    assert (offset_delete.MIN_VERSION, offset_delete.MAX_VERSION) == (0, 0)
