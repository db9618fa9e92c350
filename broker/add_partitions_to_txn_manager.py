"""AddPartitionsToTxnManager: partition leaders verify transactional produces with the coordinator.

Kafka's AddPartitionsToTxnManager sends AddPartitionsToTxn v4+ verify-only
requests to the broker coordinating a transactional id (the leader of its
``__transaction_state`` partition). On a lone broker that is this broker, so
the request goes where the AddPartitionsToTxn handler sends a verify-only
transaction: ``TransactionCoordinator.verify_partitions_in_transaction``. In a
cluster :class:`AddPartitionsToTxnManager` sends the others, as Kafka does, to
the coordinator's broker (the leader of the id's ``__transaction_state``
partition, on the inter-broker listener): AddPartitionsToTxn v5, one
connection per coordinator broker. A coordinator that cannot be reached
answers NETWORK_EXCEPTION / COORDINATOR_NOT_AVAILABLE, which the replica
manager turns into a retriable error for the producer
(``replication.txn_verification``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Sequence

from client.async_connection import AsyncBrokerConnection
from client.errors import KafkaClientError
from client.sasl import SaslSettings
from coordinator.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from coordinator.common.partition_leader import PartitionLeaderLookup
from coordinator.transaction.transaction_coordinator import TransactionCoordinator
from coordinator.transaction.transaction_metadata import TV_2
from protocol.errors import ErrorCode
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: The batched, broker-to-broker form (v4+); v5 passes TRANSACTION_ABORTABLE through.
ADD_PARTITIONS_TO_TXN_VERSION = 5
#: Kafka's request.timeout.ms default for inter-broker requests.
REQUEST_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0


class LocalAddPartitionsToTxnManager:
    """A :class:`~replication.txn_verification.TransactionVerifier` for a lone broker."""

    def __init__(self, broker_id: int, replica_manager: ReplicaManager, coordinator: TransactionCoordinator) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.coordinator = coordinator

    async def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Sequence[TopicPartition], add_partitions: bool = False
                       ) -> dict[TopicPartition, int]:
        if self._coordinator_of(transactional_id) != self.broker_id:
            # No __transaction_state (no transaction ever began) or its leader is elsewhere.
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if add_partitions:  # AddPartitionsToTxn v5, not verify-only, with transaction version 2
            error = await self.coordinator.handle_add_partitions_to_transaction(
                transactional_id, producer_id, producer_epoch, set(partitions), client_transaction_version=TV_2)
            return dict.fromkeys(partitions, error)
        errors = self.coordinator.verify_partitions_in_transaction(transactional_id, producer_id, producer_epoch,
                                                                   set(partitions))
        return dict(errors)

    async def shutdown(self) -> None:
        """Nothing to close: the coordinator is in this process."""

    def _coordinator_of(self, transactional_id: str) -> int | None:
        partition = self.coordinator.txn_manager.partition_for(transactional_id)
        hosted = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC_NAME, partition)
        return self.broker_id if hosted is not None and hosted.is_leader else None


class AddPartitionsToTxnManager:
    """A :class:`~replication.txn_verification.TransactionVerifier` for a cluster: a coordinator on this
    broker is asked directly (:class:`LocalAddPartitionsToTxnManager`), one elsewhere over the network."""

    def __init__(self, local: LocalAddPartitionsToTxnManager, partition_leader: PartitionLeaderLookup,
                 listener_name: str, ssl_context: ssl.SSLContext | None = None,
                 sasl: SaslSettings | None = None) -> None:
        """``ssl_context``: TLS to other brokers (an SSL inter-broker listener); None for plain TCP.
        ``sasl``: the broker's credentials when the inter-broker listener is a SASL one."""
        self.local = local
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.broker_id = local.broker_id
        self.partition_leader = partition_leader
        self.listener_name = listener_name
        self._connections: dict[int, AsyncBrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future[AsyncBrokerConnection]] = {}
        self._closed = False

    async def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Sequence[TopicPartition], add_partitions: bool = False
                       ) -> dict[TopicPartition, int]:
        if self.local._coordinator_of(transactional_id) == self.broker_id:
            return await self.local(transactional_id, producer_id, producer_epoch, partitions, add_partitions)
        partition = self.local.coordinator.txn_manager.partition_for(transactional_id)
        leader = self.partition_leader(TRANSACTION_STATE_TOPIC_NAME, partition, self.listener_name)
        if leader is None or leader.node_id < 0 or leader.node_id == self.broker_id or self._closed:
            # No leader known (or the metadata says here, but the replica is not leader yet): retried.
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=not add_partitions,
            topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])])
        try:
            connection = await self._connection(leader.node_id, leader.host, leader.port)
            response = await connection.request(request, version=ADD_PARTITIONS_TO_TXN_VERSION,
                                                timeout=REQUEST_TIMEOUT_S)
        except (KafkaClientError, OSError) as exc:
            log.info("[AddPartitionsToTxnManager broker=%d] verifying %s with broker %d failed: %s",
                     self.broker_id, transactional_id, leader.node_id, exc)
            self._drop(leader.node_id)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        assert isinstance(response, AddPartitionsToTxnResponse)
        return _errors_of(response, transactional_id, partitions)

    async def _connection(self, node_id: int, host: str, port: int) -> AsyncBrokerConnection:
        existing = self._connections.get(node_id)
        if existing is not None and existing.connected and (existing.address.host, existing.address.port) == (host, port):
            return existing
        self._drop(node_id)
        pending = self._connecting.get(node_id)
        if pending is None:
            pending = asyncio.ensure_future(self._connect(node_id, host, port))
            self._connecting[node_id] = pending
            pending.add_done_callback(lambda _f: self._connecting.pop(node_id, None))
        return await asyncio.shield(pending)

    async def _connect(self, node_id: int, host: str, port: int) -> AsyncBrokerConnection:
        connection = AsyncBrokerConnection(host, port, client_id=f"broker-{self.broker_id}-txn-verifier",
                                           node_id=node_id, request_timeout=REQUEST_TIMEOUT_S,
                                           ssl_context=self.ssl_context, sasl=self.sasl)
        await connection.connect(timeout=CONNECT_TIMEOUT_S, negotiate=False)
        if self._closed:
            connection.close()
            raise ConnectionError("shut down")
        self._connections[node_id] = connection
        return connection

    def _drop(self, node_id: int) -> None:
        connection = self._connections.pop(node_id, None)
        if connection is not None:
            connection.close()

    async def shutdown(self) -> None:
        self._closed = True
        for pending in list(self._connecting.values()):
            pending.cancel()
        await asyncio.gather(*self._connecting.values(), return_exceptions=True)
        for node_id in list(self._connections):
            self._drop(node_id)


def _errors_of(response: AddPartitionsToTxnResponse, transactional_id: str,
               partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    """The coordinator's answer per partition; the top-level error (v4+) applies to all of them."""
    if response.error_code != ErrorCode.NO_ERROR:
        return dict.fromkeys(partitions, response.error_code)
    answered: dict[TopicPartition, int] = {}
    for result in response.results_by_transaction:
        if result.transactional_id != transactional_id:
            continue
        for topic in result.topic_results:
            for p in topic.results_by_partition:
                answered[(topic.name, p.partition_index)] = p.partition_error_code
    # A partition the coordinator did not answer for is not verified.
    return {tp: answered.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in partitions}
