"""The coordinators in a cluster: where a coordinator is, and creating its internal topic.

On a lone broker every partition is led here and the internal topics are
created on the append thread (``handlers/find_coordinator``). In a cluster
(``zookeeper.connect`` set) the broker passes a :class:`CoordinatorCluster`:
the cluster's metadata as narrow callables (its metadata cache implements
them) and a way to create a topic (AdminZkClient). Then, as Kafka's
KafkaApis.getCoordinator does:

- FindCoordinator maps the key to its partition and answers that partition's
  leader, on the listener the client used; COORDINATOR_NOT_AVAILABLE while the
  partition has no live leader;
- an internal topic that does not exist yet is created with
  ``offsets.topic.num.partitions`` / ``offsets.topic.replication.factor``
  (``transaction.state.log.*`` for ``__transaction_state``) and its compacted
  configs, and the request is answered COORDINATOR_NOT_AVAILABLE (the client
  retries and finds the new leader); while fewer brokers are alive than the
  replication factor nothing is created, as Kafka refuses it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker.config.broker_config import BrokerConfig
from coordinator.common.internal_topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from coordinator.common.partition_leader import LeaderEndpoint, PartitionLeaderLookup, TopicPartitionCount
from coordinator.transaction.transaction_state_manager import transaction_topic_configs
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: Creates a topic in the cluster: (name, partitions, replication factor, configs). It may raise or return
#: an error (TopicExists included: a concurrent creation won, which is fine): either way the topic is
#: there once the metadata shows it, and until then FindCoordinator answers COORDINATOR_NOT_AVAILABLE.
InternalTopicCreator = Callable[[str, int, int, dict[str, str]], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class InternalTopicSpec:
    partitions: int
    replication_factor: int
    configs: dict[str, str]


def internal_topic_spec(config: BrokerConfig, name: str) -> InternalTopicSpec:
    """How Kafka creates its internal topics (GroupMetadataManager.offsetsTopicConfigs,
    TransactionStateManager.transactionTopicConfigs), with the configured replication factor."""
    if name == GROUP_METADATA_TOPIC_NAME:
        return InternalTopicSpec(config.offsets_topic_num_partitions, config.offsets_topic_replication_factor, {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(config.offsets_topic_segment_bytes)})
    if name == TRANSACTION_STATE_TOPIC_NAME:
        return InternalTopicSpec(
            config.transaction_state_log_num_partitions, config.transaction_state_log_replication_factor,
            transaction_topic_configs(config.transaction_state_log_min_isr, config.transaction_state_log_segment_bytes))
    raise ValueError(f"{name} is not an internal topic")


@dataclass(slots=True)
class CoordinatorCluster:
    """What the coordinators need from the cluster (cluster mode only; None on a lone broker)."""

    broker_id: int
    #: The broker's current config (dynamic values on top).
    config: Callable[[], BrokerConfig]
    #: The live leader of a partition and its endpoint on a listener (the metadata cache).
    partition_leader: PartitionLeaderLookup
    #: A topic's partition count in the cluster's metadata; None if it does not exist.
    partition_count: TopicPartitionCount
    #: How many brokers are alive (registered) now.
    alive_broker_count: Callable[[], int]
    create_topic: InternalTopicCreator
    #: The listener brokers talk to each other on (inter.broker.listener.name).
    inter_broker_listener: str
    _creating: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    async def ensure_internal_topic(self, name: str) -> ErrorCode:
        """NO_ERROR if ``name`` exists; otherwise start creating it and answer COORDINATOR_NOT_AVAILABLE."""
        if self.partition_count(name) is not None:
            return ErrorCode.NO_ERROR
        if name in self._creating:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        spec = internal_topic_spec(self.config(), name)
        alive = self.alive_broker_count()
        if alive < spec.replication_factor:
            setting = ("offsets.topic.replication.factor" if name == GROUP_METADATA_TOPIC_NAME
                       else "transaction.state.log.replication.factor")
            log.warning("[KafkaApi-%d] Number of alive brokers '%d' does not meet the required replication factor "
                        "'%d' for the internal topic %s (configured via '%s'). This error can be ignored if the "
                        "cluster is starting up and not all brokers are up yet.", self.broker_id, alive,
                        spec.replication_factor, name, setting)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        task = asyncio.get_running_loop().create_task(self._create(name, spec), name=f"create-{name}")
        self._creating[name] = task
        task.add_done_callback(lambda _t: self._creating.pop(name, None))
        # Answered at once, as Kafka does: the topic needs its leaders before anyone can coordinate.
        return ErrorCode.COORDINATOR_NOT_AVAILABLE

    async def _create(self, name: str, spec: InternalTopicSpec) -> None:
        try:
            outcome = await self.create_topic(name, spec.partitions, spec.replication_factor, dict(spec.configs))
            log.info("[KafkaApi-%d] creating %s with %d partitions, replication factor %d: %s", self.broker_id,
                     name, spec.partitions, spec.replication_factor, outcome)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a concurrent creation (TopicExists) or ZooKeeper trouble: the client retries
            log.info("[KafkaApi-%d] creating %s: %r", self.broker_id, name, exc)

    def coordinator_endpoint(self, topic: str, partition: int, listener_name: str) -> LeaderEndpoint | None:
        """The leader of the coordinator's partition on the client's listener; None if it has none now."""
        leader = self.partition_leader(topic, partition, listener_name)
        return leader if leader is not None and leader.node_id >= 0 else None

    async def shutdown(self) -> None:
        tasks = list(self._creating.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# -- the metadata cache, structurally (broker/metadata_cache.py implements these names) ------------
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
    """What the coordinators read of a cluster member's metadata cache (fed by UpdateMetadata)."""

    def get(self, name: str) -> _Topic | None: ...

    def partition_state(self, topic: str, partition: int) -> _PartitionLeadership | None: ...

    def leader_node(self, leader_id: int, listener_name: str) -> _Node | None: ...

    def alive_broker_ids(self) -> list[int]: ...


def coordinator_cluster_from_cache(broker_id: int, config: Callable[[], BrokerConfig], cache: MetadataCacheView,
                                   create_topic: InternalTopicCreator,
                                   inter_broker_listener: str) -> CoordinatorCluster:
    """A :class:`CoordinatorCluster` reading the broker's metadata cache (Kafka's
    MetadataCache.getPartitionLeaderEndpoint: a leader without the listener, or not alive, is none)."""

    def partition_leader(topic: str, partition: int, listener_name: str) -> LeaderEndpoint | None:
        state = cache.partition_state(topic, partition)
        if state is None or state.leader_id < 0:
            return None
        node = cache.leader_node(state.leader_id, listener_name)
        return None if node is None else LeaderEndpoint(node.node_id, node.host, node.port)

    def partition_count(topic: str) -> int | None:
        found = cache.get(topic)
        return None if found is None else found.partition_count

    return CoordinatorCluster(broker_id=broker_id, config=config, partition_leader=partition_leader,
                              partition_count=partition_count,
                              alive_broker_count=lambda: len(cache.alive_broker_ids()),
                              create_topic=create_topic, inter_broker_listener=inter_broker_listener)
