"""KIP-714's client instances against a fake clock: subscriptions matched, pushes checked as Kafka
checks them, payloads decoded into the collector, series expired."""

from __future__ import annotations

from uuid import UUID

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from broker.metrics.families import rows_of
from broker.telemetry.client_metrics_manager import ClientInformation, ClientMetricsManager
from broker.telemetry.collector import ClientTelemetryCollector
from broker.telemetry.otlp import MetricPoint
from broker.telemetry.stats import ClientMetricsStatsCollector
from broker.telemetry.subscriptions import ClientMetricsSubscriptions
from protocol import compression
from protocol.errors import ErrorCode
from protocol.messages.push_telemetry import PushTelemetryRequest

ZERO = UUID(int=0)
APP = ClientInformation("app-1", "confluent-kafka-python", "2.16.1", "127.0.0.1", "50000")
OTHER = ClientInformation("other", "apache-kafka-java", "4.1.0", "127.0.0.1", "50001")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: float) -> None:
        self.now += ms / 1000.0


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def subscriptions() -> ClientMetricsSubscriptions:
    found = ClientMetricsSubscriptions()
    found.replace("apps", {"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.",
                           "interval.ms": "1000", "match": "client_id=app-.*"})
    return found


@pytest.fixture
def collector(clock: Clock) -> ClientTelemetryCollector:
    return ClientTelemetryCollector(clock)


@pytest.fixture
def manager(subscriptions: ClientMetricsSubscriptions, collector: ClientTelemetryCollector,
            clock: Clock) -> ClientMetricsManager:
    return ClientMetricsManager(subscriptions, collector, lambda: 4096, clock)


def payload(queue_time: float = 3.5, requests: int = 2) -> bytes:
    gauge = Metric(name="org.apache.kafka.producer.record.queue.time.avg", description="Queue time.",
                   gauge=Gauge(data_points=[NumberDataPoint(as_double=queue_time)]))
    counter = Metric(name="org.apache.kafka.producer.node.request.total", sum=Sum(
        is_monotonic=True, aggregation_temporality=AGGREGATION_TEMPORALITY_DELTA,
        data_points=[NumberDataPoint(as_int=requests, attributes=[
            KeyValue(key="node.id", value=AnyValue(int_value=1))])]))
    data = MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[gauge, counter])])])
    return data.SerializeToString()


def samples(collector: ClientTelemetryCollector) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in collector.collect():
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def test_a_matching_client_gets_its_subscription_and_pushes(manager: ClientMetricsManager,
                                                           collector: ClientTelemetryCollector,
                                                           clock: Clock) -> None:
    answer = manager.get_subscriptions(ZERO, APP)
    assert answer.error_code == ErrorCode.NO_ERROR
    assert answer.client_instance_id != ZERO
    assert answer.requested_metrics == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert answer.push_interval_ms == 1000
    assert answer.telemetry_max_bytes == 4096
    assert answer.delta_temporality
    assert answer.accepted_compression_types == [compression.ZSTD, compression.LZ4, compression.GZIP,
                                                 compression.SNAPPY]
    push = PushTelemetryRequest(client_instance_id=answer.client_instance_id,
                                subscription_id=answer.subscription_id, compression_type=compression.ZSTD,
                                metrics=compression.compress(compression.ZSTD, payload()))
    assert manager.push(push, APP).error_code == ErrorCode.NO_ERROR
    clock.advance_ms(1000)
    push.metrics = compression.compress(compression.ZSTD, payload(queue_time=7.0, requests=3))
    assert manager.push(push, APP).error_code == ErrorCode.NO_ERROR
    found = samples(collector)
    labels = {"client_id": "app-1", "client_software_name": "confluent-kafka-python",
              "client_software_version": "2.16.1", "client_instance_id": str(answer.client_instance_id)}
    assert found["org_apache_kafka_producer_record_queue_time_avg"] == [(labels, 7.0)]
    assert found["org_apache_kafka_producer_node_request_total"] == [({**labels, "node_id": "1"}, 5.0)]


def test_a_client_no_subscription_matches_is_asked_for_nothing(manager: ClientMetricsManager) -> None:
    answer = manager.get_subscriptions(ZERO, OTHER)
    assert answer.error_code == ErrorCode.NO_ERROR
    assert answer.requested_metrics == []
    assert answer.push_interval_ms == 300_000


def test_star_and_the_shortest_interval_win_across_subscriptions(subscriptions: ClientMetricsSubscriptions,
                                                                manager: ClientMetricsManager) -> None:
    subscriptions.replace("all", {"metrics": "*", "interval.ms": "500", "match": "client_software_name=confluent.*"})
    answer = manager.get_subscriptions(ZERO, APP)
    assert (answer.requested_metrics, answer.push_interval_ms) == (["*"], 500)


def test_early_requests_are_throttled(manager: ClientMetricsManager, clock: Clock) -> None:
    answer = manager.get_subscriptions(ZERO, APP)
    instance = answer.client_instance_id
    assert manager.get_subscriptions(instance, APP).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    push = PushTelemetryRequest(client_instance_id=instance, subscription_id=answer.subscription_id)
    assert manager.push(push, APP).error_code == ErrorCode.NO_ERROR  # the first push after a get: any time
    clock.advance_ms(400)
    assert manager.push(push, APP).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    push.terminating = True  # the last push is never early
    assert manager.push(push, APP).error_code == ErrorCode.NO_ERROR
    clock.advance_ms(2000)
    push.terminating = False
    assert manager.push(push, APP).error_code == ErrorCode.INVALID_REQUEST  # nothing after the last


def test_a_push_under_an_old_subscription_is_unknown(subscriptions: ClientMetricsSubscriptions,
                                                     manager: ClientMetricsManager, clock: Clock) -> None:
    answer = manager.get_subscriptions(ZERO, APP)
    subscriptions.replace("apps", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
    push = PushTelemetryRequest(client_instance_id=answer.client_instance_id,
                                subscription_id=answer.subscription_id)
    assert manager.push(push, APP).error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    again = manager.get_subscriptions(answer.client_instance_id, APP)  # re-evaluated: not throttled
    assert again.error_code == ErrorCode.NO_ERROR
    assert again.subscription_id != answer.subscription_id
    assert again.requested_metrics == ["org.apache.kafka.producer."]


@pytest.mark.parametrize(("change", "error"), [
    ({"compression_type": 9}, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ({"metrics": b"x" * 4097}, ErrorCode.TELEMETRY_TOO_LARGE),
    ({"metrics": b"\xff\xff\xff"}, ErrorCode.INVALID_RECORD),
    ({"metrics": b"not zstd", "compression_type": compression.ZSTD}, ErrorCode.INVALID_RECORD),
])
def test_bad_pushes_answer_as_kafka_does(manager: ClientMetricsManager, change: dict[str, object],
                                         error: ErrorCode) -> None:
    answer = manager.get_subscriptions(ZERO, APP)
    push = PushTelemetryRequest(client_instance_id=answer.client_instance_id,
                                subscription_id=answer.subscription_id)
    for name, value in change.items():
        setattr(push, name, value)
    assert manager.push(push, APP).error_code == error


def test_a_reserved_instance_id_is_an_invalid_request(manager: ClientMetricsManager) -> None:
    assert manager.push(PushTelemetryRequest(client_instance_id=ZERO), APP).error_code == ErrorCode.INVALID_REQUEST


def test_a_silent_clients_series_expire(manager: ClientMetricsManager, collector: ClientTelemetryCollector,
                                        clock: Clock) -> None:
    answer = manager.get_subscriptions(ZERO, APP)
    push = PushTelemetryRequest(client_instance_id=answer.client_instance_id,
                                subscription_id=answer.subscription_id, metrics=payload())
    assert manager.push(push, APP).error_code == ErrorCode.NO_ERROR
    clock.advance_ms(59_000)
    assert "org_apache_kafka_producer_record_queue_time_avg" in samples(collector)
    clock.advance_ms(2_000)  # three intervals, at least a minute: Kafka's expiry of a client instance
    assert samples(collector) == {}
    assert collector.clients() == 0


def test_the_brokers_client_metrics_counts(manager: ClientMetricsManager, subscriptions: ClientMetricsSubscriptions,
                                           clock: Clock) -> None:
    answer = manager.get_subscriptions(ZERO, APP)
    instance = answer.client_instance_id
    manager.get_subscriptions(instance, APP)  # throttled
    push = PushTelemetryRequest(client_instance_id=instance, subscription_id=answer.subscription_id,
                                metrics=payload())
    manager.push(push, APP)  # exported
    clock.advance_ms(1000)
    push.metrics = b"\xff"
    manager.push(push, APP)  # refused
    subscriptions.replace("apps", {})
    clock.advance_ms(1000)
    manager.push(push, APP)  # under the old subscription
    manager.get_subscriptions(ZERO, OTHER)
    found = {}
    for family in ClientMetricsStatsCollector(manager).collect():
        for name, labels, value in rows_of(family) or []:  # the broker's families keep plain rows
            assert isinstance(labels, dict)
            found[(name, tuple(sorted(labels.items())))] = value
    labels = (("client_instance_id", str(instance)),)
    assert found[("kafka_server_client_metrics_instance_count", ())] == 2
    assert found[("kafka_server_client_metrics_unknown_subscription_request_count", ())] == 1
    assert found[("kafka_server_client_metrics_throttle_count", labels)] == 1
    assert found[("kafka_server_client_metrics_plugin_export_count", labels)] == 1
    assert found[("kafka_server_client_metrics_plugin_error_count", labels)] == 1


def test_a_pushed_metric_named_like_the_brokers_own_is_dropped(collector: ClientTelemetryCollector) -> None:
    collector.record(UUID(int=7), {"client_id": "c"}, [
        MetricPoint("kafka_server_brokertopicmetrics_messagesin", "", "counter", 1.0, True, ()),
        MetricPoint("org_apache_kafka_producer_record_queue_time_avg", "", "gauge", 2.0, False, ())], 60.0)
    assert list(samples(collector)) == ["org_apache_kafka_producer_record_queue_time_avg"]
