"""A 2-broker cluster with the ACL authorizer, set up as Kafka's docs recommend: the brokers reach each
other over SASL_PLAINTEXT as the SCRAM user ``broker``, listed in ``super.users`` so it holds
CLUSTER_ACTION (LeaderAndIsr, UpdateMetadata, follower fetches, AlterPartition all pass the
authorizer). An ACL created through broker 1 is written to ZooKeeper with a change notification and
takes effect on broker 2 within a second; an RF-2 topic still replicates with ``min.insync.replicas=2``,
and a transaction over partitions led by both brokers commits (markers written across brokers).
"""

from __future__ import annotations

import json
import time

from client.connection import BrokerConnection
from client.sasl import SaslSettings
from client.scram import ScramCredential, ScramMechanism
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import AlterPartitionRequest
from protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.create_acls import AclCreation, CreateAclsRequest, CreateAclsResponse
from protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from protocol.messages.elect_leaders import ElectLeadersRequest
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.primitives import Message
from pytest_pafka.cluster import Cluster
from tests.cluster.helpers import assert_replicates_two_ways, create_topic, registered_endpoint, unique

RECORDS = 500
USERS = {"broker": "broker-secret", "admin": "admin-secret", "bob": "bob-secret"}
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
        'password="broker-secret";')


def _connect(cluster: Cluster, broker_id: int, user: str) -> BrokerConnection:
    return BrokerConnection(*registered_endpoint(cluster, broker_id),
                            sasl=SaslSettings("SCRAM-SHA-256", user, USERS[user]), timeout=10)


def _allow(cluster: Cluster, principal: str, operation: AclOperation, resource_type: ResourceType, name: str,
           pattern: PatternType = PatternType.LITERAL, everywhere: bool = True) -> None:
    """Creates the ACL through broker 1; with ``everywhere``, returns once every broker enforces it
    (broker 2 learns it from the change notification, a few ms later: a client sent there at once,
    e.g. CreateTopics to a controller on broker 2, could still be refused)."""
    creation = AclCreation(resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
                           principal=principal, host="*", operation=operation,
                           permission_type=AclPermissionType.ALLOW)
    with _connect(cluster, 1, "admin") as admin:
        response = admin.request(CreateAclsRequest(creations=[creation]))
    assert isinstance(response, CreateAclsResponse) and [r.error_code for r in response.results] == [0], response
    if everywhere:
        wanted = DescribeAclsRequest(resource_type_filter=resource_type, resource_name_filter=name,
                                     pattern_type_filter=pattern, principal_filter=principal, host_filter="*",
                                     operation=operation, permission_type=AclPermissionType.ALLOW)
        cluster.wait_for(lambda: all(_described(cluster, b, wanted) for b in cluster.broker_ids), 10.0,
                         f"every broker to enforce {principal} {operation.name} on {name}")


def _described(cluster: Cluster, broker_id: int, wanted: DescribeAclsRequest) -> bool:
    """Whether the broker's authorizer (DescribeAcls answers from it) holds a binding the filter matches."""
    with _connect(cluster, broker_id, "admin") as admin:
        response = admin.request(wanted)
    assert isinstance(response, DescribeAclsResponse) and response.error_code == 0, response
    return bool(response.resources)


def _topic_error(cluster: Cluster, broker_id: int, user: str, topic: str) -> int:
    with _connect(cluster, broker_id, user) as client:
        response = client.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                  allow_auto_topic_creation=False), version=9)
    assert isinstance(response, MetadataResponse)
    return response.topics[0].error_code


def _transactions_commit_across_brokers(cluster: Cluster) -> None:
    """A transaction over partitions led by both brokers: the coordinator's WriteTxnMarkers (and the
    leaders' AddPartitionsToTxn verification) travel as the broker principal and pass; only the
    committed records are read back."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic = unique("acl-txn")
    create_topic(cluster, topic, partitions=2, replication_factor=2, assignment=[[1, 2], [2, 1]])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": unique("acl-tx"),
                         "acks": "all"})
    producer.init_transactions(30)
    for commit in (True, False):
        producer.begin_transaction()
        for i in range(20):
            producer.produce(topic, f"{commit}-{i}".encode(), partition=i % 2)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("acl-readers"),
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got.extend(m.value() for m in consumer.consume(100, timeout=0.5) if not m.error())
        got.extend(m.value() for m in consumer.consume(100, timeout=1.0) if not m.error())  # nothing more
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"True-{i}".encode() for i in range(20))


def test_acls_reach_every_broker_and_brokers_keep_replicating() -> None:
    with Cluster(2, "inter.broker.listener.name=SASL_PLAINTEXT", "min.insync.replicas=2",
                 "sasl.enabled.mechanisms=SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
                 f"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={JAAS}",
                 "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                 "super.users=User:broker;User:admin", start_brokers=False) as cluster:
        for user, password in USERS.items():
            credential = ScramCredential.generate(ScramMechanism.SCRAM_SHA_256, password, 4096)
            config = {"version": 1, "config": {"SCRAM-SHA-256": credential.to_config_string()}}
            cluster.kazoo.create(f"/config/users/{user}", json.dumps(config).encode(), makepath=True)
        for broker in cluster.brokers.values():
            broker.overrides.append(f"listeners=PLAINTEXT://{broker.host}:{broker.port},"
                                    f"SASL_PLAINTEXT://{broker.host}:0")
        cluster.start_all(cluster.broker_ids)

        # The PLAINTEXT clients of the replication check are User:ANONYMOUS: they get what they need.
        _allow(cluster, "User:ANONYMOUS", AclOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster")
        _allow(cluster, "User:ANONYMOUS", AclOperation.ALL, ResourceType.TOPIC, "acl-", PatternType.PREFIXED)
        _allow(cluster, "User:ANONYMOUS", AclOperation.READ, ResourceType.GROUP, "*")
        assert_replicates_two_ways(cluster, "acl-replicated", RECORDS)
        _allow(cluster, "User:ANONYMOUS", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "acl-",
               PatternType.PREFIXED)
        _transactions_commit_across_brokers(cluster)

        topic = unique("acl-guarded")  # ANONYMOUS (the helpers' client) may see it; bob may not
        create_topic(cluster, topic, partitions=1, replication_factor=2)
        assert _topic_error(cluster, 2, "bob", topic) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        _allow(cluster, "User:bob", AclOperation.DESCRIBE, ResourceType.TOPIC, topic, everywhere=False)
        created = time.monotonic()
        while _topic_error(cluster, 2, "bob", topic) != ErrorCode.NO_ERROR:
            assert time.monotonic() - created < 1.0, "broker 2 did not apply broker 1's ACL within a second"
            time.sleep(0.02)
        notes = cluster.kazoo.get_children("/kafka-acl-changes")
        assert notes, "no ACL change notification in ZooKeeper"

        # Controller-to-broker and broker-to-controller requests need CLUSTER_ACTION, reassignments and
        # elections ALTER (DESCRIBE to list them) on the cluster: a client's are refused, a super user's served.
        controller = cluster.controller_id()
        assert controller is not None
        refused_everywhere: list[tuple[Message, int]] = [
            (UpdateMetadataRequest(controller_id=1, controller_epoch=1, broker_epoch=-1), 7),
            (LeaderAndIsrRequest(controller_id=1, controller_epoch=1, broker_epoch=-1), 7),
            (StopReplicaRequest(controller_id=1, controller_epoch=1, broker_epoch=-1), 3),
            (ControlledShutdownRequest(broker_id=2, broker_epoch=-1), 3),
            (AlterPartitionRequest(broker_id=2, broker_epoch=-1, topics=[]), 3),
            (ListPartitionReassignmentsRequest(topics=None), 0),
            (AlterPartitionReassignmentsRequest(topics=[]), 0),
            (ElectLeadersRequest(election_type=0, topic_partitions=None), 2),
        ]
        with _connect(cluster, controller, "bob") as bob:
            for request, version in refused_everywhere:
                response = bob.request(request, version=version)
                assert getattr(response, "error_code", None) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, response
        with _connect(cluster, controller, "admin") as admin:
            for request, version in refused_everywhere[-3:]:
                response = admin.request(request, version=version)
                assert getattr(response, "error_code", None) == ErrorCode.NO_ERROR, response
        logs = cluster.log_tails()
        assert "Traceback" not in logs and "CLUSTER_AUTHORIZATION_FAILED" not in logs, logs
