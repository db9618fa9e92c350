"""Topic administration: create, delete, add partitions, change configs.

Kafka's AdminManager (ZooKeeper mode) / controller: validates requests the way
Kafka does (the checks both modes share are the functions here) and, for the
lone broker (through broker.topic_admin.LocalTopicAdmin), applies them to its
metadata store and hosted partitions.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from broker.config.config_def import ConfigValueError
from broker.config.dynamic_broker_config import DynamicBrokerConfig
from broker.config.topic_config import known_topic_configs, validate_topic_overrides
from broker.metadata_store import MetadataStore, TopicMetadata
from coordinator.common.internal_topics import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from coordinator.share.share_coordinator import share_group_state_topic_configs
from coordinator.transaction.transaction_state_manager import transaction_topic_configs
from protocol.errors import ErrorCode
from replication.replica_manager import ReplicaManager
from storage.log_cleaner import LogCleaner
from storage.log_config import LogConfig
from storage.log_manager import LogManager

log = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


class AdminError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def check_partition_increase(topic: TopicMetadata, total: int, assignments: list[list[int]] | None,
                             registered: Collection[int]) -> int:
    """Kafka's checks of a CreatePartitions request (its messages), for the lone broker and the
    cluster alike; returns the replication factor the new partitions take (the topic's)."""
    current = topic.partition_count
    if total < current:
        raise AdminError(ErrorCode.INVALID_PARTITIONS,
                         f"The topic {topic.name} currently has {current} partition(s); {total} would not be an "
                         "increase.")
    if total == current:
        raise AdminError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    rf = len(next(iter(topic.partitions.values()))) if topic.partitions else 1
    if assignments is None:
        return rf
    if len(assignments) != total - current:
        raise AdminError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                         f"Attempted to add {total - current} additional partition(s), but only "
                         f"{len(assignments)} assignment(s) were specified.")
    for replicas in assignments:
        if len(replicas) != rf:
            raise AdminError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                             f"The manual partition assignment includes a partition with {len(replicas)} "
                             f"replica(s), but this is not consistent with previous partitions, which have "
                             f"{rf} replica(s).")
        unknown = [b for b in replicas if b not in registered]
        if unknown:
            raise AdminError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                             f"The manual partition assignment includes broker {unknown[0]}, but no such "
                             "broker is registered.")
        if len(set(replicas)) != len(replicas):
            raise AdminError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                             "The manual partition assignment includes the broker more than once.")
    return rf


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: legal characters, length, not '.' or '..'."""
    if not name:
        raise AdminError(ErrorCode.INVALID_TOPIC, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise AdminError(ErrorCode.INVALID_TOPIC, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise AdminError(ErrorCode.INVALID_TOPIC,
                         f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if not _LEGAL_TOPIC.fullmatch(name):
        raise AdminError(ErrorCode.INVALID_TOPIC,
                         f"Topic name \"{name}\" is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


def validate_topic_configs(defaults: LogConfig, configs: Mapping[str, str | None]) -> dict[str, str]:
    """Topic overrides typed and range-checked as Kafka's LogConfig.validate; → INVALID_CONFIG."""
    overrides = {k: v for k, v in configs.items() if v is not None}
    unknown = sorted(set(overrides) - known_topic_configs())
    if unknown:
        raise AdminError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {unknown[0]}")
    try:
        return validate_topic_overrides(defaults, overrides)
    except ConfigValueError as exc:
        raise AdminError(ErrorCode.INVALID_CONFIG, str(exc)) from None


@dataclass(frozen=True)
class TopicCreation:
    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]
    #: A manual assignment (partition -> replicas), as the request gave it.
    assignments: dict[int, list[int]] | None = None


def plan_topic_creation(dynamic_config: DynamicBrokerConfig, name: str, num_partitions: int,
                        replication_factor: int, configs: Mapping[str, str | None],
                        assignments: Mapping[int, list[int]] | None, exists: bool,
                        live_brokers: list[int]) -> TopicCreation:
    """Kafka's checks of a topic creation (the lone broker's and the cluster's alike); -1
    partitions or RF means the broker default (KIP-464)."""
    config = dynamic_config.config
    validate_topic_name(name)
    if exists:
        raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise AdminError(ErrorCode.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignments were set.")
        for replicas in assignments.values():
            if any(r not in live_brokers for r in replicas):
                raise AdminError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT, "Unknown broker in the replica assignment.")
            if len(set(replicas)) != len(replicas):
                raise AdminError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 "Duplicate brokers not allowed in replica assignment.")
        num_partitions = len(assignments)
        replication_factor = len(next(iter(assignments.values())))
    if num_partitions == -1:
        num_partitions = config.num_partitions
    if replication_factor == -1:
        replication_factor = config.default_replication_factor
    if num_partitions <= 0:
        raise AdminError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(live_brokers):
        raise AdminError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): "
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{len(live_brokers)} broker(s) are registered.",
        )
    overrides = validate_topic_configs(dynamic_config.default_log_config, configs)
    return TopicCreation(name, num_partitions, replication_factor, overrides,
                         {p: list(r) for p, r in assignments.items()} if assignments else None)


class AdminManager:
    def __init__(self, broker_id: int, metadata: MetadataStore, dynamic_config: DynamicBrokerConfig,
                 log_manager: LogManager, replica_manager: ReplicaManager, log_cleaner: LogCleaner | None) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.dynamic_config = dynamic_config
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self.log_cleaner = log_cleaner

    def host_topic(self, topic: TopicMetadata) -> None:
        """Lead every partition of the topic here (blocking: creates logs)."""
        for index, replicas in sorted(topic.partitions.items()):
            self.replica_manager.make_leader(topic.name, index, topic.topic_id, replicas)

    @property
    def live_brokers(self) -> list[int]:
        return [self.broker_id]

    def plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                   configs: Mapping[str, str | None], assignments: Mapping[int, list[int]] | None = None) -> TopicCreation:
        """Validate a creation; -1 partitions or RF means the broker default (KIP-464)."""
        return plan_topic_creation(self.dynamic_config, name, num_partitions, replication_factor, configs,
                                   assignments, name in self.metadata, self.live_brokers)

    def create_topic(self, plan: TopicCreation) -> TopicMetadata:
        brokers = self.live_brokers
        partitions = {p: [brokers[(p + r) % len(brokers)] for r in range(plan.replication_factor)]
                      for p in range(plan.num_partitions)}
        topic = self.metadata.create_topic(plan.name, partitions, plan.configs)
        if plan.configs:
            self.log_manager.update_topic_config(plan.name, plan.configs)
        self.host_topic(topic)
        log.info("[KafkaServer id=%d] created topic %s with %d partition(s), id %s",
                 self.broker_id, plan.name, plan.num_partitions, topic.topic_id)
        return topic

    def auto_create_topic(self, name: str) -> TopicMetadata:
        """Metadata-triggered creation with the broker's defaults (internal topics: their own)."""
        config = self.dynamic_config.config
        partitions, configs = config.num_partitions, {}
        if name == GROUP_METADATA_TOPIC_NAME:
            partitions = config.offsets_topic_num_partitions
            configs = {"cleanup.policy": "compact", "segment.bytes": str(config.offsets_topic_segment_bytes)}
        rf = min(config.default_replication_factor, len(self.live_brokers))
        if name == TRANSACTION_STATE_TOPIC_NAME:
            partitions = config.transaction_state_log_num_partitions
            rf = min(config.transaction_state_log_replication_factor, len(self.live_brokers))
            # min.isr above the replicas there are would refuse every acks=-1 write of the coordinator.
            configs = transaction_topic_configs(min(config.transaction_state_log_min_isr, rf),
                                                config.transaction_state_log_segment_bytes)
        if name == SHARE_GROUP_STATE_TOPIC_NAME:
            partitions = config.share_coordinator_state_topic_num_partitions
            rf = min(config.share_coordinator_state_topic_replication_factor, len(self.live_brokers))
            configs = share_group_state_topic_configs(min(config.share_coordinator_state_topic_min_isr, rf),
                                                      config.share_coordinator_state_topic_segment_bytes)
        return self.create_topic(self.plan_topic(name, partitions, rf, configs))

    def delete_topic(self, name: str) -> TopicMetadata:
        """Remove the topic from the metadata store, then its partition logs (append thread).

        The store goes first: a crash in between leaves partition dirs no topic
        names, which start-up never hosts, and a topic recreated under the same
        name gets a new id, no overrides and empty logs.
        """
        topic = self.metadata.get(name)
        if topic is None:
            raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if not self.dynamic_config.config.delete_topic_enable:
            raise AdminError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        logs = [p.log for p in self.replica_manager.partitions_of(name)]
        cleaner = self.log_cleaner
        if cleaner is not None:
            for log_ in logs:
                cleaner.abort_cleaning(log_)  # a pass on these logs stops at its next batch
        try:
            self.metadata.delete_topic(name)
            self.replica_manager.delete_partitions(name)
            self.log_manager.update_topic_config(name, {})
        finally:
            # A topic recreated under this name reuses the dir names: it must start
            # with no cleaner checkpoint and be cleanable again.
            if cleaner is not None:
                for log_ in logs:
                    cleaner.remove_checkpoint(log_)
                    cleaner.resume_cleaning(log_)
        log.info("[KafkaServer id=%d] deleted topic %s (id %s)", self.broker_id, name, topic.topic_id)
        return topic

    def plan_partitions(self, name: str, total: int,
                        assignments: list[list[int]] | None = None) -> dict[int, list[int]]:
        """Validate a partition increase (Kafka's messages); returns the new partitions' replicas."""
        topic = self.metadata.get(name)
        if topic is None:
            raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        brokers = self.live_brokers
        rf = check_partition_increase(topic, total, assignments, brokers)
        current = topic.partition_count
        if assignments is None:
            return {p: [brokers[(p + r) % len(brokers)] for r in range(rf)] for p in range(current, total)}
        return {current + i: list(replicas) for i, replicas in enumerate(assignments)}

    def create_partitions(self, name: str, total: int, validate_only: bool,
                          assignments: list[list[int]] | None = None) -> None:
        """Add partitions and host them at once (append thread: creates logs, writes the store)."""
        new = self.plan_partitions(name, total, assignments)
        if validate_only:
            return
        self.host_topic(self.metadata.add_partitions(name, new))
        log.info("[KafkaServer id=%d] topic %s now has %d partition(s)", self.broker_id, name, total)

    def set_topic_configs(self, name: str, overrides: dict[str, str]) -> None:
        """Replace a topic's overrides: durable first, then applied to its open logs (append thread)."""
        self.metadata.set_topic_configs(name, overrides)
        self.log_manager.update_topic_config(name, overrides)
        log.info("[KafkaServer id=%d] topic %s configs now %s", self.broker_id, name, overrides)
