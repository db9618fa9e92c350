"""Topic administration through ZooKeeper: Kafka's AdminZkClient (and ZkAdminManager's checks).

In ZooKeeper mode any broker handles CreateTopics, CreatePartitions and DeleteTopics by
writing ZooKeeper; the controller reacts to the watches (new assignment -> partitions
created and leaders elected; deletion marker -> topic deleted). So this module only
validates and writes: a new topic's config znode and assignment (with a fresh topic
id), a grown assignment, a deletion marker. Errors carry Kafka's codes and messages.
Topic-name syntax, config values and ``-1`` defaults are checked by the broker before.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from controller.replica_assignment import (
    AdminOperationError,
    BrokerMetadata,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas_to_brokers,
)
from controller.zk.kafka_zk_client import KafkaZkClient, NodeExistsError, TopicExistsError
from controller.zk.zk_data import BrokerInfo, TopicAssignment
from protocol.errors import ErrorCode

__all__ = ["AdminZkClient", "AdminZkError", "new_topic_id"]

log = logging.getLogger(__name__)

#: Kafka's Uuid.METADATA_TOPIC_ID (reserved; never a topic's id).
_METADATA_TOPIC_ID = uuid.UUID(int=1)


class AdminZkError(Exception):
    """An admin request refused with Kafka's error code and message."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def new_topic_id() -> uuid.UUID:
    """Kafka's Uuid.randomUuid: random, never zero or reserved, and its base64 form never starts with '-'."""
    while True:
        candidate = uuid.uuid4()
        # base64url of the first 6 bits: 62 ('-') means a first byte of 0xF8..0xFB.
        if candidate.int not in (0, _METADATA_TOPIC_ID.int) and not 0xF8 <= candidate.bytes[0] <= 0xFB:
            return candidate


def _broker_metadata(brokers: Mapping[int, BrokerInfo]) -> list[BrokerMetadata]:
    return [BrokerMetadata(b.id, b.rack) for b in sorted(brokers.values(), key=lambda b: b.id)]


def _assignment_error(exc: AdminOperationError) -> AdminZkError:
    if isinstance(exc, InvalidReplicationFactorError):
        return AdminZkError(ErrorCode.INVALID_REPLICATION_FACTOR, str(exc))
    if isinstance(exc, InvalidPartitionsError):
        return AdminZkError(ErrorCode.INVALID_PARTITIONS, str(exc))
    return AdminZkError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))


def _collides(a: str, b: str) -> bool:
    """Kafka's Topic.hasCollision: '.' and '_' collide in metric names."""
    return a.replace(".", "_") == b.replace(".", "_")


class AdminZkClient:
    """Creates topics, adds partitions and marks topics for deletion in ZooKeeper."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        assignment: Mapping[int, list[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicAssignment:
        """Validate and (unless ``validate_only``) write a new topic; returns its assignment.

        Without ``assignment`` the replicas are placed by Kafka's (rack-aware) algorithm
        over the registered brokers; with one, every broker named must be registered.
        """
        brokers = await self.zk.get_all_brokers()
        if assignment:
            replicas_by_partition = {int(p): list(r) for p, r in assignment.items()}
            unknown = sorted({b for r in replicas_by_partition.values() for b in r} - set(brokers))
            if unknown:
                raise AdminZkError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                   f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        else:
            try:
                replicas_by_partition = assign_replicas_to_brokers(_broker_metadata(brokers), partitions,
                                                                   replication_factor)
            except AdminOperationError as exc:
                raise _assignment_error(exc) from None
        await self._validate_topic_create(name, replicas_by_partition)
        topic_assignment = TopicAssignment(new_topic_id(), replicas_by_partition, {}, {})
        if validate_only:
            return topic_assignment
        try:
            await self.zk.create_topic(name, topic_assignment, dict(configs))
        except (TopicExistsError, NodeExistsError):
            raise AdminZkError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        log.info("created topic %s (id %s) with assignment %s", name, topic_assignment.topic_id, replicas_by_partition)
        return topic_assignment

    async def _validate_topic_create(self, name: str, assignment: Mapping[int, list[int]]) -> None:
        """Kafka's AdminZkClient.validateTopicCreate."""
        if name in await self.zk.get_delete_topic_markers():
            raise AdminZkError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic \"{name}\" is marked for deletion.")
        existing = await self.zk.get_all_topics()
        if name in existing:
            raise AdminZkError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        colliding = sorted(t for t in existing if _collides(t, name))
        if colliding:
            raise AdminZkError(ErrorCode.INVALID_TOPIC,
                               f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")
        if len({len(r) for r in assignment.values()}) != 1:
            raise AdminZkError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                               "All partitions should have the same number of replicas")
        for replicas in assignment.values():
            if len(replicas) != len(set(replicas)):
                raise AdminZkError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                   f"Duplicate replica assignment found: {dict(assignment)}")
        if set(assignment) != set(range(len(assignment))):
            raise AdminZkError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                               "partitions should be a consecutive 0-based integer sequence")

    async def add_partitions(
        self,
        name: str,
        total: int,
        assignments: list[list[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicAssignment:
        """CreatePartitions: grow ``name`` to ``total`` partitions (new ones placed as Kafka places them)."""
        existing = (await self.zk.get_topic_assignments({name})).get(name)
        if existing is None or not existing.partitions:
            raise AdminZkError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        old = len(existing.partitions)
        increment = total - old
        if increment < 0:
            raise AdminZkError(ErrorCode.INVALID_PARTITIONS,
                               f"Topic currently has {old} partitions, which is higher than the requested {total}.")
        if increment == 0:
            raise AdminZkError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
        if existing.adding or existing.removing:
            raise AdminZkError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                               f"A partition reassignment is in progress for the topic '{name}'.")
        brokers = await self.zk.get_all_brokers()
        partition0 = existing.partitions.get(0)
        if not partition0:
            raise AdminZkError(ErrorCode.UNKNOWN_SERVER_ERROR, f"the topic {name} does not have partition with id 0")
        if assignments is not None:
            unknown = sorted({b for r in assignments for b in r} - set(brokers))
            if unknown:
                raise AdminZkError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                   f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
            if len(assignments) != increment:
                raise AdminZkError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                   f"Increasing the number of partitions by {increment} but {len(assignments)} "
                                   "assignments provided.")
            new_partitions = {old + i: list(r) for i, r in enumerate(assignments)}
            self._validate_replica_assignment(new_partitions, len(partition0), set(brokers))
        else:
            metadata = _broker_metadata(brokers)
            # Kafka starts the new partitions' placement at partition 0's leader.
            start_index = next((i for i, b in enumerate(metadata) if b.id >= partition0[0]), 0)
            try:
                new_partitions = assign_replicas_to_brokers(metadata, increment, len(partition0),
                                                            fixed_start_index=start_index, start_partition_id=old)
            except AdminOperationError as exc:
                raise _assignment_error(exc) from None
        grown = TopicAssignment(existing.topic_id, {**existing.partitions, **new_partitions}, {}, {})
        if not validate_only:
            await self.zk.set_topic_assignment(name, grown)
            log.info("added partitions %s to topic %s", sorted(new_partitions), name)
        return grown

    @staticmethod
    def _validate_replica_assignment(assignment: Mapping[int, list[int]], replication_factor: int,
                                     available: set[int]) -> None:
        """Kafka's AdminZkClient.validateReplicaAssignment for added partitions."""
        for partition, replicas in sorted(assignment.items()):
            if not replicas:
                raise AdminZkError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                   f"Cannot have replication factor of 0 for partition id {partition}.")
            if len(replicas) != len(set(replicas)):
                raise AdminZkError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                   f"Duplicate brokers not allowed in replica assignment: "
                                   f"{', '.join(map(str, replicas))} for partition id {partition}.")
            if not set(replicas) <= available:
                raise AdminZkError(ErrorCode.BROKER_NOT_AVAILABLE,
                                   f"Some brokers specified for partition id {partition} are not available. "
                                   f"Specified brokers: {', '.join(map(str, replicas))}, "
                                   f"available brokers: {', '.join(map(str, sorted(available)))}.")
        bad = sorted((p, len(r)) for p, r in assignment.items() if len(r) != replication_factor)
        if bad:
            raise AdminZkError(
                ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} while "
                f"partitions [{', '.join(str(p) for p, _ in bad)}] have replication factors "
                f"[{', '.join(str(n) for _, n in bad)}], respectively.",
            )

    async def delete_topic(self, name: str) -> None:
        """DeleteTopics: write the deletion marker the controller watches."""
        if name not in await self.zk.get_all_topics():
            raise AdminZkError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic `{name}` to delete does not exist")
        try:
            await self.zk.create_delete_topic_marker(name)
        except NodeExistsError:
            # Kafka's TopicAlreadyMarkedForDeletionException: the deletion is already under way.
            log.info("topic %s is already marked for deletion", name)
