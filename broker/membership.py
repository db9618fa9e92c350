"""The broker's mode: a lone broker or a member of a ZooKeeper cluster, chosen once at start-up.

Handlers and the server run one code path. What differs between the modes is
asked of a :class:`Membership`, built once before the server:

* :class:`LocalMembership`: the lone (embedded) broker. Its topics are its
  :class:`~broker.metadata_store.MetadataStore`, it is its own controller and
  every partition's leader, and its credentials, quotas, ACLs and producer-id
  blocks live in files of its first log dir.
* ``broker.cluster.zk_broker.ZkBroker``: a cluster member. Its topics come from
  the controller's UpdateMetadata (the metadata cache), changes go through
  ZooKeeper, and it serves the controller's requests.

The narrow interfaces it hands out (:class:`~broker.topic_admin.TopicAdmin`,
:class:`~broker.metadata_view.TopicRegistry` and
:class:`~broker.metadata_view.ClusterView`, :class:`CoordinatorPlacement`,
:class:`ProducerIdSource`) have one implementation per mode.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker.admin_manager import AdminManager
from broker.group_config_store import GroupConfigStore, LocalGroupConfigStore
from broker.inter_broker_channel import InterBrokerEndpoint
from broker.metadata_store import MetadataStore
from broker.metadata_view import BrokerNode, ClusterView, LocalClusterView, TopicRegistry
from broker.producer_id_manager import ProducerIdManager
from broker.quota.client_quota_configs import ClientQuotasFile
from broker.security.acl_store import AclStore, FileAclStore
from broker.security.credential_cache import ScramCredentialsFile
from broker.telemetry.subscriptions import ClientMetricsStore, LocalClientMetricsStore
from broker.topic_admin import LocalTopicAdmin, TopicAdmin
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.coordinator_cluster import CoordinatorCluster
    from broker.config.broker_config import BrokerConfig
    from broker.config.dynamic_broker_config import DynamicBrokerConfig
    from broker.network.socket_server import SocketServer
    from broker.quota.client_quota_admin import ClientQuotaAdmin
    from broker.quota.client_quota_configs import ClientQuotaConfigs
    from broker.security.acl_authorizer import AclAuthorizer
    from broker.security.credential_cache import CredentialCache
    from broker.security.scram_credentials_manager import ScramCredentialsManager
    from controller.kafka_controller import KafkaController
    from coordinator.group.group_coordinator import GroupCoordinator
    from protocol.messages.update_metadata import UpdateMetadataRequest
    from replication.append_thread import AppendThread
    from replication.replica_manager import ReplicaManager
    from replication.state_change_requests import LeaderAndIsrResult, LeaderAndIsrStates, StopReplicaResult, StopReplicaStates
    from storage.log_cleaner import LogCleaner
    from storage.log_manager import LogManager


@dataclass(frozen=True, slots=True)
class ServerParts:
    """The server's components a membership works with (KafkaServer builds them)."""

    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    dynamic_config: DynamicBrokerConfig
    append_thread: AppendThread
    socket_server: SocketServer
    log_manager: LogManager
    log_cleaner: LogCleaner | None
    #: What the broker does when topics leave its metadata (their committed offsets go, as
    #: Kafka's onPartitionsDeleted): called from each mode's metadata update.
    topics_deleted: Callable[[set[str]], None]


class ProducerIdSource(Protocol):
    """Fresh producer ids from claimed blocks: a file of the lone broker, ZooKeeper's
    /latest_producer_id_block in a cluster."""

    async def generate_producer_id(self) -> int: ...


class LocalProducerIds:
    """The lone broker's: blocks claimed on the append thread (a new block is an fsync)."""

    def __init__(self, manager: ProducerIdManager, append_thread: AppendThread) -> None:
        self.manager = manager
        self.append_thread = append_thread

    async def generate_producer_id(self) -> int:
        return await self.append_thread.run(self.manager.generate_producer_id)


class CoordinatorPlacement(Protocol):
    """Which broker coordinates a partition of __consumer_offsets or __transaction_state."""

    def coordinator_node(self, topic: str, partition: int, listener_name: str) -> BrokerNode | None:
        """The coordinator as reached through the listener; None while none is available."""
        ...


class LocalCoordinatorPlacement:
    """The lone broker coordinates a partition once its coordinator has it (loaded here)."""

    def __init__(self, view: LocalClusterView, is_local_leader: Callable[[str, int], bool]) -> None:
        self.view = view
        self.is_local_leader = is_local_leader

    def coordinator_node(self, topic: str, partition: int, listener_name: str) -> BrokerNode | None:
        if not self.is_local_leader(topic, partition):
            return None
        return self.view.alive_brokers(listener_name)[0]


class LeaderCoordinatorPlacement:
    """A cluster member names the partition's leader as its metadata knows it."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def coordinator_node(self, topic: str, partition: int, listener_name: str) -> BrokerNode | None:
        view = self.view
        state = next((p for p in view.partition_states(topic) if p.partition_index == partition), None)
        if state is None or state.leader_id < 0:
            return None
        return view.leader_node(state.leader_id, listener_name)


class Membership(Protocol):
    """What a lone broker and a cluster member do differently; one of each, chosen at start-up."""

    @property
    def is_cluster(self) -> bool:
        """Serves the controller-to-broker and broker-to-controller APIs (LeaderAndIsr, ...)."""
        ...

    @property
    def broker_id(self) -> int: ...

    @property
    def metadata(self) -> TopicRegistry: ...

    @property
    def initial_topic_configs(self) -> dict[str, dict[str, str]]:
        """Every topic's overrides before the logs load."""
        ...

    @property
    def controller(self) -> KafkaController | None:
        """The controller this broker runs (acting only when elected); None on a lone broker, whose
        controller APIs then answer NOT_CONTROLLER."""
        ...

    @property
    def topic_admin(self) -> TopicAdmin: ...

    @property
    def cluster_view(self) -> ClusterView: ...

    @property
    def producer_ids(self) -> ProducerIdSource: ...

    @property
    def inter_broker_endpoint(self) -> InterBrokerEndpoint:
        """The listener (and its TLS and SASL settings) this broker's channels to the others use."""
        ...

    def adopt_dynamic_configs(self, dynamic_config: DynamicBrokerConfig) -> None:
        """Take the dynamic broker configs the mode keeps, before components are built from them."""
        ...

    def attach(self, parts: ServerParts) -> None:
        """Build the mode's parts over the server's components (before any request is served)."""
        ...

    def coordinator_cluster(self) -> CoordinatorCluster | None:
        """Where the coordinators send markers and verifications led elsewhere; None: all here."""
        ...

    def coordinator_placement(self, is_local_leader: Callable[[str, int], bool]) -> CoordinatorPlacement: ...

    def acl_store(self) -> AclStore: ...

    def credentials_file(self) -> ScramCredentialsFile | None: ...

    def client_quotas_file(self) -> ClientQuotasFile | None: ...

    def group_config_store(self) -> GroupConfigStore:
        """Groups' configs: a file of the lone broker, /config/groups in a cluster."""
        ...

    def client_metrics_store(self) -> ClientMetricsStore:
        """Client-metrics subscriptions: a file of the lone broker, /config/client-metrics in a cluster."""
        ...

    async def host_topics(self) -> None:
        """Once the logs are loaded: host the partitions this broker knows to lead already."""
        ...

    async def load_user_and_quota_configs(self, scram: ScramCredentialsManager, credentials: CredentialCache,
                                          quota_admin: ClientQuotaAdmin, quota_configs: ClientQuotaConfigs) -> None:
        """SCRAM credentials and client quotas, before the listeners open."""
        ...

    async def follow_acl_changes(self, authorizer: AclAuthorizer) -> None: ...

    async def wait_for_brokers(self, listener_name: str) -> None:
        """Until some live broker is known on the listener (a member's first UpdateMetadata), at most
        a ZooKeeper session timeout."""
        ...

    async def startup(self) -> None:
        """Once the listeners are bound (a cluster member registers and joins the election)."""
        ...

    def caught_up(self) -> bool:
        """The mode's part of readiness: a member is registered and the controller's metadata lists it."""
        ...

    async def controlled_shutdown(self) -> None:
        """Before the server stops serving: move leaderships away."""
        ...

    async def shutdown_replication(self) -> None:
        """Before the logs close: stop following."""
        ...

    async def shutdown(self) -> None:
        """After the server's shutdown."""
        ...

    def check_broker_epoch(self, broker_epoch: int) -> ErrorCode:
        """A controller's request for this broker's registration, or Kafka's error."""
        ...

    def update_metadata(self, request: UpdateMetadataRequest, version: int) -> ErrorCode: ...

    async def become_leader_or_follower(self, request: LeaderAndIsrStates) -> LeaderAndIsrResult: ...

    async def stop_replicas(self, request: StopReplicaStates) -> StopReplicaResult: ...


class LocalMembership:
    """The lone broker: its own controller and every partition's leader, its state in files."""

    is_cluster = False
    controller: KafkaController | None = None

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        # broker.id -1 asks for a generated id; a lone broker takes 0.
        self.broker_id = max(config.node_id, 0)
        self.store = MetadataStore(config.log_dirs[0])
        self.initial_topic_configs = {t.name: t.configs for t in self.store}
        self._admin: AdminManager | None = None
        self._topic_admin: LocalTopicAdmin | None = None
        self._view: LocalClusterView | None = None
        self._producer_ids: LocalProducerIds | None = None
        self._replica_manager: ReplicaManager | None = None
        self._group_configs = LocalGroupConfigStore(config.log_dirs[0])
        self._client_metrics = LocalClientMetricsStore(config.log_dirs[0])
        # No other broker to reach: its channels never connect, so they need no TLS or SASL.
        self.inter_broker_endpoint = InterBrokerEndpoint(config.inter_broker_listener)

    @property
    def metadata(self) -> TopicRegistry:
        return self.store

    @property
    def topic_admin(self) -> TopicAdmin:
        assert self._topic_admin is not None, "LocalMembership.attach was not called"
        return self._topic_admin

    @property
    def cluster_view(self) -> LocalClusterView:
        assert self._view is not None, "LocalMembership.attach was not called"
        return self._view

    @property
    def producer_ids(self) -> ProducerIdSource:
        assert self._producer_ids is not None, "LocalMembership.attach was not called"
        return self._producer_ids

    def adopt_dynamic_configs(self, dynamic_config: DynamicBrokerConfig) -> None:
        """The lone broker's dynamic configs are the file DynamicBrokerConfig loaded itself."""

    def attach(self, parts: ServerParts) -> None:
        self._admin = AdminManager(self.broker_id, self.store, parts.dynamic_config, parts.log_manager,
                                   parts.replica_manager, parts.log_cleaner)
        self._topic_admin = LocalTopicAdmin(self._admin, parts.append_thread, parts.replica_manager,
                                            parts.topics_deleted)
        self._view = LocalClusterView(self.broker_id, parts.dynamic_config, parts.socket_server,
                                      parts.replica_manager)
        self._producer_ids = LocalProducerIds(ProducerIdManager(self.config.log_dirs[0]), parts.append_thread)
        self._replica_manager = parts.replica_manager

    def coordinator_cluster(self) -> CoordinatorCluster | None:
        return None

    def coordinator_placement(self, is_local_leader: Callable[[str, int], bool]) -> CoordinatorPlacement:
        return LocalCoordinatorPlacement(self.cluster_view, is_local_leader)

    def acl_store(self) -> AclStore:
        return FileAclStore(self.config.log_dirs[0])

    def credentials_file(self) -> ScramCredentialsFile | None:
        return ScramCredentialsFile(self.config.log_dirs[0])

    def client_quotas_file(self) -> ClientQuotasFile | None:
        return ClientQuotasFile(self.config.log_dirs[0])

    def group_config_store(self) -> GroupConfigStore:
        return self._group_configs

    def client_metrics_store(self) -> ClientMetricsStore:
        return self._client_metrics

    async def host_topics(self) -> None:
        assert self._admin is not None, "LocalMembership.attach was not called"
        await asyncio.to_thread(self.store.save)  # fixes the cluster id on first start
        for topic in self.store:
            self._admin.host_topic(topic)

    async def load_user_and_quota_configs(self, scram: ScramCredentialsManager, credentials: CredentialCache,
                                          quota_admin: ClientQuotaAdmin, quota_configs: ClientQuotaConfigs) -> None:
        await asyncio.to_thread(scram.load)
        await asyncio.to_thread(quota_admin.load)

    async def follow_acl_changes(self, authorizer: AclAuthorizer) -> None:
        """Every ACL change is made here: the authorizer's cache is current already."""

    def caught_up(self) -> bool:
        return True

    async def wait_for_brokers(self, listener_name: str) -> None:
        """The lone broker always knows one: itself."""

    async def startup(self) -> None:
        """Nothing to join."""

    async def controlled_shutdown(self) -> None:
        """No other replica to hand leaderships to."""

    async def shutdown_replication(self) -> None:
        """Nothing follows another broker."""

    async def shutdown(self) -> None:
        """No session to close."""

    def check_broker_epoch(self, broker_epoch: int) -> ErrorCode:
        # No registration exists that a controller's request could be meant for.
        return ErrorCode.STALE_BROKER_EPOCH

    def update_metadata(self, request: UpdateMetadataRequest, version: int) -> ErrorCode:
        return self.check_broker_epoch(request.broker_epoch)

    async def become_leader_or_follower(self, request: LeaderAndIsrStates) -> LeaderAndIsrResult:
        assert self._replica_manager is not None, "LocalMembership.attach was not called"
        return await self._replica_manager.become_leader_or_follower(request)

    async def stop_replicas(self, request: StopReplicaStates) -> StopReplicaResult:
        assert self._replica_manager is not None, "LocalMembership.attach was not called"
        return await self._replica_manager.stop_replicas(request)
