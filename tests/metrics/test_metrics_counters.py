"""Counters move exactly with a real client's traffic: records in, bytes in and out, the APIs used, lag."""

from __future__ import annotations

import uuid

from pytest_pafka.broker_process import BrokerProcess
from tests.metrics.scrape import Scrape
from tests.metrics.workload import VALUE, consume_and_commit, create_topic, produce

RECORDS = 500
COMMITTED = 180


def test_counters_and_lag_follow_a_produce_and_a_consume(pafka_broker: BrokerProcess) -> None:
    bootstrap = pafka_broker.bootstrap
    topic = create_topic(bootstrap)
    group = f"g-{uuid.uuid4().hex[:6]}"
    before = Scrape.of(pafka_broker.metrics_url)
    produce(bootstrap, topic, RECORDS)
    assert consume_and_commit(bootstrap, topic, group, RECORDS, COMMITTED) == RECORDS
    after = Scrape.of(pafka_broker.metrics_url)

    assert after.value("kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == RECORDS
    bytes_in = after.value("kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    # Each record's value plus its key and batch framing: more than the values, less than twice them.
    assert RECORDS * len(VALUE) < bytes_in < 2 * RECORDS * len(VALUE)
    assert after.value("kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in
    messages_in = (after.value("kafka_server_brokertopicmetrics_messagesin_total")
                   - before.value("kafka_server_brokertopicmetrics_messagesin_total"))
    assert messages_in >= RECORDS  # and the group's commits to __consumer_offsets
    assert after.value("kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) == 0

    used = after.with_label("kafka_network_requestmetrics_requests_total", "request")
    assert {"ApiVersions", "Metadata", "CreateTopics", "Produce", "Fetch", "FetchConsumer", "FindCoordinator",
            "JoinGroup", "SyncGroup", "OffsetFetch", "OffsetCommit", "LeaveGroup"} <= used
    for request in ("Produce", "Fetch", "OffsetCommit"):
        assert after.value("kafka_network_requestmetrics_totaltimems_count", request=request) > 0
        assert after.value("kafka_network_requestmetrics_errors_total", request=request, error="NONE") > 0

    labels = {"consumergroup": group, "topic": topic, "partition": "0"}
    assert after.value("kafka_consumergroup_lag", **labels) == RECORDS - COMMITTED
    assert after.value("kafka_consumergroup_current_offset", **labels) == COMMITTED
    assert after.value("kafka_log_log_logendoffset", topic=topic, partition="0") == RECORDS
    assert after.value("kafka_log_log_numlogsegments", topic=topic, partition="0") == 1
    assert after.value("kafka_server_replicamanager_leadercount") == after.value(
        "kafka_server_replicamanager_partitioncount")
    assert after.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert after.value("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT",
                       networkProcessor="0") >= 0
    assert 0 <= after.value("kafka_network_socketserver_networkprocessoravgidle_percent") <= 1
    assert after.value("process_open_fds") > 0
