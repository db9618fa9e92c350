"""AddPartitionsToTxnManager: partition leaders verify transactional produces with the coordinator.

Kafka's AddPartitionsToTxnManager sends AddPartitionsToTxn v4+ verify-only
requests to the broker coordinating a transactional id (the leader of its
``__transaction_state`` partition). On a lone broker that is this broker, so
the request goes where the AddPartitionsToTxn handler sends a verify-only
transaction: ``TransactionCoordinator.verify_partitions_in_transaction``. A
coordinator elsewhere is reported as COORDINATOR_NOT_AVAILABLE until brokers
talk to each other; a networked sender can then take this one's place without
changing the replica manager (``replication.txn_verification``).
"""

from __future__ import annotations

from collections.abc import Sequence

from coordinator.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from coordinator.transaction.transaction_coordinator import TransactionCoordinator
from coordinator.transaction.transaction_metadata import TV_2
from protocol.errors import ErrorCode
from replication.replica_manager import ReplicaManager

TopicPartition = tuple[str, int]


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

    def _coordinator_of(self, transactional_id: str) -> int | None:
        partition = self.coordinator.txn_manager.partition_for(transactional_id)
        hosted = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC_NAME, partition)
        return self.broker_id if hosted is not None and hosted.is_leader else None
