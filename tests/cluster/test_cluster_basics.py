"""Three brokers on one ZooKeeper (issue 17, first must-show).

Kafka 3.9's ZooKeeper layout is read back with kazoo, field by field, as Kafka's own tools and
operators read it; every broker answers Metadata for the whole cluster with the same leaders; four
client libraries produce to and consume from a 12-partition RF 3 topic, every record exactly once.
"""

from __future__ import annotations

import json
import re

import pytest

from pytest_pafka.cluster import Cluster
from tests.cluster.helpers import (
    broker_metadata,
    create_topic,
    kafka_uuid,
    leaders_in_zookeeper,
    unique,
)
from tests.integration.clients import AioKafkaDriver, ClientDriver, ConfluentDriver, KafkaPythonDriver
from tests.integration.kafkajs_runner import run_kafkajs
from tests.integration.records import check_consumed, make_records

PARTITIONS = 12
RECORDS_PER_CLIENT = 3000


def test_cluster_id_and_persistent_paths(cluster: Cluster) -> None:
    data, _ = cluster.kazoo.get("/cluster/id")
    cluster_id = json.loads(data)
    assert cluster_id["version"] == "1", "Kafka writes this version as a string"
    assert len(kafka_uuid(cluster_id["id"]).bytes) == 16
    # The persistent paths every Kafka broker creates at start-up (KafkaZkClient.createTopLevelPaths).
    for path in ("/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/topics", "/config/brokers",
                 "/config/changes", "/admin/delete_topics", "/isr_change_notification",
                 "/latest_producer_id_block"):
        assert cluster.kazoo.exists(path) is not None, f"{path} missing"
    # Every broker's Metadata names the same cluster id.
    for broker_id in cluster.broker_ids:
        assert broker_metadata(cluster.broker(broker_id), []).cluster_id == cluster_id["id"]


def test_broker_registrations(cluster: Cluster) -> None:
    assert cluster.registered_ids() == {1, 2, 3}
    for broker_id in (1, 2, 3):
        broker = cluster.broker(broker_id)
        data, stat = cluster.kazoo.get(f"/brokers/ids/{broker_id}")
        assert stat.ephemeralOwner != 0, "a broker registration is ephemeral"
        info = json.loads(data)
        assert info["version"] == 5
        assert info["host"] == broker.host == f"127.0.0.{broker_id}"
        assert info["port"] == broker.port
        assert info["endpoints"] == [f"PLAINTEXT://{broker.host}:{broker.port}"]
        assert info["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert info["jmx_port"] == -1
        assert re.fullmatch(r"\d{13}", info["timestamp"]), info["timestamp"]
        assert isinstance(info["features"], dict)
        assert "rack" not in info or info["rack"] is None


def test_one_controller_and_its_epoch(cluster: Cluster) -> None:
    data, stat = cluster.kazoo.get("/controller")
    assert stat.ephemeralOwner != 0, "/controller is ephemeral"
    controller = json.loads(data)
    assert controller["version"] in (1, 2)
    assert controller["brokerid"] in (1, 2, 3)
    assert re.fullmatch(r"\d{13}", controller["timestamp"])
    if controller["version"] == 2:
        assert controller["kraftControllerEpoch"] == -1, "a ZooKeeper controller, not a KRaft one"
    epoch_data, _ = cluster.kazoo.get("/controller_epoch")
    assert int(epoch_data.decode()) >= 1, "plain decimal text"
    # Every broker names that one controller.
    for broker_id in cluster.broker_ids:
        assert broker_metadata(cluster.broker(broker_id), []).controller_id == controller["brokerid"]


def test_topic_znodes_and_partition_state(cluster: Cluster) -> None:
    topic = unique("znodes")
    create_topic(cluster, topic, PARTITIONS, 3, {"min.insync.replicas": "2", "retention.ms": "3600000"})

    data, _ = cluster.kazoo.get(f"/brokers/topics/{topic}")
    assignment = json.loads(data)
    assert assignment["version"] == 3
    assert assignment["adding_replicas"] == {} and assignment["removing_replicas"] == {}
    partitions = assignment["partitions"]
    assert set(partitions) == {str(p) for p in range(PARTITIONS)}
    for replicas in partitions.values():
        assert sorted(replicas) == [1, 2, 3], replicas
    # Kafka's assignment spreads the first (preferred) replicas evenly: 4 each of 12.
    firsts = [partitions[str(p)][0] for p in range(PARTITIONS)]
    assert sorted(firsts.count(b) for b in (1, 2, 3)) == [4, 4, 4], firsts
    topic_id = kafka_uuid(assignment["topic_id"])
    metadata = broker_metadata(cluster.broker(1), [topic])
    assert metadata.topics[topic].topic_id == topic_id

    epoch = int(cluster.kazoo.get("/controller_epoch")[0].decode())
    children = cluster.kazoo.get_children(f"/brokers/topics/{topic}/partitions")
    assert sorted(children, key=int) == [str(p) for p in range(PARTITIONS)]
    for p in range(PARTITIONS):
        state = cluster.partition_state(topic, p)
        assert state is not None
        assert state["version"] == 1
        assert state["leader"] == partitions[str(p)][0], "a new partition is led by its preferred replica"
        assert state["leader_epoch"] == 0
        assert sorted(state["isr"]) == [1, 2, 3]
        assert 1 <= state["controller_epoch"] <= epoch
        assert "leader_recovery_state" not in state or state["leader_recovery_state"] == 0

    config_data, _ = cluster.kazoo.get(f"/config/topics/{topic}")
    config = json.loads(config_data)
    assert config["version"] == 1
    assert config["config"]["min.insync.replicas"] == "2"
    assert config["config"]["retention.ms"] == "3600000"


def test_topic_config_change_notification(cluster: Cluster) -> None:
    """An altered topic config lands in /config/topics/T and announces itself in /config/changes."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = unique("configs")
    create_topic(cluster, topic, 1, 3)
    before = set(cluster.kazoo.get_children("/config/changes"))
    admin = AdminClient({"bootstrap.servers": cluster.broker(2).bootstrap})
    resource = ConfigResource("topic", topic, set_config={"retention.ms": "7200000"})
    admin.alter_configs([resource])[resource].result(timeout=30)

    config = json.loads(cluster.kazoo.get(f"/config/topics/{topic}")[0])
    assert config["config"]["retention.ms"] == "7200000"
    new = set(cluster.kazoo.get_children("/config/changes")) - before
    entity_paths = []
    for child in new:
        assert re.fullmatch(r"config_change_\d{10}", child), child
        with_data = cluster.read_json(f"/config/changes/{child}")
        if with_data is not None:  # Kafka's change listener may purge old notifications
            assert with_data["version"] == 2
            entity_paths.append(with_data["entity_path"])
    assert f"topics/{topic}" in entity_paths, (new, entity_paths)


def test_every_broker_sees_all_brokers_and_the_same_leaders(cluster: Cluster) -> None:
    topic = unique("metadata")
    create_topic(cluster, topic, PARTITIONS, 3)
    zk_leaders = leaders_in_zookeeper(cluster, topic, PARTITIONS)
    assert set(zk_leaders.values()) == {1, 2, 3}, "leaders spread over the three brokers"

    def consistent() -> bool:
        for broker_id in cluster.broker_ids:
            metadata = broker_metadata(cluster.broker(broker_id), [topic])
            if {b: (m.host, m.port) for b, m in metadata.brokers.items()} != {
                    b: (cluster.broker(b).host, cluster.broker(b).port) for b in (1, 2, 3)}:
                return False
            partitions = metadata.topics[topic].partitions
            if {p: m.leader for p, m in partitions.items()} != zk_leaders:
                return False
            if any(sorted(m.isr) != [1, 2, 3] or sorted(m.replicas) != [1, 2, 3] for m in partitions.values()):
                return False
        return True

    # UpdateMetadata reaches every broker shortly after the controller wrote the state.
    cluster.wait_for(consistent, 15.0, "every broker's Metadata agrees with ZooKeeper")


@pytest.mark.parametrize("driver", [ConfluentDriver(), KafkaPythonDriver(), AioKafkaDriver()], ids=lambda d: d.name)
def test_clients_produce_and_consume_exactly_once(cluster: Cluster, driver: ClientDriver) -> None:
    """Each client bootstraps from a different broker and reaches every leader through Metadata."""
    topic = unique(f"clients-{driver.name}")
    create_topic(cluster, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    bootstrap = {"confluent-kafka": cluster.bootstrap, "kafka-python": cluster.broker(2).bootstrap,
                 "aiokafka": cluster.broker(3).bootstrap}[driver.name]
    records = make_records(RECORDS_PER_CLIENT, 1_700_000_000_000)
    driver.produce(bootstrap, topic, "lz4", records)  # every client of the three supports it
    consumed = driver.consume(bootstrap, topic, PARTITIONS, len(records))
    check_consumed(records, consumed)
    assert len({c.partition for c in consumed}) == PARTITIONS, "keys spread over every partition"
    # Every partition's leader took part: the records landed on all three brokers.
    leaders = leaders_in_zookeeper(cluster, topic, PARTITIONS)
    assert set(leaders.values()) == {1, 2, 3}


def test_kafkajs_produces_and_a_group_consumes_exactly_once(cluster: Cluster) -> None:
    """KafkaJS (tests/integration/kafkajs) bootstraps from one broker, produces idempotently to every
    partition's leader, and a two-member group, coordinated wherever its offsets partition leads,
    reads and commits every record once."""
    topic, group = unique("clients-kafkajs"), unique("kafkajs-group")
    create_topic(cluster, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    bootstrap = cluster.broker(2).bootstrap
    produced = run_kafkajs("produce", {"brokers": bootstrap, "topic": topic, "count": RECORDS_PER_CLIENT})
    assert {p["partition"] for p in produced["produced"]} == set(range(PARTITIONS))
    assert all(p["errorCode"] == 0 for p in produced["produced"])
    events = run_kafkajs("group", {"brokers": bootstrap, "topic": topic, "group": group,
                                   "count": RECORDS_PER_CLIENT, "members": 2})
    assert "timed_out" not in events, events["timed_out"]
    consumed = events["consumed"]
    assert sorted(int(c["n"]) for c in consumed) == list(range(RECORDS_PER_CLIENT))
    ends: dict[int, int] = {}
    for c in consumed:
        ends[c["partition"]] = max(ends.get(c["partition"], 0), c["offset"] + 1)
    assert events["committed"][0]["offsets"] == [{"partition": p, "offset": ends[p]} for p in range(PARTITIONS)]
    assert sum(ends.values()) == RECORDS_PER_CLIENT
