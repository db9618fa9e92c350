"""Wiring the coordinators to this broker: their config values, internal topic, timers.

A coordinator (coordinator/) gets narrow interfaces, never the server: a
:class:`~coordinator.common.coordinator_log.ReplicaCoordinatorLog` over the
replica manager, an :class:`~coordinator.common.scheduler.AsyncioScheduler`,
the values of its configs, and load/unload calls as leadership of its
partitions arrives or leaves.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager, LocalAddPartitionsToTxnManager
from broker.cluster.coordinator_cluster import CoordinatorCluster
from broker.config.broker_config import BrokerConfig
from broker.config.share_group_config import share_assignor_names
from broker.inter_broker_channel import InterBrokerChannel
from broker.membership import CoordinatorPlacement
from broker.metadata_store import TopicMetadata
from broker.metadata_view import TopicRegistry
from broker.share_persister import BrokerSharePersister
from broker.share_services import ShareServices, build_share_services
from broker.topic_admin import TopicAdmin
from coordinator.common.coordinator_log import ReplicaCoordinatorLog
from coordinator.common.internal_topics import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from coordinator.common.scheduler import AsyncioScheduler
from coordinator.group.consumer_group import TopicInfo
from coordinator.group.consumer_group_assignors import assignor_names
from coordinator.group.consumer_group_heartbeat import ConsumerGroupConfig
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.group.group_membership import GroupConfig
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.share_group_requests import ShareGroupConfig
from coordinator.share.persister import Persister
from coordinator.share.share_coordinator import ShareCoordinator, ShareCoordinatorConfig
from coordinator.transaction.transaction_coordinator import (
    ProducerIdGenerator,
    TransactionCoordinator,
    TransactionCoordinatorConfig,
)
from coordinator.transaction.transaction_marker_channel_manager import (
    CrashPoint,
    LeaderLookup,
    LocalMarkerSender,
    MarkerSender,
    TransactionMarkerChannelManager,
    replica_leader_lookup,
)
from coordinator.transaction.transaction_marker_sender import ClusterLeaderLookup, RemoteMarkerSender
from coordinator.transaction.transaction_state_manager import (
    TransactionStateManager,
    TransactionStateManagerConfig,
)
from protocol.errors import ErrorCode
from replication.replica_manager import ReplicaManager

#: How long a write to __transaction_state may wait for the ISR (Kafka's request.timeout.ms default).
TRANSACTION_LOG_APPEND_TIMEOUT_MS = 30_000


class RegistryTopicImage:
    """The broker's topics as the consumer protocol's assignment reads them, with the racks of each
    partition's replicas (``broker.rack`` of their brokers) when some broker has a rack.

    Every heartbeat describes the group's topics, so each topic's description is kept until the
    topic or the racks change: the registry replaces a topic's metadata whenever its replicas move
    (and adds partitions to it in place), so the same metadata object with the same partition count
    under the same brokers' racks has the same partitions' racks. For the same reason ``version``
    moves on only when the registry's topics or the brokers' racks change.
    """

    def __init__(self, topics: TopicRegistry, broker_racks: Callable[[], dict[int, str]] | None = None) -> None:
        self.topics = topics
        self.broker_racks = broker_racks
        self._described: dict[str, _DescribedTopic] = {}
        self._version = 0
        #: What ``_version`` was last given for: the registry's version and the racks (none yet).
        self._seen: tuple[int, dict[int, str]] = (-1, {})

    @property
    def version(self) -> int:
        racks = self.broker_racks() if self.broker_racks is not None else {}
        registry_version, seen_racks = self._seen
        if registry_version != self.topics.topics_version or racks != seen_racks:
            self._version += 1
            self._seen = (self.topics.topics_version, dict(racks))
        return self._version

    def describe_topic(self, name: str) -> TopicInfo | None:
        topic = self.topics.get(name)
        if topic is None:
            self._described.pop(name, None)
            return None
        racks = self.broker_racks() if self.broker_racks is not None else {}
        cached = self._described.get(name)
        if cached is not None and cached.describes(topic, racks):
            return cached.info
        info = _topic_info(topic, racks)
        self._described[name] = _DescribedTopic(topic, topic.partition_count, dict(racks), info)
        return info

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.topics.by_id(topic_id)
        return None if topic is None else topic.name

    def topic_names(self) -> Iterable[str]:
        return [topic.name for topic in self.topics]


@dataclass(frozen=True, slots=True)
class _DescribedTopic:
    """A topic's description and what it was computed from."""

    topic: TopicMetadata
    partition_count: int
    racks: dict[int, str]
    info: TopicInfo

    def describes(self, topic: TopicMetadata, racks: dict[int, str]) -> bool:
        return topic is self.topic and topic.partition_count == self.partition_count and racks == self.racks


def _topic_info(topic: TopicMetadata, racks: dict[int, str]) -> TopicInfo:
    # Fewer than two brokers with racks: no partition is closer to a member than another is.
    if len(racks) < 2:
        return TopicInfo(topic.topic_id, topic.partition_count)
    partition_racks = tuple(frozenset(racks[b] for b in topic.partitions.get(p, ()) if b in racks)
                            for p in range(topic.partition_count))
    return TopicInfo(topic.topic_id, topic.partition_count, partition_racks)


def consumer_group_config(config: BrokerConfig) -> ConsumerGroupConfig:
    return ConsumerGroupConfig(
        heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
        session_timeout_ms=config.group_consumer_session_timeout_ms,
        max_size=config.group_consumer_max_size,
        assignors=tuple(assignor_names(config.group_consumer_assignors)),
        migration_policy=config.group_consumer_migration_policy,
        regex_refresh_max_interval_ms=config.group_consumer_regex_refresh_interval_ms)


def share_group_config(config: BrokerConfig) -> ShareGroupConfig:
    return ShareGroupConfig(
        heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
        session_timeout_ms=config.group_share_session_timeout_ms,
        max_size=config.group_share_max_size,
        assignor=share_assignor_names(config.group_share_assignors)[0])


def build_group_coordinator(config: BrokerConfig, broker_id: int, replica_manager: ReplicaManager,
                            topics: TopicRegistry | None = None,
                            broker_racks: Callable[[], dict[int, str]] | None = None) -> GroupCoordinator:
    """The broker's group coordinator over its replicas of __consumer_offsets and the event loop's timers;
    ``topics`` (the broker's) are what consumer-protocol groups are assigned from, ``broker_racks`` the live
    brokers' racks (by broker id) their partitions' racks come from."""
    scheduler = AsyncioScheduler()
    partitions = ReplicaCoordinatorLog(GROUP_METADATA_TOPIC_NAME, config.offsets_topic_num_partitions,
                                       replica_manager, config.offsets_commit_timeout_ms)
    manager = GroupMetadataManager(
        broker_id, partitions, scheduler,
        offset_metadata_max_bytes=config.offset_metadata_max_bytes,
        offsets_retention_ms=config.offsets_retention_minutes * 60_000)
    group_config = GroupConfig(
        group_min_session_timeout_ms=config.group_min_session_timeout_ms,
        group_max_session_timeout_ms=config.group_max_session_timeout_ms,
        group_max_size=config.group_max_size,
        group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms)
    return GroupCoordinator(broker_id, group_config, manager, scheduler, config.offsets_retention_check_interval_ms,
                            consumer_group_config(config),
                            None if topics is None else RegistryTopicImage(topics, broker_racks),
                            share_group_config(config))


def follow_leadership(coordinator: GroupCoordinator, replica_manager: ReplicaManager) -> None:
    """Load and unload the coordinator's partitions as this broker gains or loses their
    leadership, and tell it of the transaction markers written to them. Leadership changes on the append thread (topic creation and deletion
    run there); the coordinator lives on the event loop, so each call hops to it."""
    loop = asyncio.get_running_loop()

    def elected(partition: int) -> None:
        loop.call_soon_threadsafe(coordinator.on_election, partition)

    def resigned(partition: int) -> None:
        loop.call_soon_threadsafe(coordinator.on_resignation, partition)

    replica_manager.add_leadership_listener(GROUP_METADATA_TOPIC_NAME, elected, resigned)
    # Markers are written from the event loop, where the coordinator lives: no hop needed.
    replica_manager.add_txn_marker_listener(GROUP_METADATA_TOPIC_NAME, coordinator.on_transaction_completed)


def build_transaction_state_manager(config: BrokerConfig, broker_id: int,
                                    replica_manager: ReplicaManager) -> TransactionStateManager:
    """The state of the transaction coordinator over this broker's replicas of __transaction_state."""
    partitions = ReplicaCoordinatorLog(TRANSACTION_STATE_TOPIC_NAME, config.transaction_state_log_num_partitions,
                                       replica_manager, TRANSACTION_LOG_APPEND_TIMEOUT_MS)
    return TransactionStateManager(broker_id, partitions, AsyncioScheduler(), TransactionStateManagerConfig(
        transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        transaction_max_timeout_ms=config.transaction_max_timeout_ms,
        remove_expired_transactional_ids_interval_ms=config.transaction_remove_expired_transaction_cleanup_interval_ms,
        max_batch_bytes=config.message_max_bytes))


def _coordinator_epoch(replica_manager: ReplicaManager, partition: int) -> int | None:
    """A partition's leader epoch is its coordinator epoch (None: not led here any more)."""
    hosted = replica_manager.get_partition(TRANSACTION_STATE_TOPIC_NAME, partition)
    return hosted.leader_epoch if hosted is not None and hosted.is_leader else None


def build_transaction_coordinator(config: BrokerConfig, broker_id: int, replica_manager: ReplicaManager,
                                  manager: TransactionStateManager, generate_producer_id: ProducerIdGenerator,
                                  topic_exists: Callable[[str], bool],
                                  offsets_partition_for: Callable[[str], int],
                                  cluster: CoordinatorCluster | None = None) -> TransactionCoordinator:
    """The transaction coordinator. On a lone broker its markers go to this broker's replica manager
    (the only leader there is); in a ``cluster`` a marker for a partition led elsewhere goes to that
    leader as WriteTxnMarkers (``RemoteMarkerSender``), and ``generate_producer_id`` is the cluster's
    (ZooKeeper's producer-id blocks)."""
    scheduler = AsyncioScheduler()
    local_sender = LocalMarkerSender(broker_id, replica_manager)
    sender: MarkerSender
    leader_of: LeaderLookup
    if cluster is None:
        sender, leader_of = local_sender, replica_leader_lookup(broker_id, replica_manager, topic_exists)
    else:
        lookup = ClusterLeaderLookup(broker_id, replica_manager, cluster.partition_leader, cluster.partition_count,
                                     cluster.inter_broker_listener)
        sender = RemoteMarkerSender(broker_id, local_sender, lookup.endpoint,
                                    ssl_context=cluster.inter_broker_ssl_context, sasl=cluster.inter_broker_sasl)
        leader_of = lookup
    channel = TransactionMarkerChannelManager(
        broker_id, manager, sender, leader_of, scheduler,
        request_timeout_ms=TRANSACTION_LOG_APPEND_TIMEOUT_MS,
        crash_point=CrashPoint.from_env(os.environ))  # TEST ONLY: unset outside the recovery tests
    return TransactionCoordinator(
        broker_id, manager, channel, generate_producer_id, scheduler, offsets_partition_for,
        TransactionCoordinatorConfig(
            abort_timed_out_transactions_interval_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms))


def start_transaction_coordinator(coordinator: TransactionCoordinator, replica_manager: ReplicaManager) -> None:
    """Start aborting timed-out transactions, load the partitions led here and follow leadership."""
    coordinator.startup()
    start_transaction_state_manager(coordinator.txn_manager, replica_manager, coordinator.on_resignation)


def start_transaction_state_manager(manager: TransactionStateManager, replica_manager: ReplicaManager,
                                    on_resignation: Callable[[int], None] | None = None) -> None:
    """Load the __transaction_state partitions led here now, then follow leadership changes as
    the group coordinator does (each call hops from the append thread to the event loop).
    ``on_resignation`` (the coordinator's) replaces the manager's own unload when given."""
    led = {p.partition_index: p.leader_epoch for p in replica_manager.partitions_of(TRANSACTION_STATE_TOPIC_NAME)
           if p.is_leader}
    manager.startup(led)
    loop = asyncio.get_running_loop()

    def on_election(partition: int) -> None:
        epoch = _coordinator_epoch(replica_manager, partition)
        # Loaded (or loading) already: the leader epoch moved while leadership stayed here, which
        # keeps the coordinator epoch, as Kafka's onElection is called for new leaders only.
        if (epoch is not None and partition not in manager.loading_partitions
                and partition not in manager.transaction_metadata_cache):
            manager.load_transactions_for_txn_topic_partition(partition, epoch)

    def elected(partition: int) -> None:
        loop.call_soon_threadsafe(on_election, partition)

    def resigned(partition: int) -> None:
        if on_resignation is not None:
            loop.call_soon_threadsafe(on_resignation, partition)
        else:
            loop.call_soon_threadsafe(manager.remove_transactions_for_txn_topic_partition, partition, None)

    replica_manager.add_leadership_listener(TRANSACTION_STATE_TOPIC_NAME, elected, resigned)


def build_transaction_verifier(broker_id: int, replica_manager: ReplicaManager, coordinator: TransactionCoordinator,
                               placement: CoordinatorPlacement, channel: InterBrokerChannel
                               ) -> AddPartitionsToTxnManager:
    """What partition leaders verify transactional produces with: this broker's coordinator when it
    coordinates the id, the coordinator's broker the ``placement`` names otherwise (AddPartitionsToTxn v5
    through ``channel``), none when no broker does (a lone broker coordinates every id it can)."""
    return AddPartitionsToTxnManager(LocalAddPartitionsToTxnManager(broker_id, replica_manager, coordinator),
                                     placement, channel)


def build_share_coordinator(config: BrokerConfig, broker_id: int, replica_manager: ReplicaManager) -> ShareCoordinator:
    """The share coordinator over this broker's replicas of __share_group_state; its writes wait for the
    ISR up to share.coordinator.write.timeout.ms, and it deletes obsolete records (DeleteRecords on its
    partitions) every share.coordinator.state.topic.prune.interval.ms."""
    partitions = ReplicaCoordinatorLog(SHARE_GROUP_STATE_TOPIC_NAME, config.share_coordinator_state_topic_num_partitions,
                                       replica_manager, config.share_coordinator_write_timeout_ms)

    async def delete_records(partition: int, before_offset: int) -> ErrorCode:
        [(error, _low_watermark)] = await replica_manager.delete_records(
            [((SHARE_GROUP_STATE_TOPIC_NAME, partition), before_offset)])
        return ErrorCode(error)

    return ShareCoordinator(broker_id, partitions, AsyncioScheduler(), ShareCoordinatorConfig(
        snapshot_update_records=config.share_coordinator_snapshot_update_records_per_snapshot,
        prune_interval_ms=config.share_coordinator_state_topic_prune_interval_ms,
        cold_snapshot_interval_ms=config.share_coordinator_cold_partition_snapshot_interval_ms), delete_records)


def start_share_coordinator(coordinator: ShareCoordinator, replica_manager: ReplicaManager) -> None:
    """Load the __share_group_state partitions led here now, then follow leadership as the group
    coordinator does (each call hops from the append thread to the event loop)."""
    coordinator.startup(p.partition_index for p in replica_manager.partitions_of(SHARE_GROUP_STATE_TOPIC_NAME)
                        if p.is_leader)
    loop = asyncio.get_running_loop()

    def elected(partition: int) -> None:
        loop.call_soon_threadsafe(coordinator.on_election, partition)

    def resigned(partition: int) -> None:
        loop.call_soon_threadsafe(coordinator.on_resignation, partition)

    replica_manager.add_leadership_listener(SHARE_GROUP_STATE_TOPIC_NAME, elected, resigned)


def build_share_persister(broker_id: int, coordinator: ShareCoordinator, placement: CoordinatorPlacement,
                          topic_admin: TopicAdmin, channel: InterBrokerChannel) -> BrokerSharePersister:
    """The persister the share partitions use: this broker's share coordinator for the state it
    coordinates, the coordinator's broker (through ``channel``) for the rest."""
    return BrokerSharePersister(
        broker_id, coordinator, placement, lambda: topic_admin.ensure_internal_topic(SHARE_GROUP_STATE_TOPIC_NAME),
        channel)


def build_share_services_if_served(config: BrokerConfig, replica_manager: ReplicaManager, persister: Persister,
                                   scheduler: AsyncioScheduler, group_configs: Callable[[str], Mapping[str, str]]
                                   ) -> ShareServices | None:
    """The share partitions and sessions (ShareFetch, ShareAcknowledge) when ``group.coordinator.rebalance.protocols``
    lists ``share``; None otherwise (their handlers then answer UNSUPPORTED_VERSION)."""
    if "share" not in config.group_coordinator_rebalance_protocols:
        return None
    return build_share_services(replica_manager, persister, scheduler, share_group_configs(config, group_configs))


def share_group_configs(config: BrokerConfig, overrides: Callable[[str], Mapping[str, str]]
                        ) -> Callable[[str], Mapping[str, str]]:
    """A group's ``share.*`` configs: its overrides over the broker's ``group.share.*`` values."""
    defaults = {"share.record.lock.duration.ms": str(config.group_share_record_lock_duration_ms),
                "share.delivery.count.limit": str(config.group_share_delivery_count_limit),
                "share.partition.max.record.locks": str(config.group_share_partition_max_record_locks)}
    return lambda group_id: {**defaults, **overrides(group_id)}
