"""What client-facing handlers read about the cluster, the same way in both modes.

Metadata, DescribeCluster, DescribeTopicPartitions, Produce, Fetch and the
admin handlers ask two questions: which topics exist (names, ids, partitions,
configs: :class:`TopicRegistry`) and who serves them (live brokers by
listener, each partition's leader, ISR and offline replicas, the controller:
:class:`ClusterView`).

* The embedded single broker answers the first from its
  :class:`~broker.metadata_store.MetadataStore` and the second from itself and
  its replica manager (:class:`LocalClusterView`): it is the only broker, its
  own controller and every partition's leader.
* A broker in a cluster answers both from its
  :class:`~broker.cluster.metadata_cache.ZkMetadataCache`, which the controller's
  UpdateMetadata requests fill (Kafka's ZkMetadataCache).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config.broker_config import BrokerConfig
    from broker.metadata_store import TopicMetadata
    from broker.network.socket_server import SocketServer
    from replication.replica_manager import ReplicaManager

#: MetadataResponse.NO_CONTROLLER_ID / NO_LEADER_ID
NO_CONTROLLER_ID = -1


class TopicRegistry(Protocol):
    """The topics of the cluster: MetadataStore (single broker) or ZkMetadataCache (cluster)."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def topics_version(self) -> int:
        """Moves on whenever a topic is created, deleted or replaced, or gets partitions (so a reader
        that keeps what it derived from the topics knows when to derive it again)."""
        ...

    def get(self, name: str) -> TopicMetadata | None: ...

    def by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...

    def configs_of(self, name: str) -> dict[str, str]: ...

    def __iter__(self) -> Iterator[TopicMetadata]: ...

    def __contains__(self, name: str) -> bool: ...


class PartitionStateView(Protocol):
    """One partition as clients are told about it (replication.partition.Partition is one)."""

    @property
    def partition_index(self) -> int: ...

    @property
    def leader_id(self) -> int: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def replicas(self) -> list[int]: ...

    @property
    def isr(self) -> list[int]: ...


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """A live broker as reached through one listener."""

    node_id: int
    host: str
    port: int
    rack: str | None


class ClusterView(Protocol):
    """Who serves what: brokers, the controller, each partition's leadership."""

    @property
    def is_cluster(self) -> bool: ...

    def alive_brokers(self, listener_name: str) -> list[BrokerNode]: ...

    def controller_id(self) -> int: ...

    def partition_states(self, topic: str) -> Sequence[PartitionStateView]: ...

    def offline_replicas(self, partition: PartitionStateView) -> list[int]: ...

    def leader_node(self, leader_id: int, listener_name: str) -> BrokerNode | None: ...

    def reachable_broker_ids(self, listener_name: str) -> frozenset[int]:
        """The live brokers a client on this listener can reach."""
        ...

    def unhosted_error(self, topic: str, partition: int) -> int:
        """The error for a partition this broker does not host (Kafka's getPartitionOrError):
        NOT_LEADER_OR_FOLLOWER when the cluster has it elsewhere, else UNKNOWN_TOPIC_OR_PARTITION."""
        ...


class LocalClusterView:
    """The embedded single broker: the only live broker, its own controller, every partition's leader."""

    is_cluster = False

    def __init__(self, broker_id: int, config: BrokerConfigSource, socket_server: SocketServer,
                 replica_manager: ReplicaManager) -> None:
        self.broker_id = broker_id
        self._config = config
        self.socket_server = socket_server
        self.replica_manager = replica_manager

    def advertised_endpoint(self, listener_name: str) -> tuple[str, int]:
        """This broker's advertised host and port for the listener the client used."""
        advertised = self._config.config.effective_advertised_listeners
        endpoint = next((listener for listener in advertised if listener.name == listener_name), advertised[0])
        host, port = endpoint.host, endpoint.port
        if port == 0:  # listening on an ephemeral port: advertise the bound one
            host, port = self.socket_server.bound.get(endpoint.name, (host, port))
        return host, port

    def alive_brokers(self, listener_name: str) -> list[BrokerNode]:
        host, port = self.advertised_endpoint(listener_name)
        return [BrokerNode(self.broker_id, host, port, self._config.config.rack)]

    def controller_id(self) -> int:
        return self.broker_id

    def partition_states(self, topic: str) -> Sequence[PartitionStateView]:
        return self.replica_manager.partitions_of(topic)

    def offline_replicas(self, partition: PartitionStateView) -> list[int]:
        return []

    def leader_node(self, leader_id: int, listener_name: str) -> BrokerNode | None:
        if leader_id != self.broker_id:
            return None
        return self.alive_brokers(listener_name)[0]

    def reachable_broker_ids(self, listener_name: str) -> frozenset[int]:
        return frozenset((self.broker_id,))

    def unhosted_error(self, topic: str, partition: int) -> int:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # the lone broker hosts every partition there is


class BrokerConfigSource(Protocol):
    """Anything holding the broker's current config (DynamicBrokerConfig)."""

    @property
    def config(self) -> BrokerConfig: ...
