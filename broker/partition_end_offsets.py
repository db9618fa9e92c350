"""The end offset of any topic partition, wherever its leader is: what the share groups' lag needs.

KIP-1226's lag of a share partition runs to the partition's end (its high
watermark, ListOffsets' LATEST). The group coordinator that describes a share
group's offsets is seldom the leader of every partition, so, as Kafka's group
coordinator asks the leaders, a partition this broker leads is read here and
any other is asked of its leader with ListOffsets on the inter-broker listener
(its own :class:`~broker.inter_broker_channel.InterBrokerChannel`). None when
the end cannot be had: the lag is then unknown (-1).
"""

from __future__ import annotations

import logging

from broker.inter_broker_channel import REQUEST_TIMEOUT_S, InterBrokerChannel
from broker.metadata_view import ClusterView
from client.errors import KafkaClientError
from protocol.errors import ErrorCode
from protocol.messages import list_offsets as _lo
from protocol.request_constants import LATEST_TIMESTAMP
from replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class PartitionEndOffsets:
    """``end_offset(topic, partition)``: the high watermark here or at the partition's leader."""

    def __init__(self, broker_id: int, replica_manager: ReplicaManager, cluster_view: ClusterView,
                 channel: InterBrokerChannel) -> None:
        """``channel``: negotiating versions on connecting (ListOffsets is sent at the leader's newest);
        shut down by :meth:`shutdown`."""
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.cluster_view = cluster_view
        self.channel = channel

    async def end_offset(self, topic: str, partition: int) -> int | None:
        hosted = self.replica_manager.get_partition(topic, partition)
        if hosted is not None and hosted.is_leader:
            return hosted.high_watermark
        state = next((p for p in self.cluster_view.partition_states(topic) if p.partition_index == partition), None)
        if state is None or state.leader_id < 0 or state.leader_id == self.broker_id:
            return None
        try:
            return await self._ask_leader(state.leader_id, topic, partition)
        except (KafkaClientError, OSError) as exc:  # a timeout is an OSError
            log.debug("[PartitionEndOffsets %d] %s-%d: the end offset from broker %d failed: %s", self.broker_id,
                      topic, partition, state.leader_id, exc)
            return None

    async def _ask_leader(self, leader_id: int, topic: str, partition: int) -> int | None:
        request = _lo.ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=int(REQUEST_TIMEOUT_S * 1000),
                                         topics=[_lo.ListOffsetsTopic(name=topic, partitions=[
                                             _lo.ListOffsetsPartition(partition_index=partition,
                                                                      current_leader_epoch=-1,
                                                                      timestamp=LATEST_TIMESTAMP)])])
        response = await self.channel.request(leader_id, request)  # at the version negotiated
        assert isinstance(response, _lo.ListOffsetsResponse)
        answer = next((p for t in response.topics for p in t.partitions), None)
        if answer is None or answer.error_code != ErrorCode.NO_ERROR or answer.offset < 0:
            return None
        return int(answer.offset)

    async def shutdown(self) -> None:
        await self.channel.shutdown()
