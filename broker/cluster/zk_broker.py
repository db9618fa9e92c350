"""ZkBroker: one broker's membership of a ZooKeeper-mode cluster, from connect to deregister.

Kafka's KafkaServer (ZooKeeper mode) in order:

1. :meth:`ZkBroker.connect` (before anything touches the log dirs): connect to
   ZooKeeper (the chroot is created if missing), get or create the cluster id
   at ``/cluster/id``, check ``meta.properties`` in every log dir (a broker
   pointed at another cluster's data refuses to start), fix the broker id
   (``broker.id``; -1 takes the id the dirs carry, else ``/brokers/seqid`` +
   ``reserved.broker.max.id`` when ``broker.id.generation.enable``), and read
   every topic's config overrides (the logs load with them) and the dynamic
   broker configs (``/config/brokers/<id>`` and ``<default>``).
2. The server builds its components around :attr:`metadata_cache` and calls
   :meth:`attach`.
3. :meth:`startup` once the listeners are bound: register ``/brokers/ids/N``
   (every advertised listener with its bound port, the listener map, the rack;
   the znode's czxid is the broker epoch), re-registering after a session
   expiry; follow ``/config/changes`` (Kafka's notification listener: each
   topic or broker config change re-read once); start replication (ISR
   expiration, fetchers), the AlterPartition sender and the KafkaController
   (every broker runs one; the one elected through ``/controller`` acts).
4. On SIGTERM, :meth:`controlled_shutdown` first (ControlledShutdown to the
   controller, ``controlled.shutdown.max.retries`` attempts
   ``controlled.shutdown.retry.backoff.ms`` apart), then the server's own
   shutdown, then :meth:`shutdown`: the controller resigns and closing the
   session removes the registration.

kazoo runs on the ZooKeeper client's own thread (controller.zk.kafka_zk_client);
everything here runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.cluster.components import controller_config, replication_config
from broker.cluster.controlled_shutdown import ControlledShutdownClient
from broker.cluster.coordinator_cluster import CoordinatorCluster, coordinator_cluster_from_cache
from broker.cluster.metadata_cache import ZkMetadataCache
from broker.cluster.zk_admin import ZK_WRITE_TIMEOUT_S, ZkTopicAdmin
from broker.cluster.zk_client_metrics import ZkClientMetricsStore
from broker.cluster.zk_group_configs import ZkGroupConfigStore
from broker.cluster.zk_producer_id_manager import ZkProducerIdManager
from broker.config.broker_config import BrokerConfig
from broker.inter_broker_channel import InterBrokerEndpoint
from broker.membership import CoordinatorPlacement, LeaderCoordinatorPlacement, ServerParts
from broker.metadata_store import new_cluster_id
from broker.quota.client_quota_configs import ClientQuotaConfigs
from broker.quota.client_quota_entity import ClientQuotaEntity
from broker.security.acl_store import AclStore, ZkAclStore, decode_literal_change, decode_prefixed_change
from broker.security.channel_builders import inter_broker_sasl, inter_broker_ssl_context
from controller.kafka_controller import KafkaController
from controller.zk.kafka_zk_client import KafkaZkClient, NodeExistsError
from controller.zk.zk_data import (
    ACL_CHANGE_PREFIX,
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    CONFIG_TYPE_BROKER,
    CONFIG_TYPE_CLIENT_METRICS,
    CONFIG_TYPE_GROUP,
    CONFIG_TYPE_TOPIC,
    CONFIG_TYPE_USER,
    DEFAULT_ENTITY,
    LITERAL_ACL_CHANGES_PATH,
    PREFIXED_ACL_CHANGES_PATH,
    BrokerInfo,
    EndPoint,
    decode_config_change_notification,
    desanitize,
)
from controller.zk.zk_node_change_notification_listener import ZkNodeChangeNotificationListener
from protocol.errors import ErrorCode
from protocol.messages.update_metadata import UpdateMetadataRequest
from replication.alter_partition_manager import AlterPartitionManager
from replication.state_change_requests import (
    LeaderAndIsrResult,
    LeaderAndIsrStates,
    StopReplicaResult,
    StopReplicaStates,
)
from storage.meta_properties import check_meta_properties

if TYPE_CHECKING:
    from broker.config.dynamic_broker_config import DynamicBrokerConfig
    from broker.group_config_store import GroupConfigStore
    from broker.quota.client_quota_admin import ClientQuotaAdmin
    from broker.quota.client_quota_configs import ClientQuotasFile
    from broker.security.acl_authorizer import AclAuthorizer
    from broker.security.acl_binding import ResourcePattern
    from broker.security.credential_cache import CredentialCache, ScramCredentialsFile
    from broker.security.scram_credentials_manager import ScramCredentialsManager
    from broker.telemetry.subscriptions import ClientMetricsStore
    from replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

#: Pause between registration attempts after a session expiry.
REREGISTER_BACKOFF_S = 1.0


class BrokerIdGenerationDisabledError(Exception):
    """broker.id is -1, the log dirs carry none and broker.id.generation.enable is false."""


class ZkBroker:
    """A broker's ZooKeeper session, registration, controller and cluster-wide admin path: the
    cluster member's broker.membership.Membership."""

    is_cluster = True

    def __init__(self, config: BrokerConfig, zk: KafkaZkClient, cluster_id: str, broker_id: int,
                 initial_topic_configs: dict[str, dict[str, str]]) -> None:
        self.config = config
        #: This broker's connections to the others (replication, controller, coordinators) use TLS when
        #: the inter-broker listener is SSL, with that listener's ssl.* settings; None: plain TCP.
        self.inter_broker_ssl = inter_broker_ssl_context(config)
        self.inter_broker_sasl = inter_broker_sasl(config)
        self.inter_broker_endpoint = InterBrokerEndpoint(config.inter_broker_listener, self.inter_broker_ssl,
                                                         self.inter_broker_sasl)
        self.zk = zk
        self.cluster_id = cluster_id
        self.broker_id = broker_id
        #: Topic overrides read at connect time: the logs load with them.
        self.initial_topic_configs = initial_topic_configs
        self.metadata_cache = ZkMetadataCache(broker_id, cluster_id)
        for topic, configs in initial_topic_configs.items():
            self.metadata_cache.set_topic_configs(topic, configs)
        #: The czxid of /brokers/ids/N: -1 until registered.
        self.broker_epoch = -1
        self.controller: KafkaController | None = None
        self.config_changes: ZkNodeChangeNotificationListener | None = None
        #: The literal and prefixed ACL change listeners, when an authorizer is configured.
        self.acl_changes: list[ZkNodeChangeNotificationListener] = []
        self._credentials: CredentialCache | None = None
        self._client_quotas: ClientQuotaConfigs | None = None
        self.alter_partition_manager: AlterPartitionManager | None = None
        self._parts: ServerParts | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.producer_ids = ZkProducerIdManager(broker_id, zk)
        self._shutting_down = False
        #: Topics whose config znode is being read.
        self._reading: set[str] = set()
        #: Built in connect(), on the broker's event loop.
        self.loop = asyncio.get_running_loop()
        self.admin = ZkTopicAdmin(broker_id, zk, self.metadata_cache, self.loop)
        self.group_configs = ZkGroupConfigStore(zk, self.loop)
        self.client_metrics = ZkClientMetricsStore(zk, self.loop)
        #: /config/brokers/<id> and /config/brokers/<default> as read at connect time.
        self.initial_broker_configs: tuple[dict[str, str], dict[str, str]] = ({}, {})

    # -- 1. before the server exists -------------------------------------------
    @classmethod
    async def connect(cls, config: BrokerConfig) -> ZkBroker:
        assert config.zookeeper_connect
        zk = KafkaZkClient(config.zookeeper_connect, config.zookeeper_session_timeout_ms,
                           config.zookeeper_connection_timeout)
        await zk.start()
        try:
            cluster_id = await zk.create_or_get_cluster_id(new_cluster_id())
            # Another cluster's data, or another broker's, refuses the start (Kafka's errors).
            stored = await asyncio.to_thread(check_meta_properties, config.log_dirs, cluster_id, config.node_id)
            broker_id = stored.broker_id
            if broker_id is None:  # broker.id -1 and no id in the log dirs: Kafka's generateBrokerId
                if not config.broker_id_generation_enable:
                    raise BrokerIdGenerationDisabledError(
                        "broker.id is -1 and broker.id.generation.enable is false: set broker.id")
                broker_id = await zk.generate_broker_sequence_id() + config.reserved_broker_max_id
                await asyncio.to_thread(check_meta_properties, config.log_dirs, cluster_id, broker_id)
            topics = await zk.get_all_topics()
            configs = await zk.get_topic_configs(topics) if topics else {}
            broker_configs = (await zk.get_broker_configs(str(broker_id)), await zk.get_broker_configs(DEFAULT_ENTITY))
        except BaseException:
            await zk.close()
            raise
        log.info("[KafkaServer id=%d] joined cluster %s through %s", broker_id, cluster_id, config.zookeeper_connect)
        member = cls(config, zk, cluster_id, broker_id, {t: c for t, c in configs.items() if c})
        member.initial_broker_configs = broker_configs
        return member

    def attach(self, parts: ServerParts) -> None:
        self._parts = parts
        self.replica_states.replication_config = replication_config(self.config, self.inter_broker_ssl, self.inter_broker_sasl)
        self.admin.attach(parts.dynamic_config, parts.log_manager)
        # Broker config changes (config admin, on the append thread) go to ZooKeeper.
        parts.dynamic_config.cluster_writer = self._write_broker_configs_blocking

    def adopt_dynamic_configs(self, dynamic_config: DynamicBrokerConfig) -> None:
        """The dynamic broker configs start from what ZooKeeper holds, before the server builds its
        components from them (no file write here: this runs on the event loop)."""
        dynamic_config.adopt(*self.initial_broker_configs, save=False)

    # -- the mode's parts (broker.membership.Membership) ----------------------------
    @property
    def metadata(self) -> ZkMetadataCache:
        return self.metadata_cache

    @property
    def cluster_view(self) -> ZkMetadataCache:
        return self.metadata_cache

    @property
    def topic_admin(self) -> ZkTopicAdmin:
        return self.admin

    def coordinator_cluster(self) -> CoordinatorCluster | None:
        """Markers and verifications go to the partitions' leaders the metadata cache names."""
        return coordinator_cluster_from_cache(self.broker_id, self.metadata_cache, self.config.inter_broker_listener,
                                              self.inter_broker_ssl, self.inter_broker_sasl)

    def coordinator_placement(self, is_local_leader: Callable[[str, int], bool]) -> CoordinatorPlacement:
        return LeaderCoordinatorPlacement(self.metadata_cache)

    def acl_store(self) -> AclStore:
        return ZkAclStore(self.zk)

    def credentials_file(self) -> ScramCredentialsFile | None:
        return None  # /config/users

    def client_quotas_file(self) -> ClientQuotasFile | None:
        return None  # /config/{users,clients,ips}

    def group_config_store(self) -> GroupConfigStore:
        return self.group_configs  # /config/groups

    def client_metrics_store(self) -> ClientMetricsStore:
        return self.client_metrics  # /config/client-metrics

    async def host_topics(self) -> None:
        """Partitions are hosted when the controller's LeaderAndIsr says so."""

    async def load_user_and_quota_configs(self, scram: ScramCredentialsManager, credentials: CredentialCache,
                                          quota_admin: ClientQuotaAdmin, quota_configs: ClientQuotaConfigs) -> None:
        scram.writer = self.write_user_configs
        await self.load_user_credentials(credentials)
        quota_admin.writer = self.write_quota_configs
        await self.load_client_quotas(quota_configs)

    async def wait_for_brokers(self, listener_name: str) -> None:
        cache = self.metadata_cache
        await cache.wait_until(lambda: bool(cache.alive_brokers(listener_name)),
                               self.config.zookeeper_session_timeout_ms / 1000)

    @property
    def parts(self) -> ServerParts:
        assert self._parts is not None, "ZkBroker.attach was not called"
        return self._parts

    @property
    def replica_states(self) -> ReplicaManager:
        """The replica manager, for its cluster-mode calls (replication.replica_state_changes)."""
        return self.parts.replica_manager

    # -- 3. once the listeners are bound ---------------------------------------
    async def startup(self) -> None:
        self.zk.on_session_expired(self._on_session_expired)
        await self._register_at_startup()
        # Kafka's config change listener: each /config/changes notification once, in order.
        self.config_changes = ZkNodeChangeNotificationListener(
            self.zk, CONFIG_CHANGES_PATH, CONFIG_CHANGE_PREFIX, self._on_config_change)
        await self.config_changes.start()
        self.alter_partition_manager = AlterPartitionManager(
            self.broker_id, lambda: self.broker_epoch, self.controller_node,
            request_timeout_ms=self.config.controller_socket_timeout_ms, ssl_context=self.inter_broker_ssl,
            sasl=self.inter_broker_sasl)
        states = self.replica_states
        states.set_alter_partition_manager(self.alter_partition_manager)
        states.set_isr_eligibility(self.metadata_cache.has_alive_broker)
        states.start_replication()  # ISR expiration, and the fetchers followers need
        states.log_dir_failures.add_callback(self._propagate_log_dir_event)
        settings = controller_config(self.config, self.inter_broker_ssl, self.inter_broker_sasl)
        self.controller = KafkaController(settings, self.broker_id, self.zk, lambda: self.broker_epoch)
        await self.controller.startup()

    def caught_up(self) -> bool:
        """Registered, and an UpdateMetadata from the controller listed this broker alive."""
        return self.broker_epoch >= 0 and self.metadata_cache.has_alive_broker(self.broker_id)

    async def _propagate_log_dir_event(self, dir: Path) -> None:
        """The controller learns that a log directory of this broker failed (Kafka's propagateLogDirEvent)."""
        created = await self.zk.propagate_log_dir_event(self.broker_id)
        log.info("[KafkaServer id=%d] log dir %s offline: wrote %s", self.broker_id, dir, created)

    def broker_info(self) -> BrokerInfo:
        """This broker as /brokers/ids/N shows it: every advertised listener (bound ports for port 0)."""
        config = self.config
        bound = self.parts.socket_server.bound
        endpoints = []
        for listener in config.effective_advertised_listeners:
            host, port = listener.host, listener.port
            if port == 0:
                host, port = bound.get(listener.name, (host, port))
            endpoints.append(EndPoint(host, port, listener.name, config.security_protocol_of(listener.name)))
        return BrokerInfo(self.broker_id, endpoints, config.rack)

    async def _register_at_startup(self) -> None:
        """A broker restarted right after a crash finds its previous registration still there until
        ZooKeeper expires that session; it waits for it (Kafka would refuse to start) at most one
        session timeout and a little more."""
        deadline = self.loop.time() + self.config.zookeeper_session_timeout_ms / 1000 + 5.0
        while True:
            try:
                await self._register()
                return
            except NodeExistsError:
                if self.loop.time() >= deadline:
                    raise
                log.info("[KafkaServer id=%d] /brokers/ids/%d is held by an earlier session; waiting for it to "
                         "expire", self.broker_id, self.broker_id)
                await asyncio.sleep(REREGISTER_BACKOFF_S / 2)

    async def _register(self) -> None:
        self.broker_epoch = await self.zk.register_broker(self.broker_info())
        log.info("[KafkaServer id=%d] registered /brokers/ids/%d (broker epoch %d)",
                 self.broker_id, self.broker_id, self.broker_epoch)

    def _on_session_expired(self) -> None:
        """The ephemeral registration went with the old session: register again in the new one."""
        if self._shutting_down:
            return
        log.warning("[KafkaServer id=%d] ZooKeeper session expired; registering again", self.broker_id)
        self._spawn(self._reregister(), "zk-reregister")

    async def _reregister(self) -> None:
        while not self._shutting_down:
            try:
                await self._register()
                return
            except NodeExistsError:
                # The old session's znode lingers until the server expires it.
                pass
            except Exception as exc:  # ZooKeeper not reachable yet
                log.warning("[KafkaServer id=%d] registration failed: %r; retrying", self.broker_id, exc)
            await asyncio.sleep(REREGISTER_BACKOFF_S)

    def controller_node(self) -> tuple[int, str, int] | None:
        """The controller's id and inter-broker endpoint, as the metadata cache knows it."""
        cache = self.metadata_cache
        node = cache.controller_node(self.config.inter_broker_listener)
        return (node.node_id, node.host, node.port) if node is not None else None

    async def lookup_controller(self) -> tuple[int, str, int] | None:
        """The controller from the cache, else straight from ZooKeeper (no UpdateMetadata yet)."""
        known = self.controller_node()
        if known is not None:
            return known
        controller_id = await self.zk.get_controller_id()
        if controller_id is None:
            return None
        brokers = await self.zk.get_all_brokers()
        info = brokers.get(controller_id)
        endpoint = info.endpoint(self.config.inter_broker_listener) if info is not None else None
        return (controller_id, endpoint.host, endpoint.port) if endpoint is not None else None

    # -- the controller's requests ------------------------------------------------
    def check_broker_epoch(self, broker_epoch: int) -> ErrorCode:
        """Kafka's isBrokerEpochStale: a request meant for an earlier registration of this broker
        (its session expired and it registered again) is refused; -1 means the sender did not say."""
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NO_ERROR

    def update_metadata(self, request: UpdateMetadataRequest, version: int) -> ErrorCode:
        cache = self.metadata_cache
        error = self.check_broker_epoch(request.broker_epoch)
        if error:
            return error
        rm_epoch = self.replica_states.controller_epoch
        if request.controller_epoch < max(cache.controller_epoch, rm_epoch):
            log.info("[KafkaServer id=%d] refusing UpdateMetadata from controller %d with epoch %d: the latest "
                     "known controller epoch is %d", self.broker_id, request.controller_id, request.controller_epoch,
                     max(cache.controller_epoch, rm_epoch))
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.replica_states.controller_epoch = request.controller_epoch
        deleted = cache.update_metadata(request, version)
        unread = [t.name for t in cache if not cache.has_topic_configs(t.name) and t.name not in self._reading]
        if unread:  # topics this broker hosts no replica of: DescribeConfigs shows their overrides too
            self._spawn(self.ensure_topic_configs(unread), "topic-configs")
        gone = {topic for topic, _ in deleted if topic not in cache}
        if gone:
            # Committed offsets of deleted topics go too (Kafka's onPartitionsDeleted), and their
            # overrides: a topic created again under the name starts from its own config znode.
            self.parts.topics_deleted(gone)
            for topic in gone:
                cache.remove_topic_configs(topic)
            self._spawn(self._forget_topic_configs(sorted(gone)), "forget-topic-configs")
        return ErrorCode.NO_ERROR

    async def become_leader_or_follower(self, request: LeaderAndIsrStates) -> LeaderAndIsrResult:
        # A new topic's overrides are in ZooKeeper before its assignment: read them before its logs exist.
        await self.ensure_topic_configs(s.topic for s in request.partition_states)
        return await self.replica_states.become_leader_or_follower(request)

    async def stop_replicas(self, request: StopReplicaStates) -> StopReplicaResult:
        return await self.replica_states.stop_replicas(request)

    # -- producer ids: blocks of /latest_producer_id_block --------------------------
    async def generate_producer_id(self) -> int:
        return await self.producer_ids.generate_producer_id()

    # -- topic configs: /config/topics/T, changes announced under /config/changes ------------
    async def ensure_topic_configs(self, topics: Iterable[str]) -> None:
        """Read the overrides of topics this broker has not seen yet, before their logs are created
        (a LeaderAndIsr for a new topic: its config znode was written before its assignment)."""
        cache = self.metadata_cache
        # A topic not in the cache yet is new (or this broker just started): its znode is read
        # again, so a topic re-created under an old name never keeps the old overrides.
        unknown = sorted({t for t in topics if t not in cache or not cache.has_topic_configs(t)})
        if not unknown:
            return
        self._reading.update(unknown)
        try:
            fetched = await self.zk.get_topic_configs(unknown)
            for topic in unknown:
                await self.apply_topic_configs(topic, fetched.get(topic, {}))
        finally:
            self._reading.difference_update(unknown)

    async def apply_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        cache = self.metadata_cache
        if cache.has_topic_configs(topic) and configs == cache.configs_of(topic):
            return
        self.metadata_cache.set_topic_configs(topic, configs)
        if self._parts is not None:
            await self._parts.append_thread.run(self._parts.log_manager.update_topic_config, topic, configs)

    async def _forget_topic_configs(self, topics: list[str]) -> None:
        log_manager = self.parts.log_manager
        for topic in topics:
            await self.parts.append_thread.run(log_manager.update_topic_config, topic, {})

    async def _on_config_change(self, data: bytes) -> None:
        """A config change notification: re-read the entity it names, if it concerns this broker."""
        entity_type, _, name = decode_config_change_notification(data).partition("/")
        if entity_type == CONFIG_TYPE_TOPIC:
            fetched = await self.zk.get_topic_configs([name])
            await self.apply_topic_configs(name, fetched.get(name, {}))
        elif entity_type == CONFIG_TYPE_BROKER and name in (str(self.broker_id), DEFAULT_ENTITY):
            await self._reload_broker_configs()
        elif entity_type == CONFIG_TYPE_USER and "/" not in name and self._credentials is not None:
            # Kafka's UserConfigHandler: the user's SCRAM credentials follow its znode.
            user = desanitize(name)
            self._credentials.update_user(user, await self.zk.get_user_config(user))
        elif entity_type == CONFIG_TYPE_GROUP:
            await self.group_configs.reload(name)
        elif entity_type == CONFIG_TYPE_CLIENT_METRICS:
            await self.client_metrics.reload(name)
        await self._reload_client_quota(entity_type, name)

    async def _reload_client_quota(self, entity_type: str, name: str) -> None:
        """Kafka's ClientIdConfigHandler / UserConfigHandler / IpConfigHandler: the quotas of the entity
        a notification names (``users/alice``, ``users/alice/clients/c1``, ``clients/c1``, ``ips/...``)."""
        entity = ClientQuotaEntity.from_zk_entity_path(f"{entity_type}/{name}")
        if entity is not None and self._client_quotas is not None:
            self._client_quotas.replace(entity, await self.zk.get_entity_config(entity.zk_entity_path()))

    # -- ACLs: /kafka-acl-changes and /kafka-acl-extended-changes ----------------------------------
    async def follow_acl_changes(self, authorizer: AclAuthorizer) -> None:
        """Kafka's AclAuthorizer change listeners: each notification names one resource pattern, whose
        znode is read again (a change made through any broker reaches every broker's cache)."""
        store = ZkAclStore(self.zk)

        def on_change(decode: Callable[[bytes], ResourcePattern]) -> Callable[[bytes], Awaitable[None]]:
            async def reload(data: bytes) -> None:
                pattern = decode(data)
                authorizer.update_resource(pattern, await store.load(pattern))
            return reload

        for root, decode in ((LITERAL_ACL_CHANGES_PATH, decode_literal_change),
                             (PREFIXED_ACL_CHANGES_PATH, decode_prefixed_change)):
            listener = ZkNodeChangeNotificationListener(self.zk, root, ACL_CHANGE_PREFIX, on_change(decode))
            await listener.start()
            self.acl_changes.append(listener)

    # -- users: /config/users/<user>, SCRAM credentials -------------------------------------
    async def load_user_credentials(self, credentials: CredentialCache) -> None:
        """Every user's credentials before the listeners open; changes follow by notification."""
        self._credentials = credentials
        for user, config in (await self.zk.get_user_configs()).items():
            credentials.update_user(user, config)

    async def write_user_configs(self, user: str, changes: Mapping[str, str | None]) -> dict[str, str]:
        return await self.zk.alter_user_config(user, changes)

    # -- client quotas: /config/users, /config/clients, /config/users/<u>/clients, /config/ips ------------
    async def load_client_quotas(self, configs: ClientQuotaConfigs) -> None:
        """Every quota entity's config before the listeners open; changes follow by notification."""
        self._client_quotas = configs
        for path, config in (await self.zk.get_quota_entity_configs()).items():
            entity = ClientQuotaEntity.from_zk_entity_path(path)
            if entity is not None:
                configs.replace(entity, config)

    async def write_quota_configs(self, entity: ClientQuotaEntity, changes: Mapping[str, str | None]) -> dict[str, str]:
        return await self.zk.alter_entity_config(entity.zk_entity_path(), changes)

    def _write_broker_configs_blocking(self, resource_name: str, configs: dict[str, str]) -> None:
        """A broker resource's dynamic configs to /config/brokers/<id> or <default> (append thread)."""
        entity = DEFAULT_ENTITY if resource_name == "" else resource_name
        asyncio.run_coroutine_threadsafe(self.zk.set_broker_configs(entity, configs), self.loop).result(
            ZK_WRITE_TIMEOUT_S)

    async def _reload_broker_configs(self) -> None:
        per_broker = await self.zk.get_broker_configs(str(self.broker_id))
        cluster_default = await self.zk.get_broker_configs(DEFAULT_ENTITY)
        dynamic = self.parts.dynamic_config
        if (per_broker, cluster_default) != (dynamic.per_broker, dynamic.cluster_default):
            await self.parts.append_thread.run(dynamic.adopt, per_broker, cluster_default)

    # -- 4. shutdown ---------------------------------------------------------------
    async def controlled_shutdown(self) -> None:
        """Move this broker's leaderships away before it stops serving (Kafka's controlledShutdown)."""
        if not self.config.controlled_shutdown_enable or self.broker_epoch < 0:
            return
        client = ControlledShutdownClient(self.broker_id, lambda: self.broker_epoch, self.lookup_controller,
                                          self.config, self.inter_broker_ssl, self.inter_broker_sasl)
        await client.run()

    async def shutdown_replication(self) -> None:
        """Stop following (fetchers, ISR expiration) before the logs close."""
        if self._parts is not None:
            await self.replica_states.shutdown_replication()
        if self.alter_partition_manager is not None:
            await self.alter_partition_manager.shutdown()

    async def shutdown(self) -> None:
        """After the server's shutdown: the controller resigns, the session (and registration) ends."""
        self._shutting_down = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.config_changes is not None:
            await self.config_changes.close()
        for listener in self.acl_changes:
            await listener.close()
        if self.controller is not None:
            await self.controller.shutdown()
        await self.zk.close()  # the ephemeral /brokers/ids/N goes with the session

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("[KafkaServer id=%d] %s failed", self.broker_id, task.get_name(), exc_info=task.exception())
