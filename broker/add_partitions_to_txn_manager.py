"""AddPartitionsToTxnManager: partition leaders verify transactional produces with the coordinator.

Kafka's AddPartitionsToTxnManager sends AddPartitionsToTxn v4+ verify-only
requests to the broker coordinating a transactional id (the leader of its
``__transaction_state`` partition). On a lone broker that is this broker, so
the request goes where the AddPartitionsToTxn handler sends a verify-only
transaction: ``TransactionCoordinator.verify_partitions_in_transaction``.
:class:`AddPartitionsToTxnManager` sends the others (in a cluster), as Kafka does, to
the coordinator's broker (the leader of the id's ``__transaction_state``
partition, on the inter-broker listener): AddPartitionsToTxn v5, through its
own :class:`~broker.inter_broker_channel.InterBrokerChannel`. A coordinator that cannot be reached
answers NETWORK_EXCEPTION / COORDINATOR_NOT_AVAILABLE, which the replica
manager turns into a retriable error for the producer
(``replication.txn_verification``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from broker.inter_broker_channel import InterBrokerChannel
from broker.membership import CoordinatorPlacement
from client.errors import KafkaClientError
from coordinator.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
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
    """The broker's :class:`~replication.txn_verification.TransactionVerifier`: a coordinator on this
    broker is asked directly (:class:`LocalAddPartitionsToTxnManager`), one elsewhere over the network."""

    def __init__(self, local: LocalAddPartitionsToTxnManager, placement: CoordinatorPlacement,
                 channel: InterBrokerChannel) -> None:
        """``placement``: the broker coordinating a partition of __transaction_state, as the metadata
        knows it; ``channel``: the connections to the coordinators' brokers (shut down by :meth:`shutdown`)."""
        self.local = local
        self.broker_id = local.broker_id
        self.placement = placement
        self.channel = channel

    async def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Sequence[TopicPartition], add_partitions: bool = False
                       ) -> dict[TopicPartition, int]:
        if self.local._coordinator_of(transactional_id) == self.broker_id:
            return await self.local(transactional_id, producer_id, producer_epoch, partitions, add_partitions)
        partition = self.local.coordinator.txn_manager.partition_for(transactional_id)
        leader = self.placement.coordinator_node(TRANSACTION_STATE_TOPIC_NAME, partition, self.channel.listener_name)
        if leader is None or leader.node_id < 0 or leader.node_id == self.broker_id or self.channel.closed:
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
            response = await self.channel.request(leader.node_id, request, version=ADD_PARTITIONS_TO_TXN_VERSION)
        except (KafkaClientError, OSError) as exc:
            log.info("[AddPartitionsToTxnManager broker=%d] verifying %s with broker %d failed: %s",
                     self.broker_id, transactional_id, leader.node_id, exc)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        assert isinstance(response, AddPartitionsToTxnResponse)
        return _errors_of(response, transactional_id, partitions)

    async def shutdown(self) -> None:
        await self.channel.shutdown()


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
