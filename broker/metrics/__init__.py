"""The broker's Prometheus endpoint: metrics named as the JMX exporter with Strimzi's rules names
Kafka's MBeans, and the health checks orchestrators probe (docs/metrics.md)."""

from broker.metrics.broker_metrics import BrokerMetrics
from broker.metrics.http_endpoint import MetricsEndpoint, MetricsPortInUseError, endpoint_for

__all__ = ["BrokerMetrics", "MetricsEndpoint", "MetricsPortInUseError", "endpoint_for"]
