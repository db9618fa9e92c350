"""DescribeCluster, DescribeLogDirs and DescribeTopicPartitions on a real broker."""

from __future__ import annotations

from confluent_kafka import Producer, TopicCollection

from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from protocol.messages.describe_topic_partitions import Cursor, DescribeTopicPartitionsRequest, TopicRequest
from testing.sockets import send_request


# -- DescribeCluster ----------------------------------------------------------------------------
def test_describe_cluster_kafka_python(broker, admin):
    cluster = admin.describe_cluster()
    ops = set(cluster["authorized_operations"])
    assert ops == {"CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                   "IDEMPOTENT_WRITE"}
    del cluster["authorized_operations"]
    assert cluster["controller_id"] == 0
    assert cluster["brokers"] == [{"broker_id": 0, "host": "127.0.0.1", "port": broker.port, "rack": None,
                                   "is_fenced": False}]
    assert len(cluster["cluster_id"]) == 22  # Kafka's base64 UUID


def test_describe_cluster_confluent(broker, admin, cadmin):
    # librdkafka describes the cluster through Metadata, not DescribeCluster.
    cluster = cadmin.describe_cluster().result(10)
    assert cluster.cluster_id == admin.describe_cluster()["cluster_id"]
    assert cluster.controller.id == 0
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, "127.0.0.1", broker.port)]


def test_describe_cluster_versions_and_endpoint_types(broker):
    v0 = send_request(broker, 60, 0, DescribeClusterRequest(include_cluster_authorized_operations=False))
    assert v0.error_code == 0 and v0.cluster_authorized_operations == -(2**31)
    assert [b.broker_id for b in v0.brokers] == [0]
    controllers = send_request(broker, 60, 2, DescribeClusterRequest(endpoint_type=2))
    assert controllers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    bad = send_request(broker, 60, 1, DescribeClusterRequest(endpoint_type=9))
    assert bad.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


# -- DescribeLogDirs -------------------------------------------------------------------------------
def test_describe_log_dirs(broker, admin):
    admin.create_topics({"ld-a": {"num_partitions": 2}, "ld-b": {"num_partitions": 1}})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(20):
        producer.produce("ld-a", value=b"x" * 100, partition=1)
    assert producer.flush(10) == 0

    result = admin.describe_log_dirs()
    (per_broker,) = result
    (log_dir,) = per_broker["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(broker.data_dir.resolve())
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    sizes = {(t["name"], p["partition_index"]): (p["partition_size"], p["offset_lag"], p["is_future_key"])
             for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes[("ld-a", 0)] == (0, 0, False)
    assert sizes[("ld-a", 1)][0] > 20 * 100 and sizes[("ld-a", 1)][1:] == (0, False)
    assert sizes[("ld-b", 0)] == (0, 0, False)


def test_describe_log_dirs_for_some_partitions(broker, admin):
    admin.create_topics({"ld-c": {"num_partitions": 3}})
    request = DescribeLogDirsRequest(topics=[DescribableLogDirTopic(topic="ld-c", partitions=[0, 2]),
                                             DescribableLogDirTopic(topic="ld-none", partitions=[0])])
    for version in (1, 3, 5):
        response = send_request(broker, 35, version, request)
        (result,) = response.results
        found = [(t.name, p.partition_index) for t in result.topics for p in t.partitions]
        assert found == [("ld-c", 0), ("ld-c", 2)]


# -- DescribeTopicPartitions ------------------------------------------------------------------------
def test_describe_topic_partitions_pages_through_topics_in_name_order(admin):
    admin.create_topics({"dtp-b": {"num_partitions": 3}, "dtp-a": {"num_partitions": 2}})
    first = admin.describe_topic_partitions(["dtp-b", "dtp-a"], response_partition_limit=3)
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in first["topics"]] == [
        ("dtp-a", [0, 1]), ("dtp-b", [0])]
    assert first["next_cursor"] == {"topic_name": "dtp-b", "partition_index": 1}
    second = admin.describe_topic_partitions(["dtp-b", "dtp-a"], response_partition_limit=3,
                                             cursor=first["next_cursor"])
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in second["topics"]] == [
        ("dtp-b", [1, 2])]
    assert second["next_cursor"] is None
    partition = second["topics"][0]["partitions"][0]
    assert (partition["leader_id"], partition["replica_nodes"], partition["isr_nodes"],
            partition["offline_replicas"]) == (0, [0], [0], [])
    assert str(second["topics"][0]["topic_id"]) == str(admin.describe_topics(["dtp-b"])[0]["topic_id"])


def test_describe_topic_partitions_wire(broker, admin):
    admin.create_topics({"dtp-w": {"num_partitions": 2}})
    request = DescribeTopicPartitionsRequest(topics=[TopicRequest(name="dtp-w"), TopicRequest(name="dtp-none")],
                                             response_partition_limit=2000, cursor=None)
    response = send_request(broker, 75, 0, request)
    by_name = {t.name: t for t in response.topics}
    assert [t.name for t in response.topics] == ["dtp-none", "dtp-w"]
    assert by_name["dtp-none"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    described = by_name["dtp-w"].partitions
    assert [(p.partition_index, p.eligible_leader_replicas, p.last_known_elr) for p in described] == [
        (0, [], []), (1, [], [])]
    assert response.next_cursor is None
    # Limit exhausted exactly at a topic's end: the cursor points at the next topic.
    admin.create_topics({"dtp-x": {"num_partitions": 1}})
    paged = send_request(broker, 75, 0, DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name="dtp-w"), TopicRequest(name="dtp-x")], response_partition_limit=2))
    assert [t.name for t in paged.topics] == ["dtp-w"]
    assert (paged.next_cursor.topic_name, paged.next_cursor.partition_index) == ("dtp-x", 0)
    # A cursor on a topic the request does not name is refused.
    refused = send_request(broker, 75, 0, DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name="dtp-w")], response_partition_limit=10,
        cursor=Cursor(topic_name="dtp-a", partition_index=0)))
    assert [t.error_code for t in refused.topics] == [ErrorCode.INVALID_REQUEST]


def test_describe_topic_partitions_all_topics(broker, admin):
    admin.create_topics({"dtp-all": {"num_partitions": 1}})
    response = send_request(broker, 75, 0, DescribeTopicPartitionsRequest(topics=[], response_partition_limit=2000))
    names = [t.name for t in response.topics]
    assert "dtp-all" in names and names == sorted(names)


def test_describe_topics_with_confluent(cadmin, admin):
    admin.create_topics({"dtp-c": {"num_partitions": 3}})
    futures = cadmin.describe_topics(TopicCollection(["dtp-c"]))
    description = futures["dtp-c"].result(10)
    assert [p.id for p in description.partitions] == [0, 1, 2]
    assert all(p.leader.id == 0 and [r.id for r in p.isr] == [0] for p in description.partitions)
