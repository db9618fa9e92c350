"""What a broker's metrics read: the parts of the KafkaServer they are collected from."""

from __future__ import annotations

from typing import Protocol

from broker.membership import Membership
from broker.metadata_view import TopicRegistry
from broker.network.socket_server import SocketServer
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.transaction.transaction_coordinator import TransactionCoordinator
from replication.replica_manager import ReplicaManager

#: Kafka's BrokerState values the endpoint can see.
STARTING, RUNNING, SHUTTING_DOWN = 1, 3, 7


class MetricSources(Protocol):
    """The parts of a broker its metrics read (the KafkaServer)."""

    replica_manager: ReplicaManager
    socket_server: SocketServer
    membership: Membership
    metadata: TopicRegistry
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator

    def broker_state(self) -> int: ...
