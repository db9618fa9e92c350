"""ReplicaManager: the only way into the partitions this broker hosts.

As in Kafka, every write and read of partition data goes through here:
``append_records`` (produce, the coordinators, followers), ``write_txn_markers``
(the COMMIT/ABORT markers that end a transaction) and ``fetch_messages``
(consumers, followers), plus the admin APIs' lookups and, in cluster mode, the
controller's LeaderAndIsr and StopReplica.

It owns the hosted partitions (``HostedPartitions``), the two purgatories
(``Purgatories``), the leadership listeners and the replication quotas, and
hands each concept to a collaborator built here with what it needs:

* ``ReplicaAppender`` (``replica_appender``): appends, on the loop or the append
  thread, ``acks=-1`` waits, transaction verification;
* ``ReplicaReader`` (``replica_reader``): fetches and their long polls;
* ``PartitionLookups`` (``replica_manager_lookups``): ListOffsets,
  OffsetsForLeaderEpoch, DeleteRecords, DescribeProducers, DescribeLogDirs;
* ``TxnMarkerWriter`` (``txn_marker_writer``): WriteTxnMarkers;
* ``IsrManager`` (``isr_manager``): follower fetch state, ISR changes to the
  controller, the ISR expiration task (cluster mode);
* ``ReplicaAlterLogDirsManager`` (``replica_alter_log_dirs``): AlterReplicaLogDirs,
  moving replicas between this broker's log dirs;
* ``ReplicaStateChanges`` (``replica_state_changes``): LeaderAndIsr
  (``make_leaders``, ``make_followers``, ``start_fetchers``) and StopReplica,
  the controller epoch and the follower fetchers (cluster mode).

Both data entry points answer synchronously when they can (a list of
per-partition results) and otherwise return an awaitable of the same list, so
the common produce and fetch never create a task. Errors come back per
partition as Kafka error codes, so one bad partition never fails a whole request.

Threads: call from the event loop. Blocking work (appends that may fsync,
DeleteRecords, log creation and deletion) runs on the append thread; reads take
no lock.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from replication.append_result import PartitionAppendResult
from replication.append_thread import AppendThread
from replication.broker_topic_stats import BrokerTopicStats
from replication.delayed_fetch import FetchPurgatory
from replication.delayed_produce import ProducePurgatory
from replication.fetch_params import FetchParams, FetchPartition
from replication.hosted_partitions import HostedPartitions
from replication.isr_manager import IsrManager
from replication.log_dir_failure_handler import LogDirFailureHandler
from replication.partition import LogReadResult, Partition
from replication.purgatories import Purgatories
from replication.replica_alter_log_dirs import ReplicaAlterLogDirsManager
from replication.replica_appender import ReplicaAppender
from replication.replica_fetcher_manager import ReplicaFetcherManager
from replication.replica_manager_lookups import ListOffsetsResult, LogDirDescription, PartitionLookups
from replication.replica_reader import ReplicaReader
from replication.replica_state_changes import ReplicaStateChanges
from replication.replication_config import ReplicationConfig
from replication.replication_quota_manager import ReplicationQuotas
from replication.state_change_requests import LeaderAndIsrResult, LeaderAndIsrStates, StopReplicaResult, StopReplicaStates
from replication.txn_marker_writer import TxnMarker, TxnMarkerCallback, TxnMarkerWriter
from replication.txn_verification import ProduceVerification, TransactionalProduce, TransactionVerifier
from storage.log_append import AppendOrigin
from storage.log_cleaner import LogCleaner
from storage.log_config import LogConfig
from storage.log_manager import LogManager
from storage.producer_state_entry import ProducerStateEntry

if TYPE_CHECKING:
    from replication.alter_partition_manager import AlterPartitionManager

log = logging.getLogger(__name__)

__all__ = ["FetchParams", "FetchPartition", "PartitionAppendResult", "ReplicaManager", "TxnMarker"]

TopicPartition = tuple[str, int]
Records = bytearray | memoryview
#: Told a partition index whose leadership arrived or left.
LeadershipCallback = Callable[[int], None]
AppendOutcome = list[PartitionAppendResult] | Awaitable[list[PartitionAppendResult]]


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, append_thread: AppendThread,
                 replication_config: ReplicationConfig | None = None,
                 quotas: ReplicationQuotas | None = None, log_cleaner: LogCleaner | None = None) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.append_thread = append_thread
        self._replication_config = replication_config or ReplicationConfig()
        #: The leader and follower replication throttles (KIP-73). The broker feeds them: its
        #: dynamic configs the rates, the topics' configs (``update_throttled_replicas``) the partitions.
        self.quotas = quotas or ReplicationQuotas()
        self.hosted = HostedPartitions()
        self.purgatories = Purgatories(self.hosted)
        #: topic → (on election, on resignation): coordinators load and unload their partitions.
        self._leadership_listeners: dict[str, tuple[LeadershipCallback, LeadershipCallback]] = {}
        #: Kafka's BrokerTopicStats: what appends took in and fetches sent out (the broker's metrics read it).
        self.topic_stats = BrokerTopicStats()
        self.appender = ReplicaAppender(broker_id, self.hosted, append_thread, self.purgatories, self.topic_stats)
        self.isr = IsrManager(broker_id, self.hosted, self.purgatories)
        self.reader = ReplicaReader(broker_id, self.hosted, self.purgatories.fetch, self.quotas,
                                    self.isr.update_follower_fetch_state, self.topic_stats)
        self.lookups = PartitionLookups(broker_id, self.hosted, log_manager, append_thread)
        self.txn_markers = TxnMarkerWriter(broker_id, self.appender)
        self.state_changes = ReplicaStateChanges(
            broker_id, self.hosted, log_manager, append_thread, self.purgatories, self.isr,
            self._fire_leadership_change, self._new_fetcher_manager, self._replication_config)
        self.alter_log_dirs = ReplicaAlterLogDirsManager(broker_id, self.hosted, log_manager, append_thread,
                                                         self.quotas.alter_log_dirs, log_cleaner)
        self.log_dir_failures = LogDirFailureHandler(broker_id, self.hosted, log_manager,
                                                     lambda: self.state_changes.fetcher_manager)

    # -- state the rest of the broker reads --------------------------------------------------
    @property
    def partitions(self) -> dict[TopicPartition, Partition]:
        return self.hosted.by_tp

    @property
    def fetch_purgatory(self) -> FetchPurgatory:
        return self.purgatories.fetch

    @property
    def produce_purgatory(self) -> ProducePurgatory:
        return self.purgatories.produce

    @property
    def replication_config(self) -> ReplicationConfig:
        return self._replication_config

    @replication_config.setter
    def replication_config(self, config: ReplicationConfig) -> None:
        """The cluster's settings (inter-broker security, fetcher sizes), set before replication starts."""
        self._replication_config = config
        self.state_changes.config = config
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.config = config

    @property
    def controller_epoch(self) -> int:
        """The latest controller epoch seen (LeaderAndIsr, StopReplica, UpdateMetadata)."""
        return self.state_changes.controller_epoch

    @controller_epoch.setter
    def controller_epoch(self, epoch: int) -> None:
        self.state_changes.controller_epoch = epoch

    @property
    def replica_fetcher_manager(self) -> ReplicaFetcherManager | None:
        return self.state_changes.fetcher_manager

    @property
    def alter_partition_manager(self) -> AlterPartitionManager | None:
        return self.isr.alter_partition_manager

    @property
    def txn_verification(self) -> ProduceVerification | None:
        return self.appender.txn_verification

    # -- partitions ---------------------------------------------------------------------------
    def update_throttled_replicas(self, topic: str, config: LogConfig) -> None:
        """A topic's config changed (or was loaded): its throttled replicas on this broker
        (Kafka's TopicConfigHandler; a LogManager topic config listener)."""
        self.quotas.update_throttled_replicas(topic, config.leader_replication_throttled_replicas,
                                              config.follower_replication_throttled_replicas, self.broker_id)

    def add_leadership_listener(self, topic: str, on_election: LeadershipCallback,
                                on_resignation: LeadershipCallback) -> None:
        """Be told when this broker starts or stops leading a partition of ``topic``
        (from the thread that made the change: hop to the event loop yourself)."""
        self._leadership_listeners[topic] = (on_election, on_resignation)

    def _fire_leadership_change(self, topic: str, partition_index: int, elected: bool) -> None:
        listener = self._leadership_listeners.get(topic)
        if listener is None:
            return
        try:
            listener[0 if elected else 1](partition_index)
        except Exception:
            log.exception("[ReplicaManager broker=%d] leadership listener of %s failed", self.broker_id, topic)

    def make_leader(self, topic: str, partition_index: int, topic_id: uuid.UUID, replicas: list[int],
                    leader_epoch: int = 0) -> Partition:
        """A lone broker hosts a partition as its leader, creating its log if needed (blocking:
        may create files)."""
        partition = self.hosted.get((topic, partition_index))
        if partition is None:
            log_ = self.log_manager.get_or_create_log(topic, partition_index)
            partition = Partition(topic, partition_index, topic_id, log_, self.broker_id, replicas, leader_epoch)
            # A single-replica leader owns everything in its log: committed.
            partition.maybe_increment_high_watermark()
            self.hosted.add(partition)
            listener = self._leadership_listeners.get(topic)
            if listener is not None:
                listener[0](partition_index)
        return partition

    def delete_partitions(self, topic: str) -> None:
        listener = self._leadership_listeners.get(topic)
        for index in self.hosted.remove_topic(topic):
            self.log_manager.delete_log(topic, index)
            if listener is not None:
                listener[1](index)

    def get_partition(self, topic: str, partition_index: int) -> Partition | None:
        return self.hosted.get((topic, partition_index))

    def get_log_config(self, tp: TopicPartition) -> LogConfig | None:
        """The config of a hosted partition's log (Kafka's getLogConfig), or None."""
        partition = self.hosted.get(tp)
        return None if partition is None else partition.log.config

    def partitions_of(self, topic: str) -> list[Partition]:
        return self.hosted.of_topic(topic)

    def shutdown(self) -> None:
        """Answer parked fetches and produces now, so shutdown does not wait them out; stop the
        fetchers and the ISR expiration task (``shutdown_replication`` awaits them too)."""
        self.purgatories.shutdown()
        self.isr.cancel_expiration()
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.close()

    # -- append (ReplicaAppender, TxnMarkerWriter) ---------------------------------------------
    def append_records(self, entries: Sequence[tuple[str, int, Records]], required_acks: int, timeout_ms: int,
                       origin: AppendOrigin = AppendOrigin.CLIENT,
                       transactional: TransactionalProduce | None = None) -> AppendOutcome:
        """See ``ReplicaAppender.append_records``."""
        return self.appender.append_records(entries, required_acks, timeout_ms, origin, transactional)

    def append_converted_records(self, entries: Sequence[tuple[str, int, Records]], required_acks: int,
                                 timeout_ms: int, convert: Callable[[Records, LogConfig, int], Records]
                                 ) -> AppendOutcome:
        """See ``ReplicaAppender.append_converted_records``."""
        return self.appender.append_converted_records(entries, required_acks, timeout_ms, convert)

    def set_transaction_verifier(self, verifier: TransactionVerifier,
                                 enabled: Callable[[], bool]) -> None:
        """Verify transactional produces with ``verifier`` while ``enabled()`` (KIP-890 part 1)."""
        self.appender.set_transaction_verifier(verifier, enabled)

    def add_txn_marker_listener(self, topic: str, on_markers_written: TxnMarkerCallback) -> None:
        """See ``TxnMarkerWriter.add_txn_marker_listener``."""
        self.txn_markers.add_txn_marker_listener(topic, on_markers_written)

    def write_txn_markers(self, markers: Sequence[TxnMarker], timeout_ms: int
                          ) -> list[dict[TopicPartition, int]] | Awaitable[list[dict[TopicPartition, int]]]:
        """See ``TxnMarkerWriter.write_txn_markers``."""
        return self.txn_markers.write_txn_markers(markers, timeout_ms)

    def on_high_watermark_advanced(self, tp: TopicPartition) -> None:
        """A partition's high watermark moved (a follower caught up): complete what waits on it."""
        self.purgatories.high_watermark_advanced(tp)

    # -- reads (ReplicaReader, PartitionLookups) -------------------------------------------------
    def fetch_messages(self, params: FetchParams, partitions: Sequence[FetchPartition]
                       ) -> list[LogReadResult] | Awaitable[list[LogReadResult]]:
        """See ``ReplicaReader.fetch_messages``."""
        return self.reader.fetch_messages(params, partitions)

    def read_log(self, tp: TopicPartition, fetch_offset: int, max_bytes: int) -> LogReadResult:
        """See ``ReplicaReader.read_log``."""
        return self.reader.read_log(tp, fetch_offset, max_bytes)

    def last_offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int,
                                     leader_epoch: int) -> tuple[int, int, int]:
        return self.lookups.last_offset_for_leader_epoch(tp, current_leader_epoch, leader_epoch)

    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int, isolation_level: int | None,
                                   current_leader_epoch: int, fetch_only_from_leader: bool = True) -> ListOffsetsResult:
        return self.lookups.fetch_offset_for_timestamp(tp, timestamp, isolation_level, current_leader_epoch,
                                                       fetch_only_from_leader)

    def legacy_fetch_offsets_for_timestamp(self, tp: TopicPartition, timestamp: int, max_num_offsets: int,
                                           from_consumer: bool, fetch_only_from_leader: bool = True,
                                           ) -> tuple[int, list[int]]:
        return self.lookups.legacy_fetch_offsets_for_timestamp(tp, timestamp, max_num_offsets, from_consumer,
                                                               fetch_only_from_leader)

    def delete_records(self, offsets: Sequence[tuple[TopicPartition, int]]) -> Awaitable[list[tuple[int, int]]]:
        return self.lookups.delete_records(offsets)

    def active_producer_state(self, tp: TopicPartition) -> tuple[int, dict[int, ProducerStateEntry]]:
        return self.lookups.active_producer_state(tp)

    def describe_log_dirs(self, wanted: dict[str, set[int]] | None) -> list[LogDirDescription]:
        return self.lookups.describe_log_dirs(wanted)

    # -- moving replicas between log dirs (ReplicaAlterLogDirsManager) ------------------------------
    def alter_replica_log_dirs(self, partition_dirs: Mapping[TopicPartition, str]
                               ) -> Awaitable[dict[TopicPartition, int]]:
        """See ``ReplicaAlterLogDirsManager.alter_replica_log_dirs``."""
        return self.alter_log_dirs.alter_replica_log_dirs(partition_dirs)

    # -- cluster mode (ReplicaStateChanges, IsrManager) --------------------------------------------
    def set_alter_partition_manager(self, manager: AlterPartitionManager) -> None:
        """ISR changes go to the controller through ``manager``."""
        self.isr.alter_partition_manager = manager

    def set_isr_eligibility(self, is_alive: Callable[[int], bool]) -> None:
        """``is_alive`` (the metadata cache's) decides ISR eligibility."""
        self.isr.set_isr_eligibility(is_alive)

    def start_replication(self, fetcher_manager: ReplicaFetcherManager | None = None) -> None:
        """Start the ISR expiration task (every half ``replica.lag.time.max.ms``) and the fetcher
        manager followers need. Event loop."""
        self.state_changes.start_replication(fetcher_manager)

    def _new_fetcher_manager(self) -> ReplicaFetcherManager:
        manager = ReplicaFetcherManager(self.broker_id, self._replication_config, self.hosted, self.append_thread,
                                        self.quotas)
        manager.on_high_watermark = self.purgatories.fetch.notify_high_watermark
        return manager

    async def shutdown_replication(self) -> None:
        """Stop the fetchers and the ISR expiration task and wait until they are gone."""
        await self.state_changes.shutdown_replication()

    async def become_leader_or_follower(self, request: LeaderAndIsrStates) -> LeaderAndIsrResult:
        """LeaderAndIsr from the controller (``ReplicaStateChanges.become_leader_or_follower``); then
        the moves between log dirs of the partitions now hosted resume (their future logs loaded at start-up)."""
        result = await self.state_changes.become_leader_or_follower(request)
        self.alter_log_dirs.resume()
        return result

    def stop_replicas(self, request: StopReplicaStates) -> Awaitable[StopReplicaResult]:
        """StopReplica from the controller (``ReplicaStateChanges.stop_replicas``)."""
        return self.state_changes.stop_replicas(request)
