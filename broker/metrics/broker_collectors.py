"""The broker's own collectors, registered once its parts exist."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from prometheus_client.metrics_core import Metric

from broker.membership import Membership
from broker.metadata_view import TopicRegistry
from broker.metrics.broker_metrics import BrokerMetrics
from broker.metrics.controller_metrics import ControllerMetricsCollector
from broker.metrics.families import gauge
from broker.metrics.group_metrics import GroupMetricsCollector, TransactionMetricsCollector
from broker.metrics.network_metrics import NetworkMetricsCollector
from broker.metrics.replica_metrics import ReplicaMetricsCollector
from broker.network.socket_server import SocketServer
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.transaction.transaction_coordinator import TransactionCoordinator
from replication.replica_manager import ReplicaManager

#: Kafka's BrokerState values the endpoint can see.
STARTING, RUNNING, SHUTTING_DOWN = 1, 3, 7


class BrokerStateCollector:
    """kafka.server:type=KafkaServer,name=BrokerState."""

    def __init__(self, state: Callable[[], int]) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        yield gauge("kafka_server_kafkaserver_brokerstate", "kafka.server:type=KafkaServer,name=BrokerState"
                    ).add(self.state()).metric


class MetricSources(Protocol):
    """The parts of a broker its metrics read (the KafkaServer)."""

    replica_manager: ReplicaManager
    socket_server: SocketServer
    membership: Membership
    metadata: TopicRegistry
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator

    def broker_state(self) -> int: ...


def register_broker_collectors(metrics: BrokerMetrics, server: MetricSources) -> None:
    """Every metric of docs/metrics.md this broker serves (a cluster member's ZooKeeper session too)."""
    metrics.register_collector(BrokerStateCollector(server.broker_state))
    metrics.register_collector(ReplicaMetricsCollector(server.replica_manager))
    metrics.register_collector(NetworkMetricsCollector(server.socket_server))
    metrics.register_collector(ControllerMetricsCollector(server.membership, server.metadata))
    metrics.register_collector(GroupMetricsCollector(server.group_coordinator, server.replica_manager))
    metrics.register_collector(TransactionMetricsCollector(server.transaction_coordinator))
    if server.membership.is_cluster:
        from broker.cluster.zk_broker import ZkBroker
        from broker.metrics.zookeeper_metrics import ZooKeeperMetricsCollector

        assert isinstance(server.membership, ZkBroker)
        metrics.register_collector(ZooKeeperMetricsCollector(server.membership.zk))
