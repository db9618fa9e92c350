"""Every advertised version of the admin APIs answers correctly on the wire.

Clients pick one version each; these requests go out at every version the
broker advertises, so none is advertised untested.
"""

from __future__ import annotations

import uuid

import pytest
from kafka.admin import KafkaAdminClient

from protocol.errors import ErrorCode
from protocol.messages import alter_configs as ac
from protocol.messages import create_partitions as cp
from protocol.messages import delete_records as dr
from protocol.messages import delete_topics as dt
from protocol.messages import describe_configs as dc
from protocol.messages import describe_log_dirs as dl
from protocol.messages import incremental_alter_configs as iac
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest, TopicRequest
from testing.sockets import send_request

ADMIN_APIS = {19: (0, 7), 20: (0, 6), 21: (0, 2), 32: (0, 4), 33: (0, 2), 35: (0, 5), 37: (0, 3), 44: (0, 1), 60: (0, 2),
              75: (0, 0)}


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        yield client
    finally:
        client.close()


def test_api_versions_advertises_the_admin_ranges(broker):
    response = send_request(broker, 18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: advertised.get(key) for key in ADMIN_APIS} == ADMIN_APIS


@pytest.mark.parametrize("version", range(8))
def test_create_topics_versions(broker, admin, version):
    from protocol.messages import create_topics as ct

    name = f"ver-create-{version}"
    request = ct.CreateTopicsRequest(topics=[
        ct.CreatableTopic(name=name, num_partitions=2, replication_factor=1),
        ct.CreatableTopic(name=f"{name}-bad", num_partitions=1, replication_factor=7)], timeout_ms=5000)
    if version >= 1:  # v0 has no validate_only: it always creates
        request.validate_only = True
        checked = send_request(broker, 19, version, request).topics
        assert [(t.name, t.error_code) for t in checked] == [(name, 0), (f"{name}-bad", ErrorCode.INVALID_REPLICATION_FACTOR)]
        assert checked[1].error_message  # messages from v1
        assert name not in admin.list_topics()
        request.validate_only = False
    created = send_request(broker, 19, version, request).topics
    assert [(t.name, t.error_code) for t in created] == [(name, 0), (f"{name}-bad", ErrorCode.INVALID_REPLICATION_FACTOR)]
    if version == 0:
        assert created[1].error_message == ""  # v0 carries none (the decoder's default)
    if version >= 5:
        assert (created[0].num_partitions, created[0].replication_factor) == (2, 1)
    assert name in admin.list_topics()
    again = send_request(broker, 19, version, request).topics
    assert again[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("version", range(7))
def test_delete_topics_versions(broker, admin, version):
    name = f"ver-del-{version}"
    admin.create_topics({name: {"num_partitions": 1}})
    if version >= 6:
        request = dt.DeleteTopicsRequest(topics=[dt.DeleteTopicState(name=name, topic_id=uuid.UUID(int=0))],
                                         timeout_ms=5000)
    else:
        request = dt.DeleteTopicsRequest(topic_names=[name, "ver-missing"], timeout_ms=5000)
    results = send_request(broker, 20, version, request).responses
    assert (results[0].name, results[0].error_code) == (name, ErrorCode.NO_ERROR)
    if version < 6:
        assert results[1].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert name not in admin.list_topics()


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_versions(broker, admin, version):
    name = f"ver-cp-{version}"
    admin.create_topics({name: {"num_partitions": 1}})
    request = cp.CreatePartitionsRequest(topics=[cp.CreatePartitionsTopic(name=name, count=2, assignments=None),
                                                 cp.CreatePartitionsTopic(name=name + "x", count=2, assignments=None)],
                                         timeout_ms=5000, validate_only=False)
    results = send_request(broker, 37, version, request).results
    assert [(r.name, r.error_code) for r in results] == [(name, 0), (name + "x", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert len(admin.describe_topics([name])[0]["partitions"]) == 2


@pytest.mark.parametrize("version", range(5))
def test_describe_configs_versions(broker, admin, version):
    name = f"ver-dc-{version}"
    admin.create_topics({name: {"num_partitions": 1, "configs": {"retention.ms": "777"}}})
    request = dc.DescribeConfigsRequest(resources=[
        dc.DescribeConfigsResource(resource_type=2, resource_name=name, configuration_keys=["retention.ms"]),
        dc.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=["num.partitions"]),
    ], include_synonyms=version >= 1, include_documentation=version >= 3)
    topic, broker_result = send_request(broker, 32, version, request).results
    (entry,) = topic.configs
    (partitions,) = broker_result.configs
    assert (partitions.name, partitions.value, partitions.read_only) == ("num.partitions", "1", True)
    if version == 0:
        # v0 carries IsDefault instead of the source, and no synonyms (Kafka 3.9).
        assert (entry.name, entry.value, entry.is_default, entry.synonyms) == ("retention.ms", "777", False, [])
        assert partitions.is_default is True
        return
    assert (entry.name, entry.value, entry.config_source) == ("retention.ms", "777", 1)
    assert [(s.name, s.source) for s in entry.synonyms] == [("retention.ms", 1), ("log.retention.hours", 5)]
    if version >= 3:
        assert entry.config_type == 5 and entry.documentation  # LONG


@pytest.mark.parametrize("version", range(3))
def test_alter_configs_versions(broker, admin, version):
    name = f"ver-ac-{version}"
    admin.create_topics({name: {"num_partitions": 1}})
    request = ac.AlterConfigsRequest(resources=[
        ac.AlterConfigsResource(resource_type=2, resource_name=name,
                                configs=[ac.AlterableConfig(name="retention.ms", value="888")]),
        ac.AlterConfigsResource(resource_type=2, resource_name="ver-missing",
                                configs=[ac.AlterableConfig(name="retention.ms", value="888")]),
    ], validate_only=False)
    responses = send_request(broker, 33, version, request).responses
    assert [r.error_code for r in responses] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    configs = admin.describe_configs([_resource(name)])["topic"][name]
    assert configs["retention.ms"]["value"] == "888"


@pytest.mark.parametrize("version", range(2))
def test_incremental_alter_configs_versions(broker, admin, version):
    name = f"ver-iac-{version}"
    admin.create_topics({name: {"num_partitions": 1}})
    request = iac.IncrementalAlterConfigsRequest(resources=[
        iac.AlterConfigsResource(resource_type=2, resource_name=name, configs=[
            iac.AlterableConfig(name="cleanup.policy", config_operation=2, value="compact")]),
        iac.AlterConfigsResource(resource_type=2, resource_name=name, configs=[]),
    ], validate_only=False)
    responses = send_request(broker, 44, version, request).responses
    # The same resource twice is refused (both entries), as Kafka does.
    assert [r.error_code for r in responses] == [ErrorCode.INVALID_REQUEST] * 2
    request.resources.pop()
    responses = send_request(broker, 44, version, request).responses
    assert [r.error_code for r in responses] == [0]
    configs = admin.describe_configs([_resource(name)])["topic"][name]
    assert configs["cleanup.policy"]["value"] == "delete,compact"


@pytest.mark.parametrize("version", range(3))
def test_delete_records_versions(broker, admin, version):
    name = f"ver-dr-{version}"
    admin.create_topics({name: {"num_partitions": 1}})
    request = dr.DeleteRecordsRequest(topics=[dr.DeleteRecordsTopic(name=name, partitions=[
        dr.DeleteRecordsPartition(partition_index=0, offset=-1),
        dr.DeleteRecordsPartition(partition_index=1, offset=0)])], timeout_ms=5000)
    (topic,) = send_request(broker, 21, version, request).topics
    assert [(p.error_code, p.low_watermark) for p in topic.partitions] == [
        (0, 0), (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]


@pytest.mark.parametrize("version", range(3))
def test_describe_cluster_versions(broker, version):
    response = send_request(broker, 60, version, DescribeClusterRequest(include_cluster_authorized_operations=True))
    assert response.error_code == 0
    assert [(b.broker_id, b.port) for b in response.brokers] == [(0, broker.port)]
    assert response.cluster_authorized_operations > 0


@pytest.mark.parametrize("version", range(6))
def test_describe_log_dirs_versions(broker, admin, version):
    name = f"ver-ld-{version}"
    admin.create_topics({name: {"num_partitions": 2}})
    response = send_request(broker, 35, version, dl.DescribeLogDirsRequest(topics=None))
    (result,) = response.results
    names = {t.name for t in result.topics}
    assert name in names
    if version >= 4:
        assert 0 < result.usable_bytes <= result.total_bytes


def test_describe_topic_partitions_version(broker, admin):
    admin.create_topics({"ver-dtp": {"num_partitions": 2}})
    response = send_request(broker, 75, 0, DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name="ver-dtp")], response_partition_limit=1))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics] == [("ver-dtp", [0])]
    assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == ("ver-dtp", 1)


def _resource(name: str):
    from kafka.admin import ConfigResource, ConfigResourceType

    return ConfigResource(ConfigResourceType.TOPIC, name)
