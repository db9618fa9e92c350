"""Client quotas in a ZooKeeper cluster: stored as Kafka's ZooKeeper mode stores them, and a quota
set through one broker holds a client on another within a second (config change notification)."""

from __future__ import annotations

import json
import time

import pytest

from client.connection import BrokerConnection
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.records import Record, build_batch
from pytest_pafka.cluster import Cluster
from tests.broker.test_client_quotas_api import alter, describe
from tests.cluster.helpers import create_topic, unique

pytestmark = pytest.mark.pafka_cluster(brokers=2)


def _znode(cluster: Cluster, path: str) -> dict[str, object]:
    data, _ = cluster.zk().get(path)
    return dict(json.loads(data))


def test_quotas_are_kept_in_kafkas_znodes(cluster: Cluster) -> None:
    one, two = cluster.broker(1), cluster.broker(2)
    with BrokerConnection(one.host, one.port) as admin:
        assert alter(admin, {"user": "alice", "client-id": "app"}, {"producer_byte_rate": 1024.0}) == (0, None)
        assert alter(admin, {"user": "CN=bob,O=x"}, {"consumer_byte_rate": 2048.0}) == (0, None)
        assert alter(admin, {"client-id": None}, {"request_percentage": 50.0}) == (0, None)
        assert alter(admin, {"ip": "127.0.0.7"}, {"connection_creation_rate": 3.0}) == (0, None)
    assert _znode(cluster, "/config/users/alice/clients/app") == {
        "version": 1, "config": {"producer_byte_rate": "1024"}}
    assert _znode(cluster, "/config/users/CN%3Dbob%2CO%3Dx") == {"version": 1, "config": {"consumer_byte_rate": "2048"}}
    assert _znode(cluster, "/config/clients/<default>") == {"version": 1, "config": {"request_percentage": "50.0"}}
    assert _znode(cluster, "/config/ips/127.0.0.7") == {"version": 1, "config": {"connection_creation_rate": "3"}}
    notified = [_znode(cluster, f"/config/changes/{c}") for c in cluster.zk().get_children("/config/changes")]
    assert {"version": 2, "entity_path": "users/alice/clients/app"} in notified
    # Every broker knows them, whichever was asked.
    expected = {
        (("user", "alice"), ("client-id", "app")): {"producer_byte_rate": 1024.0},
        (("user", "CN=bob,O=x"),): {"consumer_byte_rate": 2048.0},
        (("client-id", None),): {"request_percentage": 50.0},
        (("ip", "127.0.0.7"),): {"connection_creation_rate": 3.0},
    }
    with BrokerConnection(two.host, two.port) as other:
        cluster.wait_for(lambda: describe(other, []) == expected, 5.0, "broker 2 to know the quotas")


def test_a_quota_set_through_one_broker_throttles_on_the_other_within_a_second(cluster: Cluster) -> None:
    topic = unique("quota")
    create_topic(cluster, topic, 1, 1, assignment=[[2]])  # led by broker 2
    one, two = cluster.broker(1), cluster.broker(2)
    batch = bytes(build_batch([Record(0, 0, None, b"x" * 10_000)]))

    def produce(connection: BrokerConnection) -> ProduceResponse:
        response = connection.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]), version=9)
        assert isinstance(response, ProduceResponse)
        assert response.responses[0].partition_responses[0].error_code == 0
        return response

    with BrokerConnection(two.host, two.port, client_id="held") as producer:
        assert produce(producer).throttle_time_ms == 0
        with BrokerConnection(one.host, one.port) as admin:
            assert alter(admin, {"client-id": "held"}, {"producer_byte_rate": 1000.0}) == (0, None)
        set_at = time.monotonic()
        throttled = 0
        while time.monotonic() - set_at < 1.0 and not throttled:
            throttled = produce(producer).throttle_time_ms
        assert throttled > 0, "broker 2 did not throttle within a second of the quota being set on broker 1"
