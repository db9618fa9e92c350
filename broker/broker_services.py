"""BrokerServices: the components a request handler may call, and nothing else.

Handlers (``broker.handlers``) and the config helpers take this, not the
server: it names what they depend on, and it imports no module that imports
handlers, so the broker's modules form no import loop. ``KafkaServer`` builds
it at start-up; the server's lifecycle (threads, background duties, shutdown)
stays out of reach of a handler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.config.broker_config import BrokerConfig
from broker.config.dynamic_broker_config import DynamicBrokerConfig
from broker.fetch_session import FetchSessionCache
from broker.group_config_store import GroupConfigAdmin
from broker.metadata_view import ClusterView, TopicRegistry
from broker.network.socket_server import SocketServer
from broker.quota.client_quota_admin import ClientQuotaAdmin
from broker.quota.client_quotas import ClientQuotas
from broker.security.acl_authorizer import AclAuthorizer
from broker.security.scram_credentials_manager import ScramCredentialsManager
from broker.share_services import ShareServices
from broker.telemetry.client_metrics_manager import ClientMetricsManager
from broker.telemetry.subscriptions import ClientMetricsConfigAdmin
from broker.topic_admin import TopicAdmin
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.share.share_coordinator import ShareCoordinator
from coordinator.transaction.transaction_coordinator import ProducerIdGenerator, TransactionCoordinator
from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager
from storage.log_config import LogConfig

if TYPE_CHECKING:
    from broker.membership import CoordinatorPlacement, Membership


@dataclass(frozen=True, slots=True)
class BrokerServices:
    broker_id: int
    #: The topics: the MetadataStore of a lone broker, the metadata cache of a cluster member.
    metadata: TopicRegistry
    dynamic_config: DynamicBrokerConfig
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    #: Topic creation, deletion, partitions and configs (broker.topic_admin): the same calls in both modes.
    topic_admin: TopicAdmin
    #: A fresh producer id: from a block of the lone broker's file, or of ZooKeeper's
    #: /latest_producer_id_block in a cluster.
    generate_producer_id: ProducerIdGenerator
    fetch_sessions: FetchSessionCache
    #: Admin changes that write files (topics, configs, producer-id blocks) run here,
    #: in order with appends.
    append_thread: AppendThread
    socket_server: SocketServer
    #: Brokers, controller and leadership, as clients are told (see broker.metadata_view).
    cluster_view: ClusterView
    #: Users' SCRAM credentials (DescribeUserScramCredentials, AlterUserScramCredentials).
    scram_credentials: ScramCredentialsManager
    #: The broker's mode: a lone broker or a cluster member (broker.membership).
    membership: Membership
    #: Which broker coordinates a group or transactional id.
    coordinator_placement: CoordinatorPlacement
    #: The ACL authorizer when authorizer.class.name names one; None allows everything (no check at all).
    authorizer: AclAuthorizer | None = None
    #: Client quotas: what each request's client may use, and the configs (DescribeClientQuotas,
    #: AlterClientQuotas). None in harnesses that test handlers alone.
    quotas: ClientQuotas | None = None
    client_quota_admin: ClientQuotaAdmin | None = None
    #: Groups' configs (resource type GROUP). None in harnesses that test handlers alone.
    group_config_admin: GroupConfigAdmin | None = None
    #: The share coordinator (share partitions' state in __share_group_state). None in harnesses that test
    #: handlers alone.
    share_coordinator: ShareCoordinator | None = None
    #: Share groups' partitions and sessions (ShareFetch, ShareAcknowledge); None unless
    #: group.coordinator.rebalance.protocols lists share.
    share: ShareServices | None = None
    #: Client metrics (KIP-714): the client instances GetTelemetrySubscriptions and PushTelemetry serve, and
    #: the subscriptions (resource type CLIENT_METRICS). None in harnesses that test handlers alone.
    client_metrics: ClientMetricsManager | None = None
    client_metrics_admin: ClientMetricsConfigAdmin | None = None

    @property
    def config(self) -> BrokerConfig:
        """The broker's current configuration (static properties with dynamic values on top)."""
        return self.dynamic_config.config

    @property
    def default_log_config(self) -> LogConfig:
        return self.dynamic_config.default_log_config

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id
