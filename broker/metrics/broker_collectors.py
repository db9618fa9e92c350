"""The broker's own collectors, registered once its parts exist."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker.metrics.controller_metrics import ControllerMetricsCollector
from broker.metrics.families import gauge
from broker.metrics.group_metrics import GroupMetricsCollector, TransactionMetricsCollector
from broker.metrics.network_metrics import NetworkMetricsCollector
from broker.metrics.replica_metrics import ReplicaMetricsCollector
from broker.metrics.sources import MetricSources


class BrokerStateCollector(Collector):
    """kafka.server:type=KafkaServer,name=BrokerState."""

    def __init__(self, state: Callable[[], int]) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        yield gauge("kafka_server_kafkaserver_brokerstate", "kafka.server:type=KafkaServer,name=BrokerState"
                    ).add(self.state()).metric


def broker_collectors(server: MetricSources) -> list[Collector]:
    """Every metric of docs/metrics.md this broker serves (a cluster member's ZooKeeper session too)."""
    collectors: list[Collector] = [
        BrokerStateCollector(server.broker_state), ReplicaMetricsCollector(server.replica_manager),
        NetworkMetricsCollector(server.socket_server), ControllerMetricsCollector(server.membership, server.metadata),
        GroupMetricsCollector(server.group_coordinator, server.replica_manager),
        TransactionMetricsCollector(server.transaction_coordinator)]
    if server.membership.is_cluster:
        from broker.cluster.zk_broker import ZkBroker
        from broker.metrics.zookeeper_metrics import ZooKeeperMetricsCollector

        assert isinstance(server.membership, ZkBroker)
        collectors.append(ZooKeeperMetricsCollector(server.membership.zk))
    return collectors
