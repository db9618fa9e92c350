"""What the active controller knows about the cluster: Kafka's ControllerContext.

Rebuilt from ZooKeeper when a broker becomes controller and kept current by the
controller's events; only the controller's event loop task touches it, so it needs
no locks. Topic-partitions are ``(topic, partition)`` tuples.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from controller.zk.zk_data import BrokerInfo, LeaderIsrAndControllerEpoch

__all__ = [
    "ControllerContext",
    "PartitionReplica",
    "PartitionState",
    "ReplicaAssignment",
    "ReplicaState",
    "TopicPartition",
]

TopicPartition = tuple[str, int]


class PartitionState(enum.Enum):
    """Kafka's PartitionState."""

    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"


class ReplicaState(enum.Enum):
    """Kafka's ReplicaState."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


@dataclass(frozen=True, slots=True)
class PartitionReplica:
    """One replica of one partition: Kafka's PartitionAndReplica."""

    topic: str
    partition: int
    replica: int

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas, and those a reassignment adds or removes."""

    replicas: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


class ControllerContext:
    """The controller's cache of brokers, topics, assignments, leadership and states."""

    def __init__(self) -> None:
        self.epoch = 0
        self.epoch_zk_version = 0
        #: Registered brokers (including those shutting down) and their epochs.
        self.live_brokers: dict[int, BrokerInfo] = {}
        self.live_broker_epochs: dict[int, int] = {}
        #: Brokers in controlled shutdown: registered, but no longer leader candidates.
        self.shutting_down_broker_ids: set[int] = set()
        self.all_topics: set[str] = set()
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.partition_assignments: dict[str, dict[int, ReplicaAssignment]] = {}
        self.partition_leadership_info: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.replica_states: dict[PartitionReplica, ReplicaState] = {}
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()
        #: Per broker, the partitions whose replica there sits in a failed log directory.
        self.replicas_on_offline_dirs: dict[int, set[TopicPartition]] = {}

    # ------------------------------------------------------------ brokers

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers that may lead or join an ISR: registered and not shutting down."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    def add_live_brokers(self, brokers: Iterable[BrokerInfo]) -> None:
        for broker in brokers:
            self.live_brokers[broker.id] = broker
            self.live_broker_epochs[broker.id] = broker.epoch

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            # A broker that comes back has its directories back (or reports them again).
            self.replicas_on_offline_dirs.pop(broker_id, None)
            self.live_brokers.pop(broker_id, None)
            self.live_broker_epochs.pop(broker_id, None)
            self.shutting_down_broker_ids.discard(broker_id)

    def is_replica_online(self, broker_id: int, include_shutting_down: bool = False,
                          tp: TopicPartition | None = None) -> bool:
        """The broker is live (and, given ``tp``, that partition's replica there is not in a failed log dir)."""
        live = self.live_or_shutting_down_broker_ids if include_shutting_down else self.live_broker_ids
        if broker_id not in live:
            return False
        return tp is None or tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    # ------------------------------------------------------------ topics and assignments

    def add_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        self.all_topics.add(topic)
        self.topic_ids[topic] = topic_id

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic and everything about its partitions and replicas."""
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)
        for partition in self.partition_assignments.pop(topic, {}):
            tp = (topic, partition)
            self.partition_leadership_info.pop(tp, None)
            self.partition_states.pop(tp, None)
        for replica in [r for r in self.replica_states if r.topic == topic]:
            del self.replica_states[replica]
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    def update_partition_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.partition_assignments.setdefault(tp[0], {})[tp[1]] = assignment

    def partition_replica_assignment(self, tp: TopicPartition) -> list[int]:
        assignment = self.partition_assignments.get(tp[0], {}).get(tp[1])
        return list(assignment.replicas) if assignment is not None else []

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [(topic, p) for p in sorted(self.partition_assignments.get(topic, {}))]

    def all_partitions(self) -> Iterator[TopicPartition]:
        for topic, partitions in self.partition_assignments.items():
            for partition in partitions:
                yield (topic, partition)

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.partition_replica_assignment(tp)]

    def replicas_on_brokers(self, broker_ids: set[int]) -> list[PartitionReplica]:
        return [
            PartitionReplica(tp[0], tp[1], replica)
            for tp in self.all_partitions()
            for replica in self.partition_replica_assignment(tp)
            if replica in broker_ids
        ]

    def replicas_for_partitions(self, tps: Iterable[TopicPartition]) -> list[PartitionReplica]:
        return [PartitionReplica(tp[0], tp[1], r) for tp in tps for r in self.partition_replica_assignment(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, info in self.partition_leadership_info.items() if info.leader_and_isr.leader == broker_id]

    # ------------------------------------------------------------ states

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def replica_state(self, replica: PartitionReplica) -> ReplicaState:
        return self.replica_states.get(replica, ReplicaState.NON_EXISTENT)

    def partitions_in_states(self, states: set[PartitionState]) -> list[TopicPartition]:
        return [tp for tp, state in self.partition_states.items() if state in states]

    def offline_partition_count(self) -> int:
        return sum(1 for s in self.partition_states.values() if s in (PartitionState.OFFLINE, PartitionState.NEW))

    # ------------------------------------------------------------ deletion

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started

    def reset(self) -> None:
        """Forget everything (the controller resigned)."""
        self.__init__()  # type: ignore[misc]
