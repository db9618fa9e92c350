"""The cluster as a Metadata response describes it: brokers, topics, leaders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple
from uuid import UUID

from protocol.messages.metadata import MetadataResponse
from protocol.primitives import UUID_ZERO


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    error_code: int = 0


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: UUID
    is_internal: bool
    error_code: int
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)

    @property
    def has_topic_id(self) -> bool:
        return self.topic_id != UUID_ZERO


@dataclass(slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerMetadata]
    topics: dict[str, TopicMetadata]

    @classmethod
    def from_response(cls, response: MetadataResponse) -> ClusterMetadata:
        brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
        topics = {}
        for t in response.topics:
            if t.name is None:
                continue  # v12+ may answer a topic-id lookup without a name; we never ask by id
            topic = TopicMetadata(t.name, t.topic_id, t.is_internal, t.error_code)
            for p in t.partitions:
                topic.partitions[p.partition_index] = PartitionMetadata(
                    topic=t.name,
                    partition=p.partition_index,
                    leader=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    replicas=list(p.replica_nodes),
                    isr=list(p.isr_nodes),
                    offline_replicas=list(p.offline_replicas),
                    error_code=p.error_code,
                )
            topics[t.name] = topic
        return cls(response.cluster_id, response.controller_id, brokers, topics)
