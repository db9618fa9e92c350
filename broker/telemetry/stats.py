"""The broker's own client-metrics metrics (Kafka's ``kafka.server:type=client-metrics``), as the JMX
exporter names them: the client instances known, the pushes under an outdated subscription, and per
client instance the requests throttled and the payloads exported or refused. Read at scrape time from
the counts the manager keeps; an instance's series go when the instance is forgotten."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker.metrics.families import gauge
from broker.telemetry.client_metrics_manager import ClientMetricsManager

_PREFIX = "kafka_server_client_metrics_"


class ClientMetricsStatsCollector(Collector):
    def __init__(self, manager: ClientMetricsManager) -> None:
        self._manager = manager

    def collect(self) -> Iterator[Metric]:
        instances = self._manager.clients()
        yield gauge(_PREFIX + "instance_count", "The current number of client metrics instances.").add(
            len(instances)).metric
        yield gauge(_PREFIX + "unknown_subscription_request_count",
                    "The total number of telemetry requests with an unknown subscription id.").add(
            self._manager.unknown_subscription_requests).metric
        throttle = gauge(_PREFIX + "throttle_count", "The total number of throttled telemetry requests.")
        export = gauge(_PREFIX + "plugin_export_count", "The total number of metrics payloads exported.")
        error = gauge(_PREFIX + "plugin_error_count", "The total number of metrics payloads that failed to export.")
        for instance_id, instance in instances.items():
            throttle.add(instance.throttles, client_instance_id=str(instance_id))
            export.add(instance.exports, client_instance_id=str(instance_id))
            error.add(instance.export_errors, client_instance_id=str(instance_id))
        yield from (throttle.metric, export.metric, error.metric)
