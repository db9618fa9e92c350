"""ACLs on the transaction, config and DescribeTopicPartitions APIs over the wire, against a lone broker
with the ACL authorizer: a principal without the ACL gets Kafka's error, one with it is served.

bob never gets an ACL; alice gets topic, group and transactional-id ACLs; carol gets cluster ACLs.
"""

from __future__ import annotations

import pytest

from protocol.acl_types import AclOperation, ResourceType
from protocol.config_types import ConfigResourceType
from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from protocol.messages.alter_configs import AlterableConfig, AlterConfigsRequest, AlterConfigsResource, AlterConfigsResponse
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource, DescribeConfigsResponse
from protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    TopicRequest,
)
from protocol.messages.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.incremental_alter_configs import AlterableConfig as IncrementalConfig
from protocol.messages.incremental_alter_configs import AlterConfigsResource as IncrementalResource
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from pytest_pafka.plugin import BrokerFactory
from tests.broker.acl_helpers import AclBroker, acl_broker_process
from tests.broker.test_acl_api_matrix import CLUSTER, CLUSTER_AUTH, GROUP_AUTH, OK, TOPIC_AUTH, call

T, G, C, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
TXN_AUTH = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def acls(pafka_module_broker_factory: BrokerFactory) -> AclBroker:
    broker, sasl = acl_broker_process(pafka_module_broker_factory, "transaction.state.log.replication.factor=1",
                                      "transaction.state.log.min.isr=1")
    setup = AclBroker(broker, sasl).wait_ready()
    created = call(setup, "admin", CreateTopicsRequest(topics=[
        CreatableTopic(name="ledger", num_partitions=1, replication_factor=1)], timeout_ms=10_000),
        CreateTopicsResponse, 5)
    assert [t.error_code for t in created.topics] == [OK]
    for key_type in (0, 1):  # creates __consumer_offsets and __transaction_state
        found = call(setup, "admin", FindCoordinatorRequest(key_type=key_type, coordinator_keys=["any"]),
                     FindCoordinatorResponse, 4)
        assert [c.error_code for c in found.coordinators] == [OK]
    return setup


def _add_partitions(acls: AclBroker, user: str, producer_id: int, epoch: int) -> list[int]:
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx-a", v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[AddPartitionsToTxnTopic(name="ledger", partitions=[0])])
    response = call(acls, user, request, AddPartitionsToTxnResponse, 3)
    return [p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition]


def _txn_commit(acls: AclBroker, user: str, producer_id: int, epoch: int) -> list[int]:
    request = TxnOffsetCommitRequest(transactional_id="tx-a", group_id="txg", producer_id=producer_id,
                                     producer_epoch=epoch, topics=[TxnOffsetCommitRequestTopic(name="ledger", partitions=[
                                         TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=0)])])
    response = call(acls, user, request, TxnOffsetCommitResponse, 3)
    return [p.error_code for t in response.topics for p in t.partitions]


def test_a_transaction_needs_write_on_its_id_and_topics_and_read_on_its_group(acls: AclBroker) -> None:
    init = InitProducerIdRequest(transactional_id="tx-a", transaction_timeout_ms=60_000)
    assert call(acls, "bob", init, InitProducerIdResponse, 3).error_code == TXN_AUTH
    acls.allow("User:alice", AclOperation.WRITE, TXN, "tx-a")
    started = call(acls, "alice", init, InitProducerIdResponse, 3)
    assert started.error_code == OK and started.producer_id >= 0
    pid, epoch = started.producer_id, started.producer_epoch

    assert _add_partitions(acls, "bob", pid, epoch) == [TXN_AUTH]
    assert _add_partitions(acls, "alice", pid, epoch) == [TOPIC_AUTH]
    acls.allow("User:alice", AclOperation.WRITE, T, "ledger")
    assert _add_partitions(acls, "alice", pid, epoch) == [OK]

    add_offsets = AddOffsetsToTxnRequest(transactional_id="tx-a", producer_id=pid, producer_epoch=epoch,
                                         group_id="txg")
    assert call(acls, "bob", add_offsets, AddOffsetsToTxnResponse, 3).error_code == TXN_AUTH
    assert call(acls, "alice", add_offsets, AddOffsetsToTxnResponse, 3).error_code == GROUP_AUTH
    acls.allow("User:alice", AclOperation.READ, G, "txg")
    assert call(acls, "alice", add_offsets, AddOffsetsToTxnResponse, 3).error_code == OK

    assert _txn_commit(acls, "bob", pid, epoch) == [TXN_AUTH]
    assert _txn_commit(acls, "alice", pid, epoch) == [TOPIC_AUTH]  # WRITE on the topic is not READ
    acls.allow("User:alice", AclOperation.READ, T, "ledger")
    assert _txn_commit(acls, "alice", pid, epoch) == [OK]

    describe = DescribeTransactionsRequest(transactional_ids=["tx-a"])
    [hidden] = call(acls, "bob", describe, DescribeTransactionsResponse, 0).transaction_states
    assert hidden.error_code == TXN_AUTH
    [seen] = call(acls, "alice", describe, DescribeTransactionsResponse, 0).transaction_states
    assert (seen.error_code, seen.transaction_state) == (OK, "Ongoing")
    assert "ledger" in {t.topic for t in seen.topics}
    assert call(acls, "bob", ListTransactionsRequest(), ListTransactionsResponse, 0).transaction_states == []
    listed = call(acls, "alice", ListTransactionsRequest(), ListTransactionsResponse, 0).transaction_states
    assert [t.transactional_id for t in listed] == ["tx-a"]

    end = EndTxnRequest(transactional_id="tx-a", producer_id=pid, producer_epoch=epoch, committed=True)
    assert call(acls, "bob", end, EndTxnResponse, 3).error_code == TXN_AUTH
    assert call(acls, "alice", end, EndTxnResponse, 3).error_code == OK


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(acls: AclBroker) -> None:
    init = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0)
    assert call(acls, "carol", init, InitProducerIdResponse, 3).error_code == CLUSTER_AUTH
    acls.allow("User:alice", AclOperation.WRITE, T, "ledger")
    assert call(acls, "alice", init, InitProducerIdResponse, 3).error_code == OK
    acls.allow("User:carol", AclOperation.IDEMPOTENT_WRITE, C, CLUSTER)
    assert call(acls, "carol", init, InitProducerIdResponse, 3).error_code == OK


def test_the_add_partitions_broker_form_needs_cluster_action(acls: AclBroker) -> None:
    request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        transactional_id="tx-none", producer_id=1, producer_epoch=0, verify_only=True,
        topics=[AddPartitionsToTxnTopic(name="ledger", partitions=[0])])])
    refused = call(acls, "alice", request, AddPartitionsToTxnResponse, 4)
    assert (refused.error_code, refused.results_by_transaction) == (CLUSTER_AUTH, [])
    served = call(acls, "admin", request, AddPartitionsToTxnResponse, 4)
    assert served.error_code == OK and [r.transactional_id for r in served.results_by_transaction] == ["tx-none"]


def _broker_id(acls: AclBroker) -> str:
    return str(call(acls, "admin", DescribeClusterRequest(), DescribeClusterResponse, 0).brokers[0].broker_id)


def test_configs_need_describe_configs_and_alter_configs(acls: AclBroker) -> None:
    topic, node = ConfigResourceType.TOPIC, ConfigResourceType.BROKER
    broker_id = _broker_id(acls)
    describe = DescribeConfigsRequest(resources=[DescribeConfigsResource(resource_type=topic, resource_name="ledger",
                                                                         configuration_keys=None),
                                                 DescribeConfigsResource(resource_type=node, resource_name=broker_id,
                                                                         configuration_keys=None)])
    refused = call(acls, "bob", describe, DescribeConfigsResponse, 4).results
    assert [(r.error_code, r.configs) for r in refused] == [(TOPIC_AUTH, []), (CLUSTER_AUTH, [])]
    acls.allow("User:alice", AclOperation.DESCRIBE_CONFIGS, T, "ledger")
    acls.allow("User:carol", AclOperation.DESCRIBE_CONFIGS, C, CLUSTER)
    [by_alice, _] = call(acls, "alice", describe, DescribeConfigsResponse, 4).results
    assert by_alice.error_code == OK and by_alice.configs
    [_, by_carol] = call(acls, "carol", describe, DescribeConfigsResponse, 4).results
    assert by_carol.error_code == OK and by_carol.configs

    alter = AlterConfigsRequest(validate_only=True, resources=[
        AlterConfigsResource(resource_type=topic, resource_name="ledger",
                             configs=[AlterableConfig(name="retention.ms", value="60000")])])
    assert [r.error_code for r in call(acls, "bob", alter, AlterConfigsResponse, 1).responses] == [TOPIC_AUTH]
    acls.allow("User:alice", AclOperation.ALTER_CONFIGS, T, "ledger")
    assert [r.error_code for r in call(acls, "alice", alter, AlterConfigsResponse, 1).responses] == [OK]

    incremental = IncrementalAlterConfigsRequest(validate_only=True, resources=[
        IncrementalResource(resource_type=topic, resource_name="ledger",
                            configs=[IncrementalConfig(name="retention.ms", config_operation=0, value="60000")]),
        IncrementalResource(resource_type=node, resource_name=broker_id,
                            configs=[IncrementalConfig(name="log.cleaner.threads", config_operation=0, value="1")])])
    assert [r.error_code for r in call(acls, "bob", incremental, IncrementalAlterConfigsResponse, 1).responses] == [
        TOPIC_AUTH, CLUSTER_AUTH]
    assert [r.error_code for r in call(acls, "alice", incremental, IncrementalAlterConfigsResponse, 1).responses] == [
        OK, CLUSTER_AUTH]
    acls.allow("User:carol", AclOperation.ALTER_CONFIGS, C, CLUSTER)
    assert [r.error_code for r in call(acls, "carol", incremental, IncrementalAlterConfigsResponse,
                                       1).responses] == [TOPIC_AUTH, OK]


def test_describe_topic_partitions_needs_describe_and_reports_operations(acls: AclBroker) -> None:
    everything = DescribeTopicPartitionsRequest(topics=[])
    assert call(acls, "bob", everything, DescribeTopicPartitionsResponse, 0).topics == []
    named = DescribeTopicPartitionsRequest(topics=[TopicRequest(name="ledger")])
    [refused] = call(acls, "bob", named, DescribeTopicPartitionsResponse, 0).topics
    assert (refused.error_code, refused.partitions) == (TOPIC_AUTH, [])
    acls.allow("User:carol", AclOperation.DESCRIBE, T, "ledger")
    [seen] = call(acls, "carol", everything, DescribeTopicPartitionsResponse, 0).topics
    assert (seen.name, seen.error_code, len(seen.partitions)) == ("ledger", OK, 1)
    assert seen.topic_authorized_operations == 1 << AclOperation.DESCRIBE
