"""ACLs on every API a lone broker serves, over the wire: a principal without the ACL gets Kafka's
authorization error at the level Kafka puts it, and one with the ACL is served.

bob never gets an ACL; alice gets topic and group ACLs; carol gets cluster ACLs; admin is a super user.
"""

from __future__ import annotations

import hashlib
from typing import TypeVar

import pytest

from protocol.acl_types import AclOperation, PatternType, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasRequestEntryData,
    AlterClientQuotasResponse,
    OpData,
)
from protocol.messages.alter_client_quotas import EntityData as QuotaEntityData
from protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopic,
)
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ScramCredentialUpsertion,
)
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
)
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopic,
)
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse, DeleteTopicState
from protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse, TopicRequest
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic, OffsetFetchResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from protocol.primitives import Message
from pytest_pafka.plugin import BrokerFactory
from tests.broker.acl_helpers import AclBroker, acl_broker_process

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
CLUSTER = "kafka-cluster"
R = TypeVar("R", bound=Message)

GROUP_AUTH = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_AUTH = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CLUSTER_AUTH = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
OK = ErrorCode.NO_ERROR


@pytest.fixture(scope="module")
def acls(pafka_module_broker_factory: BrokerFactory) -> AclBroker:
    broker, sasl = acl_broker_process(pafka_module_broker_factory, "group.initial.rebalance.delay.ms=0")
    setup = AclBroker(broker, sasl).wait_ready()
    topics = [CreatableTopic(name=t, num_partitions=1, replication_factor=1)
              for t in ("orders", "doomed", "growing", "trimmed")]
    created = call(setup, "admin", CreateTopicsRequest(topics=topics, timeout_ms=10_000), CreateTopicsResponse, 5)
    assert [t.error_code for t in created.topics] == [OK] * 4
    found = call(setup, "admin", FindCoordinatorRequest(key_type=0, coordinator_keys=["any"]),
                 FindCoordinatorResponse, 4)  # creates __consumer_offsets
    assert [c.error_code for c in found.coordinators] == [OK]
    return setup


def call(acls: AclBroker, user: str | None, request: Message, kind: type[R], version: int) -> R:
    with acls.connect(user) as client:
        response = client.request(request, version=version)
    assert isinstance(response, kind), response
    return response


def test_find_coordinator_needs_describe_on_the_group_or_transactional_id(acls: AclBroker) -> None:
    acls.allow("User:alice", AclOperation.DESCRIBE, G, "seen")
    acls.allow("User:alice", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "tx-seen")
    groups = call(acls, "alice", FindCoordinatorRequest(key_type=0, coordinator_keys=["seen", "hidden"]),
                  FindCoordinatorResponse, 4)
    assert [(c.key, c.error_code) for c in groups.coordinators] == [("seen", OK), ("hidden", GROUP_AUTH)]
    legacy = call(acls, "bob", FindCoordinatorRequest(key="seen"), FindCoordinatorResponse, 0)
    assert legacy.error_code == GROUP_AUTH
    txns = call(acls, "alice", FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-seen", "tx-hidden"]),
                FindCoordinatorResponse, 4)
    assert [(c.key, c.error_code) for c in txns.coordinators] == [
        ("tx-seen", OK), ("tx-hidden", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]


def _join(acls: AclBroker, user: str, group: str) -> JoinGroupResponse:
    return call(acls, user, JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
        protocol_type="consumer", protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")]),
        JoinGroupResponse, 3)


def test_group_membership_needs_read_on_the_group(acls: AclBroker) -> None:
    assert _join(acls, "bob", "members").error_code == GROUP_AUTH
    sync = SyncGroupRequest(group_id="members", generation_id=1, member_id="m", assignments=[])
    assert call(acls, "bob", sync, SyncGroupResponse, 3).error_code == GROUP_AUTH
    beat = HeartbeatRequest(group_id="members", generation_id=1, member_id="m")
    assert call(acls, "bob", beat, HeartbeatResponse, 3).error_code == GROUP_AUTH
    assert call(acls, "bob", LeaveGroupRequest(group_id="members", member_id="m"), LeaveGroupResponse,
                2).error_code == GROUP_AUTH

    acls.allow("User:alice", AclOperation.READ, G, "members")
    joined = _join(acls, "alice", "members")
    assert joined.error_code == OK and joined.leader == joined.member_id
    member, generation = joined.member_id, joined.generation_id
    synced = call(acls, "alice", SyncGroupRequest(group_id="members", generation_id=generation, member_id=member,
                                                  assignments=[]), SyncGroupResponse, 3)
    assert synced.error_code == OK
    assert call(acls, "alice", HeartbeatRequest(group_id="members", generation_id=generation, member_id=member),
                HeartbeatResponse, 3).error_code == OK
    assert call(acls, "bob", HeartbeatRequest(group_id="members", generation_id=generation, member_id=member),
                HeartbeatResponse, 3).error_code == GROUP_AUTH  # the member's id is not a credential
    assert call(acls, "alice", LeaveGroupRequest(group_id="members", member_id=member), LeaveGroupResponse,
                2).error_code == OK


def _commit(acls: AclBroker, user: str, group: str) -> list[int]:
    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequestTopic(name="orders", partitions=[
            OffsetCommitRequestPartition(partition_index=0, committed_offset=0, committed_metadata="m")])])
    response = call(acls, user, request, OffsetCommitResponse, 8)
    return [p.error_code for t in response.topics for p in t.partitions]


def test_offset_commit_fetch_and_delete(acls: AclBroker) -> None:
    assert _commit(acls, "bob", "committers") == [GROUP_AUTH]
    acls.allow("User:alice", AclOperation.READ, G, "committers")
    assert _commit(acls, "alice", "committers") == [TOPIC_AUTH]
    acls.allow("User:alice", AclOperation.READ, T, "orders")
    assert _commit(acls, "alice", "committers") == [OK]

    fetch = OffsetFetchRequest(group_id="committers", topics=[OffsetFetchRequestTopic(name="orders",
                                                                                      partition_indexes=[0])])
    denied = call(acls, "bob", fetch, OffsetFetchResponse, 5)
    assert denied.error_code == GROUP_AUTH and denied.topics == []
    legacy = call(acls, "bob", fetch, OffsetFetchResponse, 1)  # no top-level error before v2
    assert [p.error_code for t in legacy.topics for p in t.partitions] == [GROUP_AUTH]
    fetched = call(acls, "alice", fetch, OffsetFetchResponse, 5)
    assert fetched.error_code == OK
    assert [(p.error_code, p.committed_offset) for t in fetched.topics for p in t.partitions] == [(OK, 0)]
    all_topics = call(acls, "alice", OffsetFetchRequest(group_id="committers", topics=None), OffsetFetchResponse, 5)
    assert [t.name for t in all_topics.topics] == ["orders"]

    remove = OffsetDeleteRequest(group_id="committers", topics=[
        OffsetDeleteRequestTopic(name="orders", partitions=[OffsetDeleteRequestPartition(partition_index=0)])])
    assert call(acls, "bob", remove, OffsetDeleteResponse, 0).error_code == GROUP_AUTH
    removed = call(acls, "alice", remove, OffsetDeleteResponse, 0)
    assert removed.error_code == OK and [p.error_code for t in removed.topics for p in t.partitions] == [OK]


def test_describe_list_and_delete_groups(acls: AclBroker) -> None:
    acls.allow("User:alice", AclOperation.READ, G, "listed")
    assert _commit(acls, "admin", "listed") == [OK]
    describe = DescribeGroupsRequest(groups=["listed"], include_authorized_operations=True)
    [denied] = call(acls, "bob", describe, DescribeGroupsResponse, 5).groups
    assert denied.error_code == GROUP_AUTH
    [described] = call(acls, "alice", describe, DescribeGroupsResponse, 5).groups
    assert described.error_code == OK and described.group_state == "Empty"
    assert described.authorized_operations == (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)

    def listed(user: str) -> set[str]:
        response = call(acls, user, ListGroupsRequest(), ListGroupsResponse, 3)
        assert response.error_code == OK
        return {g.group_id for g in response.groups}

    assert "listed" not in listed("bob")
    assert "listed" in listed("alice")
    assert "members" not in listed("carol")
    acls.allow("User:carol", AclOperation.DESCRIBE, C, CLUSTER)
    assert {"listed", "members"} <= listed("carol")  # DESCRIBE on the cluster lists every group

    delete = DeleteGroupsRequest(groups_names=["listed"])
    assert [r.error_code for r in call(acls, "alice", delete, DeleteGroupsResponse, 2).results] == [GROUP_AUTH]
    acls.allow("User:alice", AclOperation.DELETE, G, "listed")
    assert [r.error_code for r in call(acls, "alice", delete, DeleteGroupsResponse, 2).results] == [OK]


def test_list_offsets_needs_describe(acls: AclBroker) -> None:
    request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name="orders", partitions=[
        ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    for version in (0, 1, 7):
        denied = call(acls, "bob", request, ListOffsetsResponse, version)
        assert [p.error_code for t in denied.topics for p in t.partitions] == [TOPIC_AUTH]
    acls.allow("User:carol", AclOperation.DESCRIBE, T, "orders")
    served = call(acls, "carol", request, ListOffsetsResponse, 7)
    assert [(p.error_code, p.offset) for t in served.topics for p in t.partitions] == [(OK, 0)]


def test_offset_for_leader_epoch_needs_describe_or_cluster_action(acls: AclBroker) -> None:
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderTopic(topic="orders", partitions=[
        OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])])
    denied = call(acls, "bob", request, OffsetForLeaderEpochResponse, 4)
    assert [(p.error_code, p.end_offset) for t in denied.topics for p in t.partitions] == [(TOPIC_AUTH, -1)]
    acls.allow("User:carol", AclOperation.DESCRIBE, T, "orders")
    served = call(acls, "carol", request, OffsetForLeaderEpochResponse, 4)
    assert [p.error_code for t in served.topics for p in t.partitions] == [OK]
    acls.allow("User:alice", AclOperation.CLUSTER_ACTION, C, CLUSTER)  # a follower's permission
    served = call(acls, "alice", request, OffsetForLeaderEpochResponse, 4)
    assert [p.error_code for t in served.topics for p in t.partitions] == [OK]


def test_create_topics_needs_create_and_describe_configs_for_configs(acls: AclBroker) -> None:
    def create(user: str, name: str) -> CreateTopicsResponse:
        request = CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=2, replication_factor=1)],
                                      timeout_ms=10_000)
        return call(acls, user, request, CreateTopicsResponse, 5)

    [denied] = create("bob", "made-1").topics
    assert (denied.error_code, denied.topic_config_error_code) == (TOPIC_AUTH, TOPIC_AUTH)
    acls.allow("User:alice", AclOperation.CREATE, T, "made-", PatternType.PREFIXED)
    [blind] = create("alice", "made-1").topics
    assert (blind.error_code, blind.topic_config_error_code, blind.num_partitions) == (OK, TOPIC_AUTH, -1)
    assert blind.configs == []
    acls.allow("User:alice", AclOperation.DESCRIBE_CONFIGS, T, "made-", PatternType.PREFIXED)
    [seen] = create("alice", "made-2").topics
    assert (seen.error_code, seen.topic_config_error_code, seen.num_partitions) == (OK, OK, 2)
    assert seen.configs
    [by_cluster] = create("carol", "elsewhere").topics
    assert by_cluster.error_code == TOPIC_AUTH
    acls.allow("User:carol", AclOperation.CREATE, C, CLUSTER)
    [by_cluster] = create("carol", "elsewhere").topics
    assert by_cluster.error_code == OK


def test_delete_topics_needs_delete(acls: AclBroker) -> None:
    request = DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=10_000)
    [denied] = call(acls, "bob", request, DeleteTopicsResponse, 4).responses
    assert (denied.name, denied.error_code) == ("doomed", TOPIC_AUTH)
    acls.allow("User:alice", AclOperation.DELETE, T, "doomed")
    [deleted] = call(acls, "alice", request, DeleteTopicsResponse, 4).responses
    assert deleted.error_code == OK


def test_delete_topics_by_id_shows_the_name_only_with_describe(acls: AclBroker) -> None:
    made = call(acls, "admin", CreateTopicsRequest(topics=[CreatableTopic(name="by-id", num_partitions=1,
                                                                          replication_factor=1)], timeout_ms=10_000),
                CreateTopicsResponse, 7)
    [created] = made.topics
    request = DeleteTopicsRequest(topics=[DeleteTopicState(name=None, topic_id=created.topic_id)], timeout_ms=10_000)
    [hidden] = call(acls, "bob", request, DeleteTopicsResponse, 6).responses
    assert (hidden.name, hidden.topic_id, hidden.error_code) == (None, created.topic_id, TOPIC_AUTH)
    acls.allow("User:alice", AclOperation.DESCRIBE, T, "by-id")
    [named] = call(acls, "alice", request, DeleteTopicsResponse, 6).responses
    assert (named.name, named.error_code) == ("by-id", TOPIC_AUTH)
    acls.allow("User:alice", AclOperation.DELETE, T, "by-id")
    [deleted] = call(acls, "alice", request, DeleteTopicsResponse, 6).responses
    assert (deleted.name, deleted.error_code) == ("by-id", OK)


def test_create_partitions_needs_alter(acls: AclBroker) -> None:
    request = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="growing", count=3, assignments=None)],
                                      timeout_ms=10_000)
    assert [r.error_code for r in call(acls, "bob", request, CreatePartitionsResponse, 1).results] == [TOPIC_AUTH]
    acls.allow("User:alice", AclOperation.ALTER, T, "growing")
    assert [r.error_code for r in call(acls, "alice", request, CreatePartitionsResponse, 1).results] == [OK]


def test_delete_records_needs_delete(acls: AclBroker) -> None:
    request = DeleteRecordsRequest(topics=[DeleteRecordsTopic(name="trimmed", partitions=[
        DeleteRecordsPartition(partition_index=0, offset=-1)])], timeout_ms=5_000)
    denied = call(acls, "bob", request, DeleteRecordsResponse, 1)
    assert [(p.error_code, p.low_watermark) for t in denied.topics for p in t.partitions] == [(TOPIC_AUTH, -1)]
    acls.allow("User:alice", AclOperation.DELETE, T, "trimmed")
    served = call(acls, "alice", request, DeleteRecordsResponse, 1)
    assert [(p.error_code, p.low_watermark) for t in served.topics for p in t.partitions] == [(OK, 0)]


def test_describe_producers_needs_read(acls: AclBroker) -> None:
    request = DescribeProducersRequest(topics=[TopicRequest(name="trimmed", partition_indexes=[0])])
    denied = call(acls, "bob", request, DescribeProducersResponse, 0)
    assert [p.error_code for t in denied.topics for p in t.partitions] == [TOPIC_AUTH]
    acls.allow("User:alice", AclOperation.READ, T, "trimmed")
    served = call(acls, "alice", request, DescribeProducersResponse, 0)
    assert [p.error_code for t in served.topics for p in t.partitions] == [OK]


def test_alter_replica_log_dirs_needs_alter_on_the_cluster(acls: AclBroker) -> None:
    request = AlterReplicaLogDirsRequest(dirs=[AlterReplicaLogDir(path="/nowhere", topics=[
        AlterReplicaLogDirTopic(name="trimmed", partitions=[0])])])
    denied = call(acls, "bob", request, AlterReplicaLogDirsResponse, 2)
    assert [(r.topic_name, p.error_code) for r in denied.results for p in r.partitions] == [("trimmed", CLUSTER_AUTH)]
    served = call(acls, "admin", request, AlterReplicaLogDirsResponse, 2)
    assert [p.error_code for r in served.results for p in r.partitions] == [ErrorCode.LOG_DIR_NOT_FOUND]


def test_cluster_apis(acls: AclBroker) -> None:
    """DescribeLogDirs and DescribeUserScramCredentials need DESCRIBE on the cluster,
    AlterUserScramCredentials ALTER; DescribeCluster reports what the client may do."""
    denied_dirs = call(acls, "bob", DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, 4)
    assert (denied_dirs.error_code, denied_dirs.results) == (CLUSTER_AUTH, [])
    assert call(acls, "bob", DescribeUserScramCredentialsRequest(users=None), DescribeUserScramCredentialsResponse,
                0).error_code == CLUSTER_AUTH
    described = call(acls, "bob", DescribeClusterRequest(include_cluster_authorized_operations=True),
                     DescribeClusterResponse, 1)
    assert described.error_code == OK and described.cluster_authorized_operations == 0
    acls.allow("User:ANONYMOUS", AclOperation.IDEMPOTENT_WRITE, C, CLUSTER)
    described = call(acls, None, DescribeClusterRequest(include_cluster_authorized_operations=True),
                     DescribeClusterResponse, 1)
    assert described.cluster_authorized_operations == 0  # as Kafka: nothing without DESCRIBE on the cluster

    acls.allow("User:carol", AclOperation.DESCRIBE, C, CLUSTER)
    dirs = call(acls, "carol", DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, 4)
    assert dirs.error_code == OK and dirs.results
    assert call(acls, "carol", DescribeUserScramCredentialsRequest(users=None), DescribeUserScramCredentialsResponse,
                0).error_code == OK
    described = call(acls, "carol", DescribeClusterRequest(include_cluster_authorized_operations=True),
                     DescribeClusterResponse, 1)
    assert described.cluster_authorized_operations & (1 << AclOperation.DESCRIBE)
    assert described.cluster_authorized_operations & (1 << AclOperation.CREATE)  # granted in an earlier test
    assert not described.cluster_authorized_operations & (1 << AclOperation.ALTER)

    salt = b"salt-salt-salt"
    upsert = ScramCredentialUpsertion(name="dave", mechanism=1, iterations=4096, salt=salt,
                                      salted_password=hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096))
    alter = AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsert])
    assert [r.error_code for r in call(acls, "carol", alter, AlterUserScramCredentialsResponse, 0).results] == [
        CLUSTER_AUTH]
    acls.allow("User:carol", AclOperation.ALTER, C, CLUSTER)
    assert [r.error_code for r in call(acls, "carol", alter, AlterUserScramCredentialsResponse, 0).results] == [OK]


def test_client_quotas_need_describe_configs_and_alter_configs_on_the_cluster(acls: AclBroker) -> None:
    alter = AlterClientQuotasRequest(entries=[AlterClientQuotasRequestEntryData(
        entity=[QuotaEntityData(entity_type="client-id", entity_name="app")],
        ops=[OpData(key="producer_byte_rate", value=1024.0, remove=False)])], validate_only=False)
    assert [e.error_code for e in call(acls, "erin", alter, AlterClientQuotasResponse, 1).entries] == [CLUSTER_AUTH]
    assert call(acls, "erin", DescribeClientQuotasRequest(components=[]), DescribeClientQuotasResponse,
                1).error_code == CLUSTER_AUTH
    acls.allow("User:erin", AclOperation.DESCRIBE_CONFIGS, C, CLUSTER)
    described = call(acls, "erin", DescribeClientQuotasRequest(components=[]), DescribeClientQuotasResponse, 0)
    assert (described.error_code, described.entries) == (OK, [])
    assert [e.error_code for e in call(acls, "erin", alter, AlterClientQuotasResponse, 1).entries] == [CLUSTER_AUTH]
    acls.allow("User:erin", AclOperation.ALTER_CONFIGS, C, CLUSTER)
    assert [e.error_code for e in call(acls, "erin", alter, AlterClientQuotasResponse, 0).entries] == [OK]
    described = call(acls, "erin", DescribeClientQuotasRequest(components=[]), DescribeClientQuotasResponse, 1)
    assert described.entries is not None
    assert [(e.entity[0].entity_name, e.values[0].value) for e in described.entries] == [("app", 1024.0)]


def test_write_txn_markers_needs_cluster_action(acls: AclBroker) -> None:
    request = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=4242, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[WritableTxnMarkerTopic(name="orders", partition_indexes=[0])])])
    denied = call(acls, "carol", request, WriteTxnMarkersResponse, 1)
    assert [p.error_code for m in denied.markers for t in m.topics for p in t.partitions] == [CLUSTER_AUTH]
    served = call(acls, "admin", request, WriteTxnMarkersResponse, 1)  # a broker's principal: a super user
    assert [p.error_code for m in served.markers for p in m.topics[0].partitions] != [CLUSTER_AUTH]
