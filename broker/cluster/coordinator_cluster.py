"""What the coordinators read of the cluster (cluster mode only).

On a lone broker every partition is led here, and the transaction
coordinator's markers never leave the process. In a cluster
(``zookeeper.connect`` set) they go to other brokers, found through the
broker's metadata cache (fed by UpdateMetadata): a :class:`CoordinatorCluster`
holds that view as narrow callables (Kafka's
``MetadataCache.getPartitionLeaderEndpoint``) and the inter-broker listener,
and ``coordinator_wiring`` builds the networked marker sender
(``coordinator.transaction.transaction_marker_sender``) from it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Protocol

from client.sasl import SaslSettings
from coordinator.common.partition_leader import LeaderEndpoint, PartitionLeaderLookup, TopicPartitionCount


@dataclass(frozen=True, slots=True)
class CoordinatorCluster:
    """The cluster as the coordinators see it (None on a lone broker)."""

    broker_id: int
    #: The live leader of a partition and its endpoint on a listener.
    partition_leader: PartitionLeaderLookup
    #: A topic's partition count in the cluster's metadata; None if it does not exist.
    partition_count: TopicPartitionCount
    #: The listener brokers talk to each other on (inter.broker.listener.name).
    inter_broker_listener: str
    #: That listener's TLS context when it is SSL; None for plain TCP.
    inter_broker_ssl_context: ssl.SSLContext | None = None
    #: The broker's own SASL credentials when that listener is SASL_*.
    inter_broker_sasl: SaslSettings | None = None


# -- the metadata cache, structurally (broker/cluster/metadata_cache.py implements these names) ------------
class _PartitionLeadership(Protocol):
    @property
    def leader_id(self) -> int: ...


class _Node(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...


class _Topic(Protocol):
    @property
    def partition_count(self) -> int: ...


class MetadataCacheView(Protocol):
    """What the coordinators read of a cluster member's metadata cache."""

    def get(self, name: str) -> _Topic | None: ...

    def partition_state(self, topic: str, partition: int) -> _PartitionLeadership | None: ...

    def leader_node(self, leader_id: int, listener_name: str) -> _Node | None: ...


def coordinator_cluster_from_cache(broker_id: int, cache: MetadataCacheView, inter_broker_listener: str,
                                   inter_broker_ssl_context: ssl.SSLContext | None = None,
                                   inter_broker_sasl: SaslSettings | None = None) -> CoordinatorCluster:
    """A :class:`CoordinatorCluster` over the broker's metadata cache. As Kafka's
    getPartitionLeaderEndpoint: no leader, a leader not alive, or one without the listener is none."""

    def partition_leader(topic: str, partition: int, listener_name: str) -> LeaderEndpoint | None:
        state = cache.partition_state(topic, partition)
        if state is None or state.leader_id < 0:
            return None
        node = cache.leader_node(state.leader_id, listener_name)
        return None if node is None else LeaderEndpoint(node.node_id, node.host, node.port)

    def partition_count(topic: str) -> int | None:
        found = cache.get(topic)
        return None if found is None else found.partition_count

    return CoordinatorCluster(broker_id, partition_leader, partition_count, inter_broker_listener,
                              inter_broker_ssl_context, inter_broker_sasl)
