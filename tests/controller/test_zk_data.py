"""Kafka 3.9's znode JSON: pafka decodes what a Kafka broker wrote and writes what Kafka reads.

The literals below are znode contents in the form Kafka 3.9's ZooKeeper mode writes
them (kafka.zk.ZkData): compact JSON, some numbers as strings, topic ids in Kafka's
base64 form.
"""

from __future__ import annotations

import json
import uuid

import pytest

from controller.zk import zk_data as zd


def test_paths_are_kafkas() -> None:
    assert zd.broker_id_path(3) == "/brokers/ids/3"
    assert zd.topic_path("t") == "/brokers/topics/t"
    assert zd.topic_partition_state_path("t", 7) == "/brokers/topics/t/partitions/7/state"
    assert zd.config_entity_path(zd.CONFIG_TYPE_TOPIC, "t") == "/config/topics/t"
    assert zd.config_entity_path(zd.CONFIG_TYPE_BROKER, zd.DEFAULT_ENTITY) == "/config/brokers/<default>"
    assert zd.delete_topic_path("t") == "/admin/delete_topics/t"
    assert zd.CONFIG_CHANGES_PATH + "/" + zd.CONFIG_CHANGE_PREFIX == "/config/changes/config_change_"
    assert set(zd.PERSISTENT_PATHS) == {
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics", "/brokers/seqid",
        "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification",
        "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips",
    }


def test_controller_znode() -> None:
    kafka = b'{"version":2,"brokerid":2,"timestamp":"1732579200000","kraftControllerEpoch":-1}'
    assert zd.decode_controller(kafka) == 2
    assert zd.encode_controller(2, 1732579200000) == kafka
    # Kafka 2.x wrote version 1 without the KRaft epoch; still readable.
    assert zd.decode_controller(b'{"version":1,"brokerid":5,"timestamp":"1"}') == 5


def test_controller_epoch_is_plain_text() -> None:
    assert zd.encode_controller_epoch(17) == b"17"
    assert zd.decode_controller_epoch(b"17") == 17
    with pytest.raises(zd.ZkDataError):
        zd.decode_controller_epoch(b'{"epoch":1}')


BROKER_V5 = (
    b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","REPLICATION":"SSL"},'
    b'"endpoints":["PLAINTEXT://127.0.0.1:9092","REPLICATION://127.0.0.1:9093"],"rack":"rack-a",'
    b'"jmx_port":-1,"port":9092,"host":"127.0.0.1","version":5,"timestamp":"1732579200000"}'
)


def test_broker_registration_v5_decodes() -> None:
    info = zd.decode_broker_info(1, BROKER_V5, epoch=4294967300)
    assert info == zd.BrokerInfo(
        1,
        [zd.EndPoint("127.0.0.1", 9092, "PLAINTEXT", "PLAINTEXT"), zd.EndPoint("127.0.0.1", 9093, "REPLICATION", "SSL")],
        "rack-a",
        4294967300,
    )
    assert info.endpoint("REPLICATION") == zd.EndPoint("127.0.0.1", 9093, "REPLICATION", "SSL")
    assert info.endpoint("CLIENT") is None


def test_broker_registration_encodes_as_kafka() -> None:
    info = zd.decode_broker_info(1, BROKER_V5)
    assert zd.encode_broker_info(info, timestamp_ms=1732579200000) == BROKER_V5
    # No PLAINTEXT endpoint: Kafka registers host null, port -1; no rack key without a rack.
    ssl_only = zd.BrokerInfo(2, [zd.EndPoint("::1", 9094, "SECURE", "SSL")], None)
    value = json.loads(zd.encode_broker_info(ssl_only, timestamp_ms=5))
    assert value == {
        "features": {}, "listener_security_protocol_map": {"SECURE": "SSL"}, "endpoints": ["SECURE://[::1]:9094"],
        "jmx_port": -1, "port": -1, "host": None, "version": 5, "timestamp": "5",
    }
    assert zd.decode_broker_info(2, zd.encode_broker_info(ssl_only)) == ssl_only


def test_older_broker_registrations_decode() -> None:
    v1 = b'{"version":1,"host":"h","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert zd.decode_broker_info(0, v1).endpoints == [zd.EndPoint("h", 9092, "PLAINTEXT", "PLAINTEXT")]
    # Version 2/3: no listener map, the listener name is the security protocol.
    v3 = b'{"version":3,"host":"h","port":9092,"jmx_port":9999,"timestamp":"1","endpoints":["SSL://h:9093"],"rack":"dc1"}'
    assert zd.decode_broker_info(0, v3) == zd.BrokerInfo(0, [zd.EndPoint("h", 9093, "SSL", "SSL")], "dc1")
    with pytest.raises(zd.ZkDataError):
        zd.decode_broker_info(0, b'{"version":4,"endpoints":["CLIENT://h:1"],"listener_security_protocol_map":{}}')
    with pytest.raises(zd.ZkDataError):
        zd.decode_broker_info(0, b"not json")


TOPIC_ID = uuid.UUID("bc2ea5b3-54bc-4e5d-968f-f4e020ce239c")
TOPIC_V3 = (
    b'{"partitions":{"0":[1,2,3],"1":[2,3,1]},"topic_id":"vC6ls1S8Tl2Wj_TgIM4jnA",'
    b'"adding_replicas":{"1":[1]},"removing_replicas":{},"version":3}'
)


def test_topic_znode() -> None:
    assert zd.uuid_to_kafka(TOPIC_ID) == "vC6ls1S8Tl2Wj_TgIM4jnA"
    assignment = zd.decode_topic_assignment(TOPIC_V3)
    assert assignment == zd.TopicAssignment(TOPIC_ID, {0: [1, 2, 3], 1: [2, 3, 1]}, {1: [1]}, {})
    assert zd.encode_topic_assignment(assignment) == TOPIC_V3


def test_topic_znode_without_id() -> None:
    old = b'{"version":1,"partitions":{"0":[0]}}'
    assert zd.decode_topic_assignment(old) == zd.TopicAssignment(zd.ZERO_UUID, {0: [0]}, {}, {})
    assert "topic_id" not in json.loads(zd.encode_topic_assignment(zd.decode_topic_assignment(old)))


PARTITION_STATE = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,3]}'


def test_partition_state() -> None:
    state = zd.decode_partition_state(PARTITION_STATE, zk_version=11)
    assert state == zd.LeaderIsrAndControllerEpoch(zd.LeaderAndIsr(2, 7, [2, 3], 0, 11), 3)
    assert zd.encode_partition_state(state) == PARTITION_STATE


def test_partition_state_recovering_after_unclean_election() -> None:
    kafka = b'{"controller_epoch":3,"leader":3,"version":1,"leader_epoch":8,"isr":[3],"leader_recovery_state":1}'
    state = zd.decode_partition_state(kafka, 0)
    assert state.leader_and_isr.leader_recovery_state == zd.LEADER_RECOVERY_RECOVERING
    assert zd.encode_partition_state(state) == kafka


def test_leader_and_isr_transitions() -> None:
    lai = zd.LeaderAndIsr(1, 4, [1, 2], partition_epoch=9)
    assert lai.new_leader_and_isr(2, [2]) == zd.LeaderAndIsr(2, 5, [2], partition_epoch=9)
    assert lai.with_partition_epoch(10).partition_epoch == 10


def test_entity_config() -> None:
    kafka = b'{"version":1,"config":{"min.insync.replicas":"2","cleanup.policy":"compact"}}'
    assert zd.decode_config(kafka) == {"min.insync.replicas": "2", "cleanup.policy": "compact"}
    assert zd.encode_config({"min.insync.replicas": "2", "cleanup.policy": "compact"}) == kafka
    assert zd.decode_config(None) == {}
    assert zd.decode_config(b"") == {}


def test_config_change_notification() -> None:
    kafka = b'{"version":2,"entity_path":"topics/orders"}'
    assert zd.encode_config_change_notification(zd.config_entity_change_path("topics", "orders")) == kafka
    assert zd.decode_config_change_notification(kafka) == "topics/orders"
    assert zd.decode_config_change_notification(b'{"version":1,"entity_type":"brokers","entity_name":"1"}') == "brokers/1"


def test_isr_change_notification() -> None:
    kafka = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":3}]}'
    assert zd.encode_isr_change_notification([("t", 0), ("u", 3)]) == kafka
    assert zd.decode_isr_change_notification(kafka) == {("t", 0), ("u", 3)}


def test_cluster_id_version_is_a_string() -> None:
    kafka = b'{"version":"1","id":"6l6rn0dUTkS8fQ-ZjQDbsQ"}'
    assert zd.encode_cluster_id("6l6rn0dUTkS8fQ-ZjQDbsQ") == kafka
    assert zd.decode_cluster_id(kafka) == "6l6rn0dUTkS8fQ-ZjQDbsQ"


def test_producer_id_block() -> None:
    kafka = b'{"version":1,"broker":35,"block_start":"4000","block_end":"4999"}'
    block = zd.decode_producer_id_block(kafka)
    assert block == zd.ProducerIdBlock(35, 4000, 4999)
    assert block.size == 1000
    assert zd.encode_producer_id_block(block) == kafka
    assert block.next_block(7) == zd.ProducerIdBlock(7, 5000, 5999)
    assert zd.first_producer_id_block(1) == zd.ProducerIdBlock(1, 0, 999)
    with pytest.raises(zd.ZkDataError):
        zd.ProducerIdBlock(1, 0, (1 << 63) - 10).next_block(1)


def test_log_dir_event_and_preferred_election() -> None:
    assert zd.encode_log_dir_event(4) == b'{"version":1,"broker":4,"event":1}'
    assert zd.decode_log_dir_event(b'{"version":1,"broker":4,"event":1}') == 4
    kafka = b'{"version":1,"partitions":[{"topic":"t","partition":1}]}'
    assert zd.encode_preferred_replica_election([("t", 1)]) == kafka
    assert zd.decode_preferred_replica_election(kafka) == {("t", 1)}
