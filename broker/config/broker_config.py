"""The broker's configuration: Kafka's property names, defaults and layering.

Sources, later ones winning, as a Kafka operator expects:
  1. Kafka's defaults (the field defaults below);
  2. a ``server.properties``-style file (``--config``);
  3. environment variables ``PAFKA_<NAME>``, the property name upper-cased with
     dots turned into underscores (``PAFKA_LOG_DIRS`` → ``log.dirs``);
  4. ``--override key=value`` on the command line.

Unknown property names are kept (Kafka passes them to plugins) and logged once,
as Kafka's "supplied but isn't a known config" warning.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, ConfigDict, Field, field_validator, model_validator

from broker.config.consumer_group_config import DEFAULT_REBALANCE_PROTOCOLS, BoundedMs, check_consumer_group_configs
from broker.config.sasl_config import is_listener_sasl_property
from broker.config.share_group_config import check_share_group_configs
from broker.config.ssl_config import SSL_FIELDS, SslConfig, listener_ssl_config

log = logging.getLogger(__name__)

ENV_PREFIX = "PAFKA_"
LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: Kafka's listener.security.protocol.map default.
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
#: The per-listener connection limits (Kafka's listener prefix is the listener name in lower case).
_LISTENER_CONNECTION_LIMIT = re.compile(r"listener\.name\.([^.]+)\.(max\.connections|max\.connection\.creation\.rate)")
#: Kafka's Utils.validHostPattern: the characters a host name or an IP address may hold.
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")
#: The authorizer.class.name values pafka serves with its ACL authorizer (broker.security.acl_authorizer):
#: ZooKeeper mode's and KRaft's class, the same semantics.
AUTHORIZER_CLASS_NAMES = frozenset({"kafka.security.authorizer.AclAuthorizer",
                                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})

#: The replica.selector.class values pafka serves: Kafka's two selectors (replication.replica_selector).
REPLICA_SELECTOR_CLASS_NAMES = frozenset({"org.apache.kafka.common.replica.RackAwareReplicaSelector",
                                          "org.apache.kafka.common.replica.LeaderSelector"})


@dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` entry of ``listeners`` / ``advertised.listeners``."""

    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Listener:
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:]*):(\d+)", text.strip())
        if not match:
            raise ValueError(f"listener {text!r} is not of the form NAME://host:port")
        name, host, port = match.groups()
        return cls(name.upper(), host.strip("[]"), int(port))

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def _split_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _prop(default: Any, name: str, *synonyms: str) -> Any:
    """A field that answers to its Kafka property name (and older synonyms)."""
    return Field(default, validation_alias=AliasChoices(name, *synonyms), serialization_alias=name)


class BrokerConfig(SslConfig):
    """Broker settings under Kafka's property names, with Kafka's defaults (the ``ssl.*`` ones
    in :class:`~broker.config.ssl_config.SslConfig`).

    Where Kafka's default only makes sense for a multi-broker cluster
    (``offsets.topic.replication.factor=3``), the value is capped at the number
    of live brokers when internal topics are created, as Kafka does in
    development setups; the setting itself keeps Kafka's default.
    """

    model_config = ConfigDict(populate_by_name=True, extra="allow", frozen=True)

    # Server basics. broker.id -1 means "generate one": 0 for the embedded
    # single broker, a ZooKeeper sequence once a cluster is configured.
    node_id: int = _prop(-1, "node.id", "broker.id")
    listeners: list[Listener] = _prop([Listener("PLAINTEXT", "127.0.0.1", 9092)], "listeners")
    advertised_listeners: list[Listener] | None = _prop(None, "advertised.listeners")
    zookeeper_connect: str | None = _prop(None, "zookeeper.connect")
    zookeeper_session_timeout_ms: int = _prop(18000, "zookeeper.session.timeout.ms")
    #: Unset: the session timeout, as Kafka's default.
    zookeeper_connection_timeout_ms: int | None = _prop(None, "zookeeper.connection.timeout.ms")
    rack: str | None = _prop(None, "broker.rack")
    #: KIP-392: which replica a consumer is told to fetch from; unset, always the leader.
    replica_selector_class: str | None = _prop(None, "replica.selector.class")
    broker_id_generation_enable: bool = _prop(True, "broker.id.generation.enable")
    reserved_broker_max_id: int = _prop(1000, "reserved.broker.max.id")
    #: Kafka rejects both set at once; neither set means PLAINTEXT.
    inter_broker_listener_name: str | None = _prop(None, "inter.broker.listener.name")
    security_inter_broker_protocol: str = _prop("PLAINTEXT", "security.inter.broker.protocol")
    controlled_shutdown_enable: bool = _prop(True, "controlled.shutdown.enable")
    controlled_shutdown_max_retries: int = _prop(3, "controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms: int = _prop(5000, "controlled.shutdown.retry.backoff.ms")
    controller_socket_timeout_ms: int = _prop(30000, "controller.socket.timeout.ms")

    # SASL (the per-listener JAAS configs are read from the extras: broker.config.sasl_config).
    sasl_enabled_mechanisms: list[str] = _prop(["GSSAPI"], "sasl.enabled.mechanisms")
    sasl_mechanism_inter_broker_protocol: str = _prop("GSSAPI", "sasl.mechanism.inter.broker.protocol")
    connection_failed_authentication_delay_ms: int = _prop(100, "connection.failed.authentication.delay.ms")
    #: KIP-368: a SASL session's longest life before the client must re-authenticate (0: forever);
    #: per listener and mechanism as listener.name.<l>.<mechanism>.connections.max.reauth.ms.
    connections_max_reauth_ms: int = _prop(0, "connections.max.reauth.ms")
    #: The largest frame a client may send before it has authenticated (CVE-2022-34917's fix).
    sasl_server_max_receive_size: int = _prop(524288, "sasl.server.max.receive.size")

    # ACLs: no authorizer (Kafka's default "") allows everything.
    authorizer_class_name: str = _prop("", "authorizer.class.name")
    super_users: str | None = _prop(None, "super.users")
    allow_everyone_if_no_acl_found: bool = _prop(False, "allow.everyone.if.no.acl.found")

    # Log basics.
    log_dirs: list[str] = _prop(["/tmp/kafka-logs"], "log.dirs", "log.dir")
    num_partitions: int = _prop(1, "num.partitions")
    default_replication_factor: int = _prop(1, "default.replication.factor")
    min_insync_replicas: int = _prop(1, "min.insync.replicas")
    auto_create_topics_enable: bool = _prop(True, "auto.create.topics.enable")
    delete_topic_enable: bool = _prop(True, "delete.topic.enable")
    message_max_bytes: int = _prop(1048588, "message.max.bytes")
    socket_request_max_bytes: int = _prop(104857600, "socket.request.max.bytes")
    #: The request memory pool's size; -1: unbounded (Kafka's default).
    queued_max_request_bytes: int = _prop(-1, "queued.max.request.bytes")
    #: Requests read but not yet taken by their handler before reading stops.
    queued_max_requests: int = _prop(500, "queued.max.requests")
    #: The largest fetch answer the broker builds, whatever a fetch asks (KIP-541).
    fetch_max_bytes: int = _prop(57671680, "fetch.max.bytes")
    compression_type: str = _prop("producer", "compression.type")

    # Segments, indexes, flushing.
    log_segment_bytes: int = _prop(1073741824, "log.segment.bytes")
    log_roll_ms: int | None = _prop(None, "log.roll.ms")
    log_roll_hours: int = _prop(168, "log.roll.hours")
    log_index_size_max_bytes: int = _prop(10485760, "log.index.size.max.bytes")
    log_index_interval_bytes: int = _prop(4096, "log.index.interval.bytes")
    log_flush_interval_messages: int = _prop(LONG_MAX, "log.flush.interval.messages")
    log_flush_interval_ms: int | None = _prop(None, "log.flush.interval.ms")
    log_flush_scheduler_interval_ms: int = _prop(LONG_MAX, "log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms: int = _prop(60000, "log.flush.offset.checkpoint.interval.ms")
    log_message_timestamp_type: str = _prop("CreateTime", "log.message.timestamp.type")
    log_segment_delete_delay_ms: int = _prop(60000, "log.segment.delete.delay.ms")

    # Retention and compaction.
    log_retention_ms: int | None = _prop(None, "log.retention.ms")
    log_retention_minutes: int | None = _prop(None, "log.retention.minutes")
    log_retention_hours: int = _prop(168, "log.retention.hours")
    log_retention_bytes: int = _prop(-1, "log.retention.bytes")
    log_retention_check_interval_ms: int = _prop(300000, "log.retention.check.interval.ms")
    log_cleanup_policy: list[str] = _prop(["delete"], "log.cleanup.policy")
    log_cleaner_enable: bool = _prop(True, "log.cleaner.enable")
    log_cleaner_threads: int = _prop(1, "log.cleaner.threads")
    log_cleaner_backoff_ms: int = _prop(15000, "log.cleaner.backoff.ms")
    log_cleaner_min_cleanable_ratio: float = _prop(0.5, "log.cleaner.min.cleanable.ratio")
    log_cleaner_min_compaction_lag_ms: int = _prop(0, "log.cleaner.min.compaction.lag.ms")
    log_cleaner_delete_retention_ms: int = _prop(86400000, "log.cleaner.delete.retention.ms")
    log_cleaner_dedupe_buffer_size: int = _prop(134217728, "log.cleaner.dedupe.buffer.size")
    log_cleaner_io_buffer_load_factor: float = _prop(0.9, "log.cleaner.io.buffer.load.factor")

    # Group coordinator.
    group_initial_rebalance_delay_ms: int = _prop(3000, "group.initial.rebalance.delay.ms")
    group_min_session_timeout_ms: int = _prop(6000, "group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = _prop(1800000, "group.max.session.timeout.ms")
    group_max_size: int = _prop(INT_MAX, "group.max.size")
    offsets_topic_num_partitions: int = _prop(50, "offsets.topic.num.partitions")
    offsets_topic_replication_factor: int = _prop(3, "offsets.topic.replication.factor")
    offsets_topic_segment_bytes: int = _prop(104857600, "offsets.topic.segment.bytes")
    offsets_retention_minutes: int = _prop(10080, "offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = _prop(600000, "offsets.retention.check.interval.ms")
    offsets_commit_timeout_ms: int = _prop(5000, "offsets.commit.timeout.ms")
    offset_metadata_max_bytes: int = _prop(4096, "offset.metadata.max.bytes")
    # The consumer rebalance protocol (KIP-848); see broker.config.consumer_group_config for the switch.
    group_coordinator_rebalance_protocols: list[str] = _prop(list(DEFAULT_REBALANCE_PROTOCOLS),
                                                             "group.coordinator.rebalance.protocols")
    group_consumer_heartbeat_interval_ms: int = _prop(5000, "group.consumer.heartbeat.interval.ms")
    group_consumer_min_heartbeat_interval_ms: int = _prop(5000, "group.consumer.min.heartbeat.interval.ms")
    group_consumer_max_heartbeat_interval_ms: int = _prop(15000, "group.consumer.max.heartbeat.interval.ms")
    group_consumer_session_timeout_ms: int = _prop(45000, "group.consumer.session.timeout.ms")
    group_consumer_min_session_timeout_ms: int = _prop(45000, "group.consumer.min.session.timeout.ms")
    group_consumer_max_session_timeout_ms: int = _prop(60000, "group.consumer.max.session.timeout.ms")
    group_consumer_max_size: int = _prop(INT_MAX, "group.consumer.max.size")
    group_consumer_assignors: list[str] = _prop(["uniform", "range"], "group.consumer.assignors")
    group_consumer_migration_policy: Literal["bidirectional", "upgrade", "downgrade", "disabled"] = _prop(
        "bidirectional", "group.consumer.migration.policy")
    group_consumer_regex_refresh_interval_ms: int = _prop(
        600000, "group.consumer.regex.refresh.interval.ms")
    # Share groups (KIP-932), served when group.coordinator.rebalance.protocols lists share; Kafka 4.2's defaults.
    group_share_heartbeat_interval_ms: int = _prop(5000, "group.share.heartbeat.interval.ms")
    group_share_min_heartbeat_interval_ms: int = _prop(5000, "group.share.min.heartbeat.interval.ms")
    group_share_max_heartbeat_interval_ms: int = _prop(15000, "group.share.max.heartbeat.interval.ms")
    group_share_session_timeout_ms: int = _prop(45000, "group.share.session.timeout.ms")
    group_share_min_session_timeout_ms: int = _prop(45000, "group.share.min.session.timeout.ms")
    group_share_max_session_timeout_ms: int = _prop(60000, "group.share.max.session.timeout.ms")
    group_share_max_size: int = _prop(200, "group.share.max.size")
    group_share_assignors: list[str] = _prop(["simple"], "group.share.assignors")
    group_share_record_lock_duration_ms: int = _prop(30000, "group.share.record.lock.duration.ms")
    group_share_min_record_lock_duration_ms: int = _prop(15000, "group.share.min.record.lock.duration.ms")
    group_share_max_record_lock_duration_ms: int = _prop(3600000, "group.share.max.record.lock.duration.ms")
    group_share_delivery_count_limit: int = _prop(5, "group.share.delivery.count.limit")
    group_share_min_delivery_count_limit: int = _prop(2, "group.share.min.delivery.count.limit")
    group_share_max_delivery_count_limit: int = _prop(10, "group.share.max.delivery.count.limit")
    group_share_partition_max_record_locks: int = _prop(2000, "group.share.partition.max.record.locks")
    group_share_min_partition_max_record_locks: int = _prop(100, "group.share.min.partition.max.record.locks")
    group_share_max_partition_max_record_locks: int = _prop(10000, "group.share.max.partition.max.record.locks")
    group_share_max_share_sessions: int = _prop(2000, "group.share.max.share.sessions")

    # Producers and transactions.
    producer_id_expiration_ms: int = _prop(86400000, "producer.id.expiration.ms")
    producer_id_expiration_check_interval_ms: int = _prop(600000, "producer.id.expiration.check.interval.ms")
    transaction_state_log_num_partitions: int = _prop(50, "transaction.state.log.num.partitions")
    transaction_state_log_replication_factor: int = _prop(3, "transaction.state.log.replication.factor")
    transaction_state_log_min_isr: int = _prop(2, "transaction.state.log.min.isr")
    transaction_state_log_segment_bytes: int = _prop(104857600, "transaction.state.log.segment.bytes")
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _prop(
        3600000, "transaction.remove.expired.transaction.cleanup.interval.ms")
    transaction_max_timeout_ms: int = _prop(900000, "transaction.max.timeout.ms")
    transactional_id_expiration_ms: int = _prop(604800000, "transactional.id.expiration.ms")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _prop(
        10000, "transaction.abort.timed.out.transaction.cleanup.interval.ms")
    #: KIP-890 part 1: a partition leader checks with the coordinator that a transactional produce
    #: belongs to an ongoing transaction before appending it.
    transaction_partition_verification_enable: bool = _prop(True, "transaction.partition.verification.enable")

    # The share coordinator (KIP-932): share partitions' state in __share_group_state.
    share_coordinator_state_topic_num_partitions: int = _prop(50, "share.coordinator.state.topic.num.partitions")
    share_coordinator_state_topic_replication_factor: int = _prop(3, "share.coordinator.state.topic.replication.factor")
    share_coordinator_state_topic_min_isr: int = _prop(2, "share.coordinator.state.topic.min.isr")
    share_coordinator_state_topic_segment_bytes: int = _prop(104857600, "share.coordinator.state.topic.segment.bytes")
    share_coordinator_snapshot_update_records_per_snapshot: int = _prop(
        500, "share.coordinator.snapshot.update.records.per.snapshot")
    share_coordinator_write_timeout_ms: int = _prop(5000, "share.coordinator.write.timeout.ms")
    share_coordinator_state_topic_prune_interval_ms: int = _prop(300000, "share.coordinator.state.topic.prune.interval.ms")
    share_coordinator_cold_partition_snapshot_interval_ms: int = _prop(
        300000, "share.coordinator.cold.partition.snapshot.interval.ms")

    # Replication.
    replica_lag_time_max_ms: int = _prop(30000, "replica.lag.time.max.ms")
    replica_fetch_max_bytes: int = _prop(1048576, "replica.fetch.max.bytes")
    replica_fetch_wait_max_ms: int = _prop(500, "replica.fetch.wait.max.ms")
    replica_fetch_min_bytes: int = _prop(1, "replica.fetch.min.bytes")
    unclean_leader_election_enable: bool = _prop(False, "unclean.leader.election.enable")
    num_replica_fetchers: int = _prop(1, "num.replica.fetchers")
    replica_fetch_response_max_bytes: int = _prop(10485760, "replica.fetch.response.max.bytes")
    replica_fetch_backoff_ms: int = _prop(1000, "replica.fetch.backoff.ms")
    replica_socket_timeout_ms: int = _prop(30000, "replica.socket.timeout.ms")
    replica_high_watermark_checkpoint_interval_ms: int = _prop(5000, "replica.high.watermark.checkpoint.interval.ms")
    #: The replication throttles' rate windows (KIP-73): this many samples of this many seconds.
    replication_quota_window_num: int = _prop(11, "replication.quota.window.num")
    replication_quota_window_size_seconds: int = _prop(1, "replication.quota.window.size.seconds")
    auto_leader_rebalance_enable: bool = _prop(True, "auto.leader.rebalance.enable")
    leader_imbalance_per_broker_percentage: int = _prop(10, "leader.imbalance.per.broker.percentage")
    leader_imbalance_check_interval_seconds: int = _prop(300, "leader.imbalance.check.interval.seconds")

    # Client metrics (KIP-714): the largest PushTelemetry payload accepted.
    telemetry_max_bytes: int = _prop(1_048_576, "telemetry.max.bytes")

    # Fetch sessions (KIP-227).
    max_incremental_fetch_session_cache_slots: int = _prop(1000, "max.incremental.fetch.session.cache.slots")

    # Connection limits (KIP-306, KIP-402, KIP-612): broker.network.connection_quotas. The listener
    # overrides (listener.name.<listener>.max.connections...) are read from the extras.
    max_connections: int = _prop(INT_MAX, "max.connections")
    max_connections_per_ip: int = _prop(INT_MAX, "max.connections.per.ip")
    max_connections_per_ip_overrides: str = _prop("", "max.connections.per.ip.overrides")
    max_connection_creation_rate: int = _prop(INT_MAX, "max.connection.creation.rate")
    #: The rate windows of the connection creation rate (and Kafka's client quotas): this many
    #: samples of this many seconds.
    quota_window_num: int = _prop(11, "quota.window.num")
    quota_window_size_seconds: int = _prop(1, "quota.window.size.seconds")

    # The Prometheus endpoint (broker.metrics): on the host of the first listener; port 9404 is the
    # JMX exporter's port in Strimzi's deployments, 0 an ephemeral one.
    prometheus_metrics_enable: bool = _prop(True, "prometheus.metrics.enable")
    prometheus_metrics_port: int = _prop(9404, "prometheus.metrics.port")

    @field_validator("listeners", "advertised_listeners", mode="before")
    @classmethod
    def _parse_listeners(cls, value: Any) -> Any:
        value = _split_list(value)
        if isinstance(value, list):
            return [Listener.parse(v) if isinstance(v, str) else v for v in value]
        return value

    @field_validator("replication_quota_window_num", "replication_quota_window_size_seconds", "quota_window_num",
                     "quota_window_size_seconds")
    @classmethod
    def _at_least_one(cls, value: int) -> int:
        if value < 1:
            raise ValueError("Value must be at least 1")
        return value

    @field_validator("max_connections", "max_connections_per_ip", "max_connection_creation_rate")
    @classmethod
    def _at_least_zero(cls, value: int) -> int:
        if value < 0:
            raise ValueError("Value must be at least 0")
        return value

    @field_validator("prometheus_metrics_port")
    @classmethod
    def _check_port(cls, value: int) -> int:
        if not 0 <= value <= 65535:
            raise ValueError("Value must be a port number between 0 and 65535")
        return value

    @field_validator("max_connections_per_ip_overrides")
    @classmethod
    def _check_per_ip_overrides(cls, value: str) -> str:
        parse_connections_per_ip_overrides(value)
        return value

    @model_validator(mode="after")
    def _check_connection_limits(self) -> BrokerConfig:
        """Kafka's KafkaConfig checks: per.ip 0 needs overrides; listener overrides are numbers >= 0."""
        check_connections_per_ip(self.max_connections_per_ip, self.max_connections_per_ip_overrides)
        for name, value in (self.model_extra or {}).items():
            if _LISTENER_CONNECTION_LIMIT.fullmatch(name):
                _check_listener_limit(name, str(value))
        return self

    @field_validator("group_coordinator_rebalance_protocols", mode="before")
    @classmethod
    def _parse_protocols(cls, value: Any) -> Any:
        value = _split_list(value)
        return [item.lower() for item in value] if isinstance(value, list) else value

    @field_validator("group_consumer_migration_policy", mode="before")
    @classmethod
    def _parse_migration_policy(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value  # case-insensitive, as Kafka parses it

    @field_validator("group_consumer_assignors", "group_share_assignors", mode="before")
    @classmethod
    def _parse_assignors(cls, value: Any) -> Any:
        return _split_list(value)

    @model_validator(mode="after")
    def _check_consumer_groups(self) -> BrokerConfig:
        check_consumer_group_configs(
            self.group_coordinator_rebalance_protocols,
            BoundedMs(self.group_consumer_heartbeat_interval_ms, self.group_consumer_min_heartbeat_interval_ms,
                      self.group_consumer_max_heartbeat_interval_ms),
            BoundedMs(self.group_consumer_session_timeout_ms, self.group_consumer_min_session_timeout_ms,
                      self.group_consumer_max_session_timeout_ms),
            self.group_consumer_max_size, self.group_consumer_assignors,
            self.group_consumer_regex_refresh_interval_ms)
        check_share_group_configs(self)
        return self

    @field_validator("log_dirs", "log_cleanup_policy", "sasl_enabled_mechanisms", mode="before")
    @classmethod
    def _parse_list(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("replica_selector_class")
    @classmethod
    def _check_replica_selector(cls, value: str | None) -> str | None:
        if value is not None and value.strip() and value.strip() not in REPLICA_SELECTOR_CLASS_NAMES:
            raise ValueError(f"Invalid value {value} for configuration replica.selector.class: "
                             f"Class {value} could not be found.")
        return (value.strip() or None) if value is not None else None

    @field_validator("authorizer_class_name")
    @classmethod
    def _check_authorizer(cls, value: str) -> str:
        if value.strip() and value.strip() not in AUTHORIZER_CLASS_NAMES:
            raise ValueError(f"Class {value} cannot be found; pafka serves {', '.join(sorted(AUTHORIZER_CLASS_NAMES))}")
        return value.strip()

    @field_validator("security_inter_broker_protocol")
    @classmethod
    def _check_security_protocol(cls, value: str) -> str:
        if value not in SECURITY_PROTOCOLS:
            raise ValueError(f"must be one of {', '.join(SECURITY_PROTOCOLS)}")
        return value

    @model_validator(mode="after")
    def _check_cluster_settings(self) -> BrokerConfig:
        """Kafka's KafkaConfig checks of the ZooKeeper-mode settings (same wording)."""
        fields = self.model_fields_set
        if "inter_broker_listener_name" in fields and "security_inter_broker_protocol" in fields:
            raise ValueError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
        if self.zookeeper_connect is not None and not -1 <= self.node_id <= self.reserved_broker_max_id:
            raise ValueError("broker.id must be greater than or equal to -1 and not greater than "
                             "reserved.broker.max.id")
        if self.zookeeper_connect is not None:
            advertised = {listener.name for listener in self.effective_advertised_listeners}
            if self.inter_broker_listener != "" and self.inter_broker_listener not in advertised:
                raise ValueError(
                    f"inter.broker.listener.name must be a listener name defined in advertised.listeners. "
                    f"The valid options based on currently configured listeners are {','.join(sorted(advertised))}")
        return self

    @field_validator("log_message_timestamp_type")
    @classmethod
    def _check_timestamp_type(cls, value: str) -> str:
        if value not in ("CreateTime", "LogAppendTime"):
            raise ValueError("must be CreateTime or LogAppendTime")
        return value

    # Kafka resolves these precedence chains the same way (ms > minutes > hours).
    @property
    def retention_ms(self) -> int:
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return self.log_retention_minutes * 60_000
        return self.log_retention_hours * 3_600_000

    @property
    def roll_ms(self) -> int:
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3_600_000

    @property
    def flush_ms(self) -> int:
        """log.flush.interval.ms defaults to the scheduler interval (Long.MAX: the OS decides)."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    @property
    def zookeeper_connection_timeout(self) -> int:
        """zookeeper.connection.timeout.ms, defaulting to the session timeout (Kafka's rule)."""
        if self.zookeeper_connection_timeout_ms is not None:
            return self.zookeeper_connection_timeout_ms
        return self.zookeeper_session_timeout_ms

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map: listener name -> security protocol (Kafka's default maps
        each protocol's name to itself)."""
        text = (self.model_extra or {}).get("listener.security.protocol.map") or DEFAULT_PROTOCOL_MAP
        mapping: dict[str, str] = {}
        for item in str(text).split(","):
            name, sep, protocol = item.strip().partition(":")
            if sep:
                mapping[name.strip().upper()] = protocol.strip().upper()
        return mapping

    def security_protocol_of(self, listener_name: str) -> str:
        return self.listener_security_protocol_map.get(listener_name, listener_name)

    def ssl_config_for(self, listener_name: str) -> SslConfig:
        """A listener's SSL settings: ``listener.name.<listener>.ssl.*`` over ``ssl.*``."""
        return listener_ssl_config(self, self.model_extra or {}, listener_name)

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers use to reach each other: inter.broker.listener.name, else the
        first advertised listener whose protocol is security.inter.broker.protocol ("" if none)."""
        if self.inter_broker_listener_name is not None:
            return self.inter_broker_listener_name.upper()
        protocol = self.security_inter_broker_protocol
        for listener in self.effective_advertised_listeners:
            if self.security_protocol_of(listener.name) == protocol:
                return listener.name
        return ""

    @property
    def is_cluster_member(self) -> bool:
        """A broker with zookeeper.connect joins a cluster; without it is the embedded single broker."""
        return bool(self.zookeeper_connect)

    @property
    def effective_advertised_listeners(self) -> list[Listener]:
        return self.advertised_listeners or self.listeners

    @property
    def unknown_properties(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def property_value(self, name: str) -> Any:
        """The value of a Kafka property name, as the broker resolved it."""
        for field_name, info in type(self).model_fields.items():
            if info.serialization_alias == name:
                return getattr(self, field_name)
        return (self.model_extra or {}).get(name)

    @classmethod
    def property_names(cls) -> list[str]:
        return [str(info.serialization_alias) for info in cls.model_fields.values()]


def parse_connections_per_ip_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: ``host:count,ip:count`` (Kafka's parseCsvMap splits each entry
    at its last colon, so an IPv6 address keeps its own). ValueError, in Kafka's words, for a bad entry."""
    name = "max.connections.per.ip.overrides"
    overrides: dict[str, int] = {}
    for item in str(text or "").split(","):
        if not item.strip():
            continue
        host, sep, count = item.strip().rpartition(":")
        host, count = host.strip(), count.strip()
        if not sep or not host or not count.isdigit():
            raise ValueError(f"Error parsing configuration property '{name}': entry '{item.strip()}' is not of "
                             "the form host:count")
        if not _VALID_HOST.fullmatch(host):
            raise ValueError(f"{name} contains invalid addresses : {host}")
        overrides[host] = int(count)
    return overrides


def _check_listener_limit(name: str, text: str) -> None:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"Invalid value {text} for configuration {name}: Not a number of type INT") from None
    if not 0 <= value <= INT_MAX:
        raise ValueError(f"Invalid value {text} for configuration {name}: Value must be at least 0")


def check_connections_per_ip(max_per_ip: int, overrides: str) -> None:
    """Kafka refuses max.connections.per.ip=0 unless some address is allowed by an override."""
    if max_per_ip == 0 and not parse_connections_per_ip_overrides(overrides):
        raise ValueError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                         "property is set.")


def _read_without_a_field(name: str) -> bool:
    """Properties the broker reads from its extras: the protocol map, listeners' ssl.* and SASL overrides
    and their connection limits."""
    if name == "listener.security.protocol.map" or _LISTENER_CONNECTION_LIMIT.fullmatch(name):
        return True
    match = re.fullmatch(r"listener\.name\.[^.]+\.(.+)", name)
    return match is not None and (match.group(1) in SSL_FIELDS or is_listener_sasl_property(match.group(1)))


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` essentials: ``#``/``!`` comments, ``=`` or ``:`` separators,
    backslash line continuations."""
    props: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", entry)
        if match:
            props[match.group(1)] = match.group(2).strip()
        else:
            props[entry.strip()] = ""
    return props


def properties_from_env(environ: Mapping[str, str], known: Iterable[str]) -> dict[str, str]:
    """``PAFKA_LOG_DIRS=...`` → ``{"log.dirs": ...}`` for the known property names."""
    by_env_name = {ENV_PREFIX + name.upper().replace(".", "_"): name for name in known}
    return {by_env_name[k]: v for k, v in environ.items() if k in by_env_name}


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"override {item!r} is not of the form key=value")
        props[key.strip()] = value.strip()
    return props


def load_broker_config(
    config_file: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Layer defaults, file, environment and overrides into one validated config."""
    props: dict[str, str] = {}
    if config_file is not None:
        props.update(parse_properties(Path(config_file).read_text()))
    props.update(properties_from_env(os.environ if environ is None else environ, BrokerConfig.property_names()))
    props.update(parse_overrides(overrides))
    config = BrokerConfig.model_validate(props)
    for name in config.unknown_properties:
        if not _read_without_a_field(name):
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
    return config
