"""The end offset of any topic partition, wherever its leader is: what the share groups' lag needs.

KIP-1226's lag of a share partition runs to the partition's end (its high
watermark, ListOffsets' LATEST). The group coordinator that describes a share
group's offsets is seldom the leader of every partition, so, as Kafka's group
coordinator asks the leaders, a partition this broker leads is read here and
any other is asked of its leader with ListOffsets on the inter-broker listener
(one connection per broker, opened on first use, dropped when it fails). None
when the end cannot be had: the lag is then unknown (-1).
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from broker.cluster.coordinator_cluster import CoordinatorCluster
from broker.config.broker_config import BrokerConfig
from broker.metadata_view import ClusterView
from client.async_connection import AsyncBrokerConnection
from client.errors import KafkaClientError
from client.sasl import SaslSettings
from protocol.errors import ErrorCode
from protocol.messages import list_offsets as _lo
from protocol.request_constants import LATEST_TIMESTAMP
from replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0


class PartitionEndOffsets:
    """``end_offset(topic, partition)``: the high watermark here or at the partition's leader."""

    def __init__(self, broker_id: int, replica_manager: ReplicaManager, cluster_view: ClusterView,
                 listener_name: str, *, ssl_context: ssl.SSLContext | None = None,
                 sasl: SaslSettings | None = None) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.cluster_view = cluster_view
        self.listener_name = listener_name
        self.ssl_context = ssl_context
        self.sasl = sasl
        self._connections: dict[int, AsyncBrokerConnection] = {}
        self._connecting = asyncio.Lock()

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
            self._drop(state.leader_id)
            return None

    async def _ask_leader(self, leader_id: int, topic: str, partition: int) -> int | None:
        connection = await self._connection(leader_id)
        if connection is None:
            return None
        request = _lo.ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=int(REQUEST_TIMEOUT_S * 1000),
                                         topics=[_lo.ListOffsetsTopic(name=topic, partitions=[
                                             _lo.ListOffsetsPartition(partition_index=partition,
                                                                      current_leader_epoch=-1,
                                                                      timestamp=LATEST_TIMESTAMP)])])
        response = await connection.request(request, version=connection.version_for(_lo.API_KEY),
                                            timeout=REQUEST_TIMEOUT_S)
        assert isinstance(response, _lo.ListOffsetsResponse)
        answer = next((p for t in response.topics for p in t.partitions), None)
        if answer is None or answer.error_code != ErrorCode.NO_ERROR or answer.offset < 0:
            return None
        return int(answer.offset)

    async def _connection(self, node_id: int) -> AsyncBrokerConnection | None:
        async with self._connecting:
            existing = self._connections.get(node_id)
            if existing is not None and existing.connected:
                return existing
            node = self.cluster_view.leader_node(node_id, self.listener_name)
            if node is None:
                return None
            connection = AsyncBrokerConnection(node.host, node.port, client_id=f"broker-{self.broker_id}-end-offsets",
                                               node_id=node_id, request_timeout=REQUEST_TIMEOUT_S,
                                               ssl_context=self.ssl_context, sasl=self.sasl)
            await connection.connect(timeout=CONNECT_TIMEOUT_S)
            self._connections[node_id] = connection
            return connection

    def _drop(self, node_id: int) -> None:
        connection = self._connections.pop(node_id, None)
        if connection is not None:
            connection.close()

    def shutdown(self) -> None:
        for node_id in list(self._connections):
            self._drop(node_id)


def build_partition_end_offsets(config: BrokerConfig, broker_id: int, replica_manager: ReplicaManager,
                                cluster_view: ClusterView, cluster: CoordinatorCluster | None) -> PartitionEndOffsets:
    """On the inter-broker listener, with its TLS and SASL settings in a cluster (a lone broker asks no one)."""
    return PartitionEndOffsets(
        broker_id, replica_manager, cluster_view,
        config.inter_broker_listener if cluster is None else cluster.inter_broker_listener,
        ssl_context=None if cluster is None else cluster.inter_broker_ssl_context,
        sasl=None if cluster is None else cluster.inter_broker_sasl)
