"""Client metrics pushed to the broker (KIP-714) by confluent-kafka, on real broker processes.

librdkafka (2.5+) asks for its subscription when the broker advertises GetTelemetrySubscriptions and
pushes its metrics every push interval; the broker's Prometheus endpoint then serves them, labelled with
the client's id, software and instance id. Subscriptions are made with ``pafka configs --entity-type
client-metrics`` and IncrementalAlterConfigs (resource type CLIENT_METRICS), kept in a lone broker's file
and in ZooKeeper on a cluster, where a change made through one broker reaches the others.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from click.testing import CliRunner

from client.admin import AdminClient
from client.client import KafkaClient
from protocol.config_types import AlterConfigOp, ConfigResourceType
from protocol.errors import ErrorCode
from protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsRequest
from protocol.messages.list_config_resources import ListConfigResourcesRequest
from protocol.messages.push_telemetry import PushTelemetryRequest
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster
from pytest_pafka.waiting import wait_until
from testing.sockets import send_request
from testing.topics import create_topic
from tools.cli import main

confluent_kafka = pytest.importorskip("confluent_kafka")

INTERVAL_MS = 2000
SUBSCRIPTION = (f"metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.],interval.ms={INTERVAL_MS},"
                "match=[client_id=tel-.*]")
PRODUCER_METRIC = "org_apache_kafka_producer_record_queue_time_avg"
CONSUMER_METRIC = "org_apache_kafka_consumer_fetch_manager_fetch_latency_avg"


def cli(*args: str) -> list[str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def scrape(broker: BrokerProcess) -> str:
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as answer:
        text: str = answer.read().decode()
        return text


def series(text: str, metric: str) -> list[dict[str, str]]:
    """The label sets of ``metric``'s samples."""
    found = []
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            labels = line[len(metric) + 1:line.rindex("}")]
            found.append(dict(re.findall(r'(\w+)="([^"]*)"', labels)))
    return found


@contextmanager
def running_clients(bootstrap: str, prefix: str) -> Iterator[tuple[Any, Any]]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": f"{prefix}-producer",
                                         "linger.ms": 5})
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "client.id": f"{prefix}-consumer",
                                         "group.id": f"{prefix}-group", "auto.offset.reset": "earliest"})
    consumer.subscribe(["telemetry"])
    try:
        yield producer, consumer
    finally:
        consumer.close()
        producer.flush(10)


def work(producer: Any, consumer: Any) -> None:
    producer.produce("telemetry", b"record")
    producer.poll(0)
    consumer.poll(0.1)


def test_confluent_kafka_pushes_its_metrics_to_the_broker_endpoint(pafka_broker: BrokerProcess) -> None:
    create_topic(pafka_broker.bootstrap, "telemetry", 1)
    assert cli("configs", "--bootstrap-server", pafka_broker.bootstrap, "--alter", "--entity-type",
               "client-metrics", "--entity-name", "clients", "--add-config", SUBSCRIPTION) == [
        "Completed updating config for client-metric clients."]
    started = time.monotonic()
    seen: dict[str, float] = {}

    def both_pushed() -> bool:
        text = scrape(pafka_broker)
        for metric, client_id in ((PRODUCER_METRIC, "tel-producer"), (CONSUMER_METRIC, "tel-consumer")):
            if metric not in seen and any(s.get("client_id") == client_id for s in series(text, metric)):
                seen[metric] = time.monotonic() - started
        return len(seen) == 2

    with running_clients(pafka_broker.bootstrap, "tel") as (producer, consumer), \
            running_clients(pafka_broker.bootstrap, "unsubscribed") as (other_producer, other_consumer):
        def pushed() -> bool:
            work(producer, consumer)
            work(other_producer, other_consumer)
            return both_pushed()

        wait_until(pushed, 4 * INTERVAL_MS / 1000, "the clients' metrics on the broker's endpoint",
                   details=lambda: f"seen after {seen}")
        text = scrape(pafka_broker)
    assert max(seen.values()) <= 2 * INTERVAL_MS / 1000, seen  # within two push intervals of the clients' start
    producer_series = series(text, PRODUCER_METRIC)
    assert {s["client_id"] for s in producer_series} == {"tel-producer"}  # the unsubscribed clients push nothing
    labels = producer_series[0]
    assert labels["client_software_name"] == "confluent-kafka-python"
    assert labels["client_software_version"].startswith(confluent_kafka.version()[0])
    assert re.fullmatch(r"[0-9a-f-]{36}", labels["client_instance_id"])
    # The broker's own client-metrics metrics: the four clients are instances it knows.
    instances = [line for line in text.splitlines() if line.startswith("kafka_server_client_metrics_instance_count ")]
    assert len(instances) == 1 and float(instances[0].split()[1]) >= 4, instances


def describe(bootstrap: str, name: str) -> dict[str, str]:
    with KafkaClient(bootstrap, client_id="tests") as client:
        entries = AdminClient(client).describe_configs(ConfigResourceType.CLIENT_METRICS, name)
    return {key: str(entry.value) for key, entry in entries.items()}


def test_subscriptions_on_a_lone_broker_survive_a_restart(pafka_broker: BrokerProcess) -> None:
    bootstrap = pafka_broker.bootstrap
    with KafkaClient(bootstrap, client_id="tests") as client:
        AdminClient(client).incremental_alter_configs(ConfigResourceType.CLIENT_METRICS, "all", [
            ("metrics", AlterConfigOp.SET, "*"), ("interval.ms", AlterConfigOp.SET, "60000")])
    cli("configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "client-metrics", "--entity-name",
        "java", "--add-config", "metrics=org.apache.kafka.,match=[client_software_name=apache-kafka-java]")
    pafka_broker.restart()
    assert cli("configs", "--bootstrap-server", pafka_broker.bootstrap, "--describe", "--entity-type",
               "client-metrics") == [
        "Dynamic configs for client-metric all are:",
        "  interval.ms=60000 sensitive=false synonyms={}",
        "  metrics=* sensitive=false synonyms={}",
        "Dynamic configs for client-metric java are:",
        "  match=client_software_name=apache-kafka-java sensitive=false synonyms={}",
        "  metrics=org.apache.kafka. sensitive=false synonyms={}"]
    listed = send_request(pafka_broker, 74, 1, ListConfigResourcesRequest(resource_types=[16]))
    assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [("all", 16), ("java", 16)]
    cli("configs", "--bootstrap-server", pafka_broker.bootstrap, "--alter", "--entity-type", "client-metrics",
        "--entity-name", "all", "--delete-config", "metrics,interval.ms")
    assert send_request(pafka_broker, 74, 0, ListConfigResourcesRequest()).config_resources[0].resource_name == "java"
    refused = CliRunner().invoke(main, ["configs", "--bootstrap-server", pafka_broker.bootstrap, "--alter",
                                        "--entity-type", "client-metrics", "--entity-name", "bad",
                                        "--add-config", "interval.ms=10"])
    assert refused.exit_code != 0
    assert "Invalid value 10 for interval.ms, interval must be between 100 and 3600000 (1 hour)" in refused.output
    assert send_request(pafka_broker, 74, 1, ListConfigResourcesRequest(resource_types=[64])).error_code == \
        ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.pafka_cluster(brokers=2)
def test_a_subscription_made_through_one_broker_reaches_the_other(pafka_cluster: Cluster) -> None:
    first, second = (pafka_cluster.broker(i) for i in pafka_cluster.broker_ids)
    cli("configs", "--bootstrap-server", first.bootstrap, "--alter", "--entity-type", "client-metrics",
        "--entity-name", "clients", "--add-config", SUBSCRIPTION)
    wait_until(lambda: describe(second.bootstrap, "clients").get("interval.ms") == str(INTERVAL_MS), 30,
               "the subscription on the other broker")
    create_topic(first.bootstrap, "telemetry", 1)
    # The client picks the broker it pushes to; whichever it is knows the subscription.
    with running_clients(second.bootstrap, "tel") as (producer, consumer):
        def pushed() -> bool:
            work(producer, consumer)
            return any(s.get("client_id") == "tel-producer"
                       for broker in (first, second) for s in series(scrape(broker), PRODUCER_METRIC))

        wait_until(pushed, 30, "the producer's metrics on a broker's endpoint")


def test_get_subscriptions_and_push_on_the_wire(pafka_broker: BrokerProcess) -> None:
    """GetTelemetrySubscriptions v0 and PushTelemetry v0 as a client sends them, Kafka's errors included."""
    cli("configs", "--bootstrap-server", pafka_broker.bootstrap, "--alter", "--entity-type", "client-metrics",
        "--entity-name", "wire", "--add-config", "metrics=*,interval.ms=60000,match=[client_id=pafka-tests]")
    answer = send_request(pafka_broker, 71, 0, GetTelemetrySubscriptionsRequest())
    assert answer.error_code == ErrorCode.NO_ERROR
    assert (answer.requested_metrics, answer.push_interval_ms, answer.delta_temporality) == (["*"], 60000, True)
    assert answer.telemetry_max_bytes == 1_048_576
    instance = answer.client_instance_id
    again = send_request(pafka_broker, 71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=instance))
    assert again.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    push = PushTelemetryRequest(client_instance_id=instance, subscription_id=answer.subscription_id,
                                compression_type=0, metrics=b"\x0a\x02garbage")
    assert send_request(pafka_broker, 72, 0, push).error_code == ErrorCode.INVALID_RECORD
    assert send_request(pafka_broker, 72, 0, push).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    push.terminating, push.metrics = True, b""
    assert send_request(pafka_broker, 72, 0, push).error_code == ErrorCode.NO_ERROR
    # ListConfigResources v1 with no type: every supported type's resources (KIP-1142).
    create_topic(pafka_broker.bootstrap, "listed", 1)
    listed = send_request(pafka_broker, 74, 1, ListConfigResourcesRequest())
    resources = {(r.resource_name, r.resource_type) for r in listed.config_resources}
    assert {("wire", 16), ("listed", 2), ("0", 4), ("0", 8)} <= resources  # a lone broker is broker 0


def test_pafka_client_metrics_as_kafka_client_metrics_sh(pafka_broker: BrokerProcess) -> None:
    bootstrap = pafka_broker.bootstrap
    assert cli("client-metrics", "--bootstrap-server", bootstrap, "--alter", "--name", "apps", "--metrics",
               "org.apache.kafka.producer.,org.apache.kafka.consumer.", "--interval", "5000", "--match",
               "client_id=app.*,client_software_name=confluent.*") == ["Altered client metrics config for apps."]
    generated = cli("client-metrics", "--bootstrap-server", bootstrap, "--alter", "--generate-name", "--metrics", "*")
    name = generated[0].removeprefix("Altered client metrics config for ").removesuffix(".")
    assert sorted(cli("client-metrics", "--bootstrap-server", bootstrap, "--list")) == sorted(["apps", name])
    assert cli("client-metrics", "--bootstrap-server", bootstrap, "--describe", "--name", "apps") == [
        "Client metrics configs for apps are:",
        "  interval.ms=5000",
        "  match=client_id=app.*,client_software_name=confluent.*",
        "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer."]
    assert cli("client-metrics", "--bootstrap-server", bootstrap, "--delete", "--name", name) == [
        f"Deleted client metrics config for {name}."]
    assert cli("client-metrics", "--bootstrap-server", bootstrap, "--list") == ["apps"]
    refused = CliRunner().invoke(main, ["client-metrics", "--bootstrap-server", bootstrap, "--alter", "--metrics", "*"])
    assert refused.exit_code != 0
    assert "One of --name or --generate-name must be specified with --alter." in refused.output
