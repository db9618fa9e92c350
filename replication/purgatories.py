"""The two purgatories, and what wakes them when a partition's state moves.

Owned by the :class:`~replication.replica_manager.ReplicaManager`; appends,
follower fetches, ISR changes and the controller's state changes all wake them
through here. Event loop only.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from replication.delayed_fetch import FetchPurgatory
from replication.delayed_produce import ProducePurgatory
from replication.hosted_partitions import HostedPartitions

TopicPartition = tuple[str, int]


class Purgatories:
    def __init__(self, hosted: HostedPartitions) -> None:
        self._hosted = hosted
        #: Long polls, woken by every append whoever appended (delayed_fetch).
        self.fetch = FetchPurgatory()
        #: ``acks=-1`` produces waiting for the high watermark (delayed_produce).
        self.produce = ProducePurgatory(self._check_enough_replicas)

    def _check_enough_replicas(self, tp: TopicPartition, required_offset: int) -> tuple[bool, int]:
        partition = self._hosted.get(tp)
        if partition is None:
            return False, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return partition.check_enough_replicas_reach_offset(required_offset)

    def high_watermark_advanced(self, tp: TopicPartition) -> None:
        """A partition's high watermark moved (a follower caught up): complete what waits on it."""
        self.produce.check_and_complete(tp)
        self.fetch.notify_high_watermark(tp)

    def leadership_moved(self, tp: TopicPartition) -> None:
        """The partition is no longer led here (a follower now, or stopped): waiting produces end
        (NOT_LEADER_OR_FOLLOWER or their partition's error), parked fetches read again to find out."""
        self.produce.check_and_complete(tp)
        self.fetch.notify(tp)

    def shutdown(self) -> None:
        """Answer parked fetches and produces now, so shutdown does not wait them out."""
        self.fetch.shutdown()
        self.produce.shutdown()
