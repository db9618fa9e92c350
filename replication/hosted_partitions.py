"""The partitions this broker hosts (Kafka's ReplicaManager.allPartitions).

Owned by the :class:`~replication.replica_manager.ReplicaManager`, handed to
each collaborator that looks partitions up. LeaderAndIsr and StopReplica change
it on the event loop; a lone broker's topic creation and deletion on the append
thread. Every change is a few single dict operations (each atomic under the
GIL), so lookups take no lock; the append thread reads it to tell a deleted
partition from a failed append.
"""

from __future__ import annotations

from replication.partition import Partition

TopicPartition = tuple[str, int]


class HostedPartitions:
    def __init__(self) -> None:
        #: Every hosted partition by (topic, index).
        self.by_tp: dict[TopicPartition, Partition] = {}
        #: The same partitions by topic, in index order: Metadata, DescribeTopicPartitions and
        #: FindCoordinator list one topic's partitions without walking every partition hosted.
        self._by_topic: dict[str, dict[int, Partition]] = {}

    def get(self, tp: TopicPartition) -> Partition | None:
        return self.by_tp.get(tp)

    def __contains__(self, tp: TopicPartition) -> bool:
        return tp in self.by_tp

    def of_topic(self, topic: str) -> list[Partition]:
        return list(self._by_topic.get(topic, {}).values())

    def add(self, partition: Partition) -> None:
        """Host ``partition`` (its log exists); index it by topic."""
        topic, partition_index = partition.topic, partition.partition_index
        self.by_tp[(topic, partition_index)] = partition
        by_index = self._by_topic.setdefault(topic, {})
        out_of_order = bool(by_index) and partition_index < next(reversed(by_index))
        by_index[partition_index] = partition
        if out_of_order:
            self._by_topic[topic] = dict(sorted(by_index.items()))

    def remove(self, topic: str, partition_index: int) -> Partition | None:
        """Stop hosting a partition (its log stays unless the caller deletes it)."""
        partition = self.by_tp.pop((topic, partition_index), None)
        by_index = self._by_topic.get(topic)
        if by_index is not None:
            by_index.pop(partition_index, None)
            if not by_index:
                del self._by_topic[topic]
        return partition

    def remove_topic(self, topic: str) -> list[int]:
        """Stop hosting every partition of ``topic``; their indexes, in order."""
        indexes = list(self._by_topic.pop(topic, {}))
        for index in indexes:
            del self.by_tp[(topic, index)]
        return indexes
