"""KafkaServer: start-up, background duties and clean shutdown of one broker.

Start-up loads (and if needed recovers) every log, hosts the partitions the
metadata store lists, then opens the listeners: a client that can connect can
use every partition. Shutdown reverses it: stop accepting, answer what is in
flight, flush, write checkpoints and the clean-shutdown marker.

Threads: storage is synchronous. The server creates the append thread and
hands it to the replica manager, which decides where each append runs (see
``replication.append_thread``); background duties that mutate logs run on the
same thread, checkpoints on the scheduler thread, cleaning on its own.
Request handlers get :class:`~broker.broker_services.BrokerServices`, never
the server itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.broker_services import BrokerServices
from broker.config.broker_config import BrokerConfig
from broker.config.dynamic_broker_config import DynamicBrokerConfig
from broker.coordinator_wiring import (
    build_group_coordinator,
    build_share_coordinator,
    build_share_persister,
    build_share_services_if_served,
    build_transaction_coordinator,
    build_transaction_state_manager,
    build_transaction_verifier,
    follow_leadership,
    start_share_coordinator,
    start_transaction_coordinator,
)
from broker.fetch_session import FetchSessionCache
from broker.group_config_store import GroupConfigAdmin
from broker.inter_broker_channel import InterBrokerChannel
from broker.kafka_apis import KafkaApis
from broker.membership import LocalMembership, Membership, ServerParts
from broker.metadata_view import TopicRegistry
from broker.metrics import BrokerMetrics, endpoint_for
from broker.metrics.sources import RUNNING, SHUTTING_DOWN, STARTING
from broker.network.connection_quotas import ConnectionLimits, ConnectionQuotas
from broker.network.request_limits import MemoryPool, RequestQueue
from broker.network.socket_server import SocketServer
from broker.partition_end_offsets import PartitionEndOffsets
from broker.quota.client_quota_admin import ClientQuotaAdmin
from broker.quota.client_quota_configs import ClientQuotaConfigs
from broker.quota.client_quotas import ClientQuotas
from broker.security.acl_authorizer import AclAuthorizer, parse_super_users
from broker.security.channel_builders import listener_security
from broker.security.credential_cache import CredentialCache
from broker.security.scram_credentials_manager import ScramCredentialsManager
from broker.telemetry.client_metrics_manager import ClientMetricsManager
from broker.telemetry.collector import ClientTelemetryCollector
from broker.telemetry.stats import ClientMetricsStatsCollector
from broker.telemetry.subscriptions import ClientMetricsConfigAdmin, ClientMetricsSubscriptions
from coordinator.common.internal_topics import SHARE_GROUP_STATE_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from coordinator.common.scheduler import AsyncioScheduler
from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager
from replication.replica_selector import replica_selector
from replication.replication_quota_manager import (
    FOLLOWER_REPLICATION_THROTTLED_RATE,
    LEADER_REPLICATION_THROTTLED_RATE,
    REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND,
    QuotaType,
    ReplicationQuotaManager,
    ReplicationQuotas,
)
from storage.log_cleaner import LogCleaner, LogCleaningAbortedError
from storage.log_config import LogConfig
from storage.log_manager import LogManager

if TYPE_CHECKING:
    from broker.cluster.zk_broker import ZkBroker

log = logging.getLogger(__name__)

#: Kafka's replica.high.watermark.checkpoint.interval.ms default.
HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS = 5000
SHUTDOWN_DRAIN_SECONDS = 5.0
#: How long a broker halting without log directories waits for its ZooKeeper session to close.
HALT_SESSION_CLOSE_S = 3.0


class KafkaServer:
    def __init__(self, config: BrokerConfig, cluster: ZkBroker | None = None) -> None:
        """``cluster``: the broker's connected ZooKeeper membership (broker.cluster.zk_broker),
        which fixed its broker id and cluster id; None for the embedded single broker."""
        # The mode, chosen once: everything below is built the same way for both.
        self.membership: Membership = LocalMembership(config) if cluster is None else cluster
        # TLS contexts first: a bad key store or setting stops the broker before it touches its logs.
        self.listener_security = {listener.name: listener_security(config, listener.name)
                                  for listener in config.listeners}
        self.broker_id = self.membership.broker_id
        self.metadata: TopicRegistry = self.membership.metadata
        self._build_storage(config)
        self._build_coordinators()
        self._build_security_and_quotas(config)
        self.socket_server = SocketServer(
            _not_serving_yet, lambda: KafkaApis.unsupported_api_versions_response(self.membership.is_cluster,
                                                                config.group_coordinator_rebalance_protocols),
            config.socket_request_max_bytes, self.credentials, config.connection_failed_authentication_delay_ms,
            self.connection_quotas, sasl_max_receive_size=config.sasl_server_max_receive_size,
            limits=(MemoryPool(config.queued_max_request_bytes), RequestQueue(config.queued_max_requests)))
        self.membership.attach(ServerParts(
            self.replica_manager, self.group_coordinator, self.dynamic_config, self.append_thread,
            self.socket_server, self.log_manager, self.log_cleaner, self._topics_deleted))
        self.services = self._build_services(config)
        placement = self.services.coordinator_placement
        # Transactional produces are verified with the coordinator while the (dynamic) config says so.
        self.transaction_verifier = build_transaction_verifier(
            self.broker_id, self.replica_manager, self.transaction_coordinator, placement,
            self._inter_broker_channel("txn-verifier"))
        self.replica_manager.set_transaction_verifier(
            self.transaction_verifier, lambda: self.config.transaction_partition_verification_enable)
        self.share_persister = build_share_persister(self.broker_id, self.share_coordinator, placement,
                                                     self.membership.topic_admin,
                                                     self._inter_broker_channel("share-persister"))
        # Share partitions' state is initialized (and deleted) by the group coordinator through it.
        self.group_coordinator.share_groups.persister = self.share_persister
        self.share_scheduler = AsyncioScheduler()
        share = build_share_services_if_served(config, self.replica_manager, self.share_persister,
                                               self.share_scheduler, self.group_config_admin.current)
        if share is not None:
            self.services = dataclasses.replace(self.services, share=share)
        self.group_coordinator.share_offsets.persister = self.share_persister
        # The share groups' lag runs to each partition's end, here or at its leader.
        self.partition_end_offsets = PartitionEndOffsets(
            self.broker_id, self.replica_manager, self.membership.cluster_view,
            self._inter_broker_channel("end-offsets", negotiate=True))
        self.group_coordinator.share_offsets.end_offsets = self.partition_end_offsets.end_offset
        # The socket server is one of the services and KafkaApis needs them all: routed once both exist.
        self.socket_server.dispatch = KafkaApis(self.services).dispatch
        self._tasks: list[asyncio.Task[None]] = []
        #: Set once start-up is done, cleared when shutdown begins: /readyz's first condition.
        self._serving = False
        self.metrics = BrokerMetrics(self)
        self.metrics.register_collector(self.client_telemetry_collector)  # clients' pushed metrics (KIP-714)
        self.metrics.register_collector(ClientMetricsStatsCollector(self.client_metrics))
        self.metrics_endpoint = endpoint_for(config, self.metrics, self.ready)
        self._stopped = asyncio.Event()
        self.started_at = 0.0
        self._racks: dict[int, str] = {}
        self._racks_read_at = float("-inf")
        # KIP-392: which replica a consumer with a rack is sent to read from.
        self.replica_manager.reader.replica_selector = replica_selector(
            config.replica_selector_class, lambda broker_id: self._broker_racks().get(broker_id))

    def _inter_broker_channel(self, purpose: str, *, negotiate: bool = False) -> InterBrokerChannel:
        """A channel to the other brokers for one user (its owner shuts it down), on the listener and with
        the TLS and SASL settings the membership gives, finding brokers in its cluster view."""
        return InterBrokerChannel(self.broker_id, purpose, self.membership.inter_broker_endpoint,
                                  self.membership.cluster_view, negotiate=negotiate)

    def _build_storage(self, config: BrokerConfig) -> None:
        """Logs, dynamic configs, the threads that write them, replication and the log cleaner."""
        self.log_manager = LogManager(
            config.log_dirs,
            default_config=LogConfig.from_broker_defaults(config),
            topic_configs=self.membership.initial_topic_configs,
            broker_id=self.broker_id,
            cluster_id=self.metadata.cluster_id,
        )
        # Loaded before the logs are: dynamic log defaults apply from the first read.
        self.dynamic_config = DynamicBrokerConfig(config, self.broker_id, self.log_manager)
        self.membership.adopt_dynamic_configs(self.dynamic_config)
        self.append_thread = AppendThread(
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pafka-append"))
        # Cleaning rewrites whole segments: its own thread, so appends never wait for it.
        self.log_cleaner = LogCleaner(
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
            producer_id_expiration_ms=config.producer_id_expiration_ms,
        ) if config.log_cleaner_enable else None
        self.cleaner_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pafka-log-cleaner")
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager, self.append_thread,
                                              quotas=replication_quotas(config), log_cleaner=self.log_cleaner)
        # Kafka's BrokerConfigHandler and TopicConfigHandler: the throttled rates (broker configs) and
        # throttled replicas (topic configs) reach the replication quotas now and on every change.
        self.dynamic_config.add_reconfigurable(self._update_replication_quotas)
        self.log_manager.add_topic_config_listener(self.replica_manager.update_throttled_replicas)
        # Kafka's kafka-scheduler: checkpoint files are written (two fsyncs each) off the
        # append thread, so a produce never queues behind one (it read offsets, it mutates no log).
        self.scheduler_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pafka-scheduler")

    def _build_coordinators(self) -> None:
        """The group and transaction coordinators and the transactional produce verifier."""
        self.group_coordinator = build_group_coordinator(self.config, self.broker_id, self.replica_manager,
                                                         self.metadata, self._broker_racks)
        # Groups' configs override the broker's consumer-protocol timeouts (kept where the mode keeps them).
        self.group_configs = self.group_coordinator.consumer_groups.group_configs
        self.group_config_admin = GroupConfigAdmin(self.group_configs, self.membership.group_config_store())
        self.transaction_state_manager = build_transaction_state_manager(self.config, self.broker_id,
                                                                         self.replica_manager)
        coordinator_cluster = self.membership.coordinator_cluster()
        self.transaction_coordinator = build_transaction_coordinator(
            self.config, self.broker_id, self.replica_manager, self.transaction_state_manager,
            self._generate_producer_id, lambda topic: self.metadata.get(topic) is not None,
            self.group_coordinator.manager.partition_for, coordinator_cluster)
        self.share_coordinator = build_share_coordinator(self.config, self.broker_id, self.replica_manager)
        self._build_client_metrics()

    def _build_client_metrics(self) -> None:
        """KIP-714's client instances and subscriptions; the pushed metrics go to the collector."""
        self.client_telemetry_collector = ClientTelemetryCollector()
        subscriptions = ClientMetricsSubscriptions()
        self.client_metrics = ClientMetricsManager(subscriptions, self.client_telemetry_collector,
                                                   lambda: self.config.telemetry_max_bytes)
        self.client_metrics_admin = ClientMetricsConfigAdmin(subscriptions, self.membership.client_metrics_store())

    def _build_security_and_quotas(self, config: BrokerConfig) -> None:
        """SCRAM credentials, ACLs, client quotas and connection limits, kept where the mode keeps them."""
        self.credentials = CredentialCache()
        self.scram_credentials = ScramCredentialsManager(self.credentials, self.membership.credentials_file())
        self.authorizer = build_authorizer(config, self.membership)
        self.client_quota_configs = ClientQuotaConfigs()
        self.client_quota_admin = ClientQuotaAdmin(self.client_quota_configs, self.membership.client_quotas_file())
        self.quotas = ClientQuotas(self.client_quota_configs, config.quota_window_num,
                                   config.quota_window_size_seconds)
        # Kafka's ConnectionQuotas: the connection limits, which follow dynamic changes (DynamicConnectionQuota).
        self.connection_quotas = ConnectionQuotas(connection_limits(self.dynamic_config), config.quota_window_num,
                                                  config.quota_window_size_seconds)
        self.dynamic_config.add_reconfigurable(self._update_connection_limits)
        self.connection_quotas.ip_connection_rate = self.client_quota_configs.ip_quota

    def _build_services(self, config: BrokerConfig) -> BrokerServices:
        membership = self.membership
        return BrokerServices(
            broker_id=self.broker_id, metadata=self.metadata, dynamic_config=self.dynamic_config,
            replica_manager=self.replica_manager, group_coordinator=self.group_coordinator,
            transaction_coordinator=self.transaction_coordinator, topic_admin=membership.topic_admin,
            generate_producer_id=self._generate_producer_id,
            fetch_sessions=FetchSessionCache(config.max_incremental_fetch_session_cache_slots),
            append_thread=self.append_thread, socket_server=self.socket_server,
            scram_credentials=self.scram_credentials, cluster_view=membership.cluster_view,
            membership=membership, coordinator_placement=membership.coordinator_placement(self._coordinates),
            authorizer=self.authorizer, quotas=self.quotas, client_quota_admin=self.client_quota_admin,
            group_config_admin=self.group_config_admin, share_coordinator=self.share_coordinator,
            client_metrics=self.client_metrics, client_metrics_admin=self.client_metrics_admin)

    def _broker_racks(self) -> dict[int, str]:
        """The live brokers' ``broker.rack`` (those with one), for rack-aware consumer-group assignment;
        read again at most once a second (every heartbeat asks, racks seldom change)."""
        now = time.monotonic()
        if now - self._racks_read_at >= 1.0:
            brokers = self.membership.cluster_view.alive_brokers(self.config.inter_broker_listener)
            self._racks = {node.node_id: node.rack for node in brokers if node.rack}
            self._racks_read_at = now
        return self._racks

    def _coordinates(self, topic: str, partition: int) -> bool:
        """This broker's coordinator has the partition of its internal topic (loaded here)."""
        if topic == TRANSACTION_STATE_TOPIC_NAME:
            return self.transaction_coordinator.txn_manager.coordinator_log.is_local_leader(partition)
        if topic == SHARE_GROUP_STATE_TOPIC_NAME:
            return self.share_coordinator.coordinator_log.is_local_leader(partition)
        return self.group_coordinator.coordinator_log.is_local_leader(partition)

    def _topics_deleted(self, topics: set[str]) -> None:
        """Topics left this broker's metadata: their committed offsets go too (tombstones), so a topic
        created again under the same name starts without stale positions."""
        self.group_coordinator.handle_deleted_topics(topics)

    def _generate_producer_id(self) -> Awaitable[int]:
        """A fresh producer id from the mode's blocks (a file, or ZooKeeper)."""
        return self.membership.producer_ids.generate_producer_id()

    def _update_replication_quotas(self, dynamic: DynamicBrokerConfig) -> None:
        self.replica_manager.quotas.update_rates(dynamic.long_value(LEADER_REPLICATION_THROTTLED_RATE),
                                                 dynamic.long_value(FOLLOWER_REPLICATION_THROTTLED_RATE),
                                                 dynamic.long_value(REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND))

    def _update_connection_limits(self, dynamic: DynamicBrokerConfig) -> None:
        limits = connection_limits(dynamic)
        if limits != self.connection_quotas.limits:
            self.connection_quotas.update(limits)

    @property
    def config(self) -> BrokerConfig:
        """The current configuration: static properties with the dynamic broker configs on top."""
        return self.dynamic_config.config

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    def ready(self) -> bool:
        """Listeners bound and logs recovered (start-up done), and in a cluster registered and listed
        alive by the controller's metadata: what /readyz answers."""
        return self._serving and self.membership.caught_up()

    def broker_state(self) -> int:
        """Kafka's BrokerState: starting, running, shutting down."""
        if self._serving:
            return RUNNING
        return STARTING if not self.started_at else SHUTTING_DOWN

    # -- lifecycle --------------------------------------------------------
    async def startup(self) -> None:
        started = time.monotonic()
        if self.metrics_endpoint is not None:  # first: a taken port fails before any log is touched
            await self.metrics_endpoint.start()
        # A log directory whose disk fails goes offline; the broker halts when none is left.
        self.replica_manager.log_dir_failures.halt = self._halt_without_log_dirs
        self.replica_manager.log_dir_failures.start(asyncio.get_running_loop())
        await asyncio.to_thread(self.log_manager.startup)  # creates and locks the log dirs
        await self.membership.host_topics()
        self.replica_manager.alter_log_dirs.resume()  # moves between log dirs a shutdown interrupted
        self.group_coordinator.startup()  # loads groups from the __consumer_offsets partitions led here
        follow_leadership(self.group_coordinator, self.replica_manager)  # partitions created or deleted later
        start_transaction_coordinator(self.transaction_coordinator, self.replica_manager)  # likewise
        start_share_coordinator(self.share_coordinator, self.replica_manager)  # likewise
        await self.membership.load_user_and_quota_configs(self.scram_credentials, self.credentials,
                                                          self.client_quota_admin, self.client_quota_configs)
        await self.group_config_admin.store.load(self.group_configs)
        await self.client_metrics_admin.store.load(self.client_metrics_admin.subscriptions)
        if self.authorizer is not None:  # every ACL is known before the first request is
            await self.authorizer.start()
            await self.membership.follow_acl_changes(self.authorizer)
        await self.socket_server.start(self.config.listeners, self.listener_security)
        # A cluster member registers with the bound ports, then joins the controller election.
        await self.membership.startup()
        self._start_background_tasks()
        self._serving = True
        self.started_at = time.time()
        log.info("[KafkaServer id=%d] started in %.0f ms (cluster id %s)",
                 self.broker_id, (time.monotonic() - started) * 1000, self.cluster_id)

    async def shutdown(self) -> None:
        log.info("[KafkaServer id=%d] shutting down", self.broker_id)
        self._serving = False
        # Leaderships move to other replicas while this broker still serves (ControlledShutdown).
        await self.membership.controlled_shutdown()
        self.socket_server.stop_accepting()
        await self.group_coordinator.shutdown()  # answers parked joins/syncs, cancels its timers
        # Cancels its timers and marker writes, then the state manager's loads and expiry timer.
        await self.transaction_coordinator.shutdown()
        await self.transaction_verifier.shutdown()  # its channel to other brokers' coordinators
        if self.services.share is not None:
            self.services.share.close()  # its partitions' lock timers and loads
        self.share_scheduler.shutdown()
        await self.share_persister.shutdown()  # its channel, likewise
        await self.partition_end_offsets.shutdown()  # its channel to the partitions' leaders
        await self.share_coordinator.shutdown()  # cancels its loads
        # Parked long polls (and acks=all produces) are answered now with what they
        # have, so draining waits only for real work, not for fetch.wait.max.ms.
        self.replica_manager.shutdown()
        await self.replica_manager.alter_log_dirs.close()  # moves stop; their future logs stay for the restart
        await self.replica_manager.log_dir_failures.close()  # a log dir event on its way to ZooKeeper
        await self.membership.shutdown_replication()  # fetchers stop before the logs close
        await self.socket_server.drain(SHUTDOWN_DRAIN_SECONDS)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Appends already handed to the append thread finish before the logs close;
        # a cleaning pass in progress is aborted (its files stay intact) and awaited.
        if self.log_cleaner is not None:
            for log_ in self.log_manager.all_logs():
                self.log_cleaner.abort_cleaning(log_)
        self.cleaner_executor.shutdown(wait=True)
        self.scheduler_executor.shutdown(wait=True)
        self.append_thread.shutdown()
        await asyncio.to_thread(self.log_manager.shutdown)
        await self.membership.shutdown()  # a controller resigns, a registration goes with the session
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        log.info("[KafkaServer id=%d] shut down cleanly", self.broker_id)
        self._stopped.set()

    async def _halt_without_log_dirs(self) -> None:
        """Kafka's Exit.halt when every log directory failed; the ZooKeeper session is closed first
        (briefly), so the controller moves leadership now rather than after the session timeout."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.membership.shutdown(), HALT_SESSION_CLOSE_S)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(1)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # -- background duties (owned here, cancelled at shutdown) ------------
    def _start_background_tasks(self) -> None:
        config = self.config
        self._every("log-retention", config.log_retention_check_interval_ms, self.log_manager.cleanup_logs)
        self._every("delete-segments", min(config.log_segment_delete_delay_ms, 60_000) or 1000,
                    self.log_manager.delete_pending_segments)
        if config.log_flush_scheduler_interval_ms < 2**62:
            self._every("log-flusher", config.log_flush_scheduler_interval_ms, self.log_manager.flush_dirty_logs)
        self._every("recovery-point-checkpoint", config.log_flush_offset_checkpoint_interval_ms,
                    self.log_manager.checkpoint_log_recovery_offsets, self.scheduler_executor)
        self._every("highwatermark-checkpoint", HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS,
                    self.log_manager.checkpoint_high_watermarks, self.scheduler_executor)
        self._every("producer-expiration", config.producer_id_expiration_check_interval_ms,
                    self._remove_expired_producers)
        if self.log_cleaner is not None:
            self._tasks.append(asyncio.create_task(self._log_cleaner_loop(), name="log-cleaner"))

    async def _log_cleaner_loop(self) -> None:
        """Kafka's CleanerThread: clean the filthiest log; back off when none needs it."""
        cleaner, loop = self.log_cleaner, asyncio.get_running_loop()
        assert cleaner is not None
        backoff = self.config.log_cleaner_backoff_ms / 1000
        while True:
            try:
                cleaned = await loop.run_in_executor(self.cleaner_executor, cleaner.clean_once,
                                                     self.log_manager.all_logs())
            except asyncio.CancelledError:
                raise
            except LogCleaningAbortedError as exc:
                # its log is being deleted or replaced: the files are intact, the next pass picks another
                log.info("[KafkaServer id=%d] %s", self.broker_id, exc)
                cleaned = None
            except Exception:
                log.exception("[KafkaServer id=%d] log cleaning failed", self.broker_id)
                cleaned = None
            await asyncio.sleep(0 if cleaned is not None else backoff)

    def _remove_expired_producers(self) -> None:
        """Forget idempotent producers idle for producer.id.expiration.ms (append thread)."""
        now = int(time.time() * 1000)
        for log_ in self.log_manager.all_logs():
            if log_.producer_state is not None:
                log_.producer_state.remove_expired_producers(now)

    def _every(self, name: str, interval_ms: int, duty: Callable[[], Any],
               executor: concurrent.futures.Executor | None = None) -> None:
        """Run ``duty`` every interval: on the append thread unless another executor is given."""
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    if executor is None:
                        # Same thread as appends: duties that mutate logs never race them.
                        await self.append_thread.run(duty)
                    else:
                        await asyncio.get_running_loop().run_in_executor(executor, duty)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("[KafkaServer id=%d] background task %s failed", self.broker_id, name)

        self._tasks.append(asyncio.create_task(loop(), name=name))


def build_authorizer(config: BrokerConfig, membership: Membership) -> AclAuthorizer | None:
    """The ACL authorizer authorizer.class.name asks for: ACLs in ZooKeeper for a cluster member,
    in the first log dir for a lone broker."""
    if not config.authorizer_class_name:
        return None
    return AclAuthorizer(membership.acl_store(), parse_super_users(config.super_users),
                         config.allow_everyone_if_no_acl_found)


def connection_limits(dynamic: DynamicBrokerConfig) -> ConnectionLimits:
    """The connection limits the broker's current configuration (dynamic values included) sets."""
    config = dynamic.config
    return ConnectionLimits.from_lookup(lambda name: dynamic.value_text(name, dynamic.per_broker,
                                                                        dynamic.cluster_default),
                                        [listener.name for listener in config.listeners],
                                        config.inter_broker_listener)


def replication_quotas(config: BrokerConfig) -> ReplicationQuotas:
    """Kafka's QuotaFactory: the leader and follower quotas over the configured rate windows,
    unbounded until the dynamic throttled rates say otherwise."""
    def quota(quota_type: QuotaType) -> ReplicationQuotaManager:
        return ReplicationQuotaManager(quota_type, num_samples=config.replication_quota_window_num,
                                       window_size_seconds=config.replication_quota_window_size_seconds)

    return ReplicationQuotas(quota(QuotaType.LEADER_REPLICATION), quota(QuotaType.FOLLOWER_REPLICATION),
                             quota(QuotaType.ALTER_LOG_DIRS_REPLICATION))


def _not_serving_yet(_: object) -> None:
    raise RuntimeError("a request arrived before the broker's APIs were routed")
