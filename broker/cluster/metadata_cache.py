"""ZkMetadataCache: what a broker in a cluster knows of the whole cluster.

Kafka's ZooKeeper-mode brokers do not read topic metadata from ZooKeeper for
clients: the controller pushes it to every broker in UpdateMetadata requests,
and each broker answers Metadata, DescribeCluster, DescribeTopicPartitions
(and routes produce, fetch and coordinator lookups) from this cache. It holds:

* the live brokers, each with one endpoint per listener and its rack;
* the controller's id and epoch (the broker refuses an UpdateMetadata from an
  older controller epoch with STALE_CONTROLLER_EPOCH before it gets here);
* every partition's state: leader, leader epoch, ISR, replicas, offline
  replicas, and the partition epoch (zk version); a state whose leader is -2
  (LeaderDuringDelete) removes the partition;
* every topic's id, and its config overrides, which come from ZooKeeper's
  ``/config/topics/T`` (the controller's messages carry none).

An UpdateMetadata with no partition states (a broker joined or left) changes
only the brokers. Updates replace whole objects, so a reader on the event loop
always sees one consistent snapshot of each partition.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from broker.metadata_store import TopicMetadata
from broker.metadata_view import NO_CONTROLLER_ID, BrokerNode, PartitionStateView
from protocol.errors import ErrorCode
from protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

log = logging.getLogger(__name__)

#: LeaderAndIsr.LeaderDuringDelete: the controller's mark of a partition being deleted.
LEADER_DURING_DELETE = -2
ZERO_UUID = uuid.UUID(int=0)
#: SecurityProtocol ids on the wire.
SECURITY_PROTOCOL_NAMES = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
SECURITY_PROTOCOL_IDS = {name: id_ for id_, name in SECURITY_PROTOCOL_NAMES.items()}


class CachedPartitionState:
    """One partition's state as the controller last announced it (never mutated: replaced)."""

    __slots__ = (
        "__weakref__",
        "controller_epoch",
        "isr",
        "leader_epoch",
        "leader_id",
        "offline_replicas",
        "partition_epoch",
        "partition_index",
        "replicas",
        "topic",
    )

    def __init__(self, topic: str, partition_index: int, leader_id: int, leader_epoch: int, isr: list[int],
                 replicas: list[int], offline_replicas: list[int], partition_epoch: int,
                 controller_epoch: int) -> None:
        self.topic = topic
        self.partition_index = partition_index
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.replicas = replicas
        self.offline_replicas = offline_replicas
        self.partition_epoch = partition_epoch
        self.controller_epoch = controller_epoch

    def __repr__(self) -> str:
        return (f"CachedPartitionState({self.topic}-{self.partition_index}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={self.isr}, replicas={self.replicas})")


@dataclass(frozen=True, slots=True)
class CachedBroker:
    """A live broker: its endpoints by listener name (host, port, security protocol) and rack."""

    broker_id: int
    endpoints: dict[str, tuple[str, int, str]]
    rack: str | None

    def node(self, listener_name: str) -> BrokerNode | None:
        endpoint = self.endpoints.get(listener_name)
        if endpoint is None:
            return None
        return BrokerNode(self.broker_id, endpoint[0], endpoint[1], self.rack)


class ZkMetadataCache:
    """Topic registry and cluster view of a broker in a ZooKeeper-mode cluster."""

    is_cluster = True

    def __init__(self, broker_id: int, cluster_id: str = "") -> None:
        self.broker_id = broker_id
        self._cluster_id = cluster_id
        self._controller_id: int | None = None
        #: The highest controller epoch seen in an UpdateMetadata.
        self.controller_epoch = -1
        self.brokers: dict[int, CachedBroker] = {}
        self._reachable: dict[str, frozenset[int]] = {}
        #: topic -> partition index -> state; each topic's dict is replaced, never changed in place.
        self._partitions: dict[str, dict[int, CachedPartitionState]] = {}
        self._sorted: dict[str, list[CachedPartitionState]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._by_id: dict[uuid.UUID, str] = {}
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._topics: dict[str, TopicMetadata] = {}
        #: Bumped whenever ``_topics`` changes (TopicRegistry's).
        self.topics_version = 0
        #: Futures waiting for a topic to appear (or go) here: CreateTopics' DelayedCreatePartitions.
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    # -- TopicRegistry ----------------------------------------------------
    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @cluster_id.setter
    def cluster_id(self, value: str) -> None:
        self._cluster_id = value

    def get(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        name = self._by_id.get(topic_id)
        return self._topics.get(name) if name is not None else None

    def configs_of(self, name: str) -> dict[str, str]:
        return self._topic_configs.get(name, {})

    def __iter__(self) -> Iterator[TopicMetadata]:
        return iter(list(self._topics.values()))

    def __contains__(self, name: str) -> bool:
        return name in self._topics

    def topic_id_of(self, name: str) -> uuid.UUID:
        return self._topic_ids.get(name, ZERO_UUID)

    # -- ClusterView ------------------------------------------------------
    def alive_brokers(self, listener_name: str) -> list[BrokerNode]:
        """The live brokers reachable through this listener, by id (Kafka's getAliveBrokerNodes)."""
        nodes = []
        for broker_id in sorted(self.brokers):
            node = self.brokers[broker_id].node(listener_name)
            if node is not None:
                nodes.append(node)
        return nodes

    def reachable_broker_ids(self, listener_name: str) -> frozenset[int]:
        """The live brokers with an endpoint on this listener (computed once per update)."""
        ids = self._reachable.get(listener_name)
        if ids is None:
            ids = self._reachable[listener_name] = frozenset(
                b.broker_id for b in self.brokers.values() if listener_name in b.endpoints)
        return ids

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def has_alive_broker(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def controller_id(self) -> int:
        return self._controller_id if self._controller_id is not None else NO_CONTROLLER_ID

    def controller_node(self, listener_name: str) -> BrokerNode | None:
        """The controller's endpoint on this listener (None: unknown or not reachable there)."""
        if self._controller_id is None:
            return None
        broker = self.brokers.get(self._controller_id)
        return broker.node(listener_name) if broker is not None else None

    def partition_states(self, topic: str) -> Sequence[PartitionStateView]:
        return self._sorted.get(topic, [])

    def partition_state(self, topic: str, partition: int) -> CachedPartitionState | None:
        states = self._partitions.get(topic)
        return states.get(partition) if states is not None else None

    def offline_replicas(self, partition: PartitionStateView) -> list[int]:
        return partition.offline_replicas if isinstance(partition, CachedPartitionState) else []

    def leader_node(self, leader_id: int, listener_name: str) -> BrokerNode | None:
        broker = self.brokers.get(leader_id)
        return broker.node(listener_name) if broker is not None else None

    def unhosted_error(self, topic: str, partition: int) -> int:
        """Kafka's getPartitionOrError for a partition not hosted here: NOT_LEADER_OR_FOLLOWER when the
        cluster has it (the client refreshes its metadata), else UNKNOWN_TOPIC_OR_PARTITION."""
        if self.partition_state(topic, partition) is not None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def rack_of(self, broker_id: int) -> str | None:
        broker = self.brokers.get(broker_id)
        return broker.rack if broker is not None else None

    # -- UpdateMetadata -----------------------------------------------------
    def update_metadata(self, request: UpdateMetadataRequest, version: int) -> list[tuple[str, int]]:
        """Apply an UpdateMetadata; returns the partitions it deleted (Kafka's updateMetadata)."""
        self.controller_epoch = request.controller_epoch
        self._controller_id = request.controller_id if request.controller_id >= 0 else None
        self.brokers = {b.id: _cached_broker(b, version) for b in request.live_brokers}
        self._reachable = {}
        if version >= 5:
            states = [(t.topic_name, t.topic_id, s) for t in request.topic_states for s in t.partition_states]
            for t in request.topic_states:
                if t.topic_id != ZERO_UUID:
                    self._set_topic_id(t.topic_name, t.topic_id)
        else:
            states = [(s.topic_name, ZERO_UUID, s) for s in request.ungrouped_partition_states]
        deleted: list[tuple[str, int]] = []
        changed: dict[str, dict[int, CachedPartitionState]] = {}
        for topic, _, state in states:
            partitions = changed.get(topic)
            if partitions is None:
                partitions = changed[topic] = dict(self._partitions.get(topic, {}))
            if state.leader == LEADER_DURING_DELETE:
                if partitions.pop(state.partition_index, None) is not None:
                    deleted.append((topic, state.partition_index))
                continue
            partitions[state.partition_index] = _cached_state(topic, state, version)
        for topic, partitions in changed.items():
            self._replace_topic(topic, partitions)
        if changed or deleted:
            log.debug("[MetadataCache brokerId=%d] updated %d topic(s), deleted %d partition(s)",
                      self.broker_id, len(changed), len(deleted))
        self._wake_waiters()
        return deleted

    def _set_topic_id(self, topic: str, topic_id: uuid.UUID) -> None:
        old = self._topic_ids.get(topic)
        if old is not None and old != topic_id:
            self._by_id.pop(old, None)
        self._topic_ids[topic] = topic_id
        self._by_id[topic_id] = topic

    def _replace_topic(self, topic: str, partitions: dict[int, CachedPartitionState]) -> None:
        self.topics_version += 1
        if not partitions:
            self._partitions.pop(topic, None)
            self._sorted.pop(topic, None)
            self._topics.pop(topic, None)
            topic_id = self._topic_ids.pop(topic, None)
            if topic_id is not None:
                self._by_id.pop(topic_id, None)
            return
        self._partitions[topic] = partitions
        self._sorted[topic] = [partitions[p] for p in sorted(partitions)]
        self._topics[topic] = TopicMetadata(
            topic, self._topic_ids.get(topic, ZERO_UUID), {p: s.replicas for p, s in sorted(partitions.items())},
            self._topic_configs.get(topic, {}))

    # -- topic configs (from /config/topics, not from the controller) --------
    def set_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        self._topic_configs[topic] = dict(configs)
        known = self._topics.get(topic)
        if known is not None:
            known.configs = dict(configs)
        self._wake_waiters()  # a created topic is ready once its overrides are known too

    def remove_topic_configs(self, topic: str) -> None:
        self._topic_configs.pop(topic, None)

    def has_topic_configs(self, topic: str) -> bool:
        """Whether the topic's overrides (possibly none) were read from ZooKeeper."""
        return topic in self._topic_configs

    # -- waiting for the controller's word ---------------------------------
    async def wait_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until an UpdateMetadata makes ``condition`` true (Kafka's delayed topic operations);
        False when ``timeout_s`` passes first."""
        if condition():
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (condition, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
            return True
        except TimeoutError:
            return condition()
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def _wake_waiters(self) -> None:
        for condition, future in list(self._waiters):
            if not future.done() and condition():
                future.set_result(None)


def _cached_broker(broker: UpdateMetadataBroker, version: int) -> CachedBroker:
    if version == 0:
        endpoints = {"PLAINTEXT": (broker.v0_host, broker.v0_port, "PLAINTEXT")}
    else:
        endpoints = {}
        for e in broker.endpoints:
            protocol = SECURITY_PROTOCOL_NAMES.get(e.security_protocol, str(e.security_protocol))
            # Before v3 an endpoint's listener is named after its security protocol.
            name = e.listener if version >= 3 and e.listener else protocol
            endpoints[name] = (e.host, e.port, protocol)
    return CachedBroker(broker.id, endpoints, broker.rack if version >= 2 else None)


def _cached_state(topic: str, state: UpdateMetadataPartitionState, version: int) -> CachedPartitionState:
    return CachedPartitionState(
        topic, state.partition_index, state.leader, state.leader_epoch, list(state.isr), list(state.replicas),
        list(state.offline_replicas) if version >= 4 else [], state.zk_version, state.controller_epoch)
