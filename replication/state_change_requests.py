"""What the controller's LeaderAndIsr and StopReplica ask of the replica manager, whatever
their wire versions.

The requests' handlers turn each version's shape (LeaderAndIsr: v0-v1 list
partition states ungrouped, v2+ group them by topic, v5+ with topic ids;
StopReplica: v0 one list, v1-v2 by topic, v3+ per-partition epochs and delete
flags) into :class:`LeaderAndIsrStates` and :class:`StopReplicaStates`, and the
results back into the version's response; replication never sees a wire version.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState

TopicPartition = tuple[str, int]
#: A topic id the request's version does not carry (below v5), or an unknown one.
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """Where a leader's replicas fetch from (LeaderAndIsr's live leaders)."""

    broker_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition's state as the controller decided it."""

    topic: str
    #: ZERO_UUID when the request's version carries no topic ids.
    topic_id: uuid.UUID
    state: LeaderAndIsrPartitionState

    @property
    def tp(self) -> TopicPartition:
        return self.topic, self.state.partition_index


@dataclass(slots=True)
class LeaderAndIsrStates:
    """A LeaderAndIsr request: the controller that sent it and the states it orders, in request order."""

    controller_id: int
    controller_epoch: int
    partition_states: list[PartitionState]
    #: The leaders' endpoints by broker id (followers fetch from them).
    live_leaders: dict[int, BrokerEndpoint] = field(default_factory=dict)


@dataclass(slots=True)
class LeaderAndIsrResult:
    """The answer: a request-wide error code and one error code per partition, in request order."""

    error_code: int
    errors: dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class StopReplicaPartition:
    """One partition a StopReplica names: the leader epoch the controller knew (or a sentinel)
    and whether to delete it."""

    topic: str
    partition_index: int
    leader_epoch: int
    delete: bool

    @property
    def tp(self) -> TopicPartition:
        return self.topic, self.partition_index


@dataclass(slots=True)
class StopReplicaStates:
    """A StopReplica request, whatever its version: the controller and the partitions, in request order."""

    controller_id: int
    controller_epoch: int
    partitions: list[StopReplicaPartition]


@dataclass(slots=True)
class StopReplicaResult:
    """The answer: a request-wide error code and one error code per partition, in request order."""

    error_code: int
    errors: dict[TopicPartition, int]
