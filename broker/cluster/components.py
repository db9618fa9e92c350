"""The controller and replication settings a cluster member builds from its broker config.

The controller (``controller.kafka_controller``) and the replica manager's
cluster-mode side (``replication.replica_state_changes``) take small config
dataclasses of their own, under Kafka's property names; these functions fill
them from the broker's :class:`~broker.config.broker_config.BrokerConfig`.
"""

from __future__ import annotations

import ssl

from broker.config.broker_config import BrokerConfig
from client.sasl import SaslSettings
from controller.controller_config import ControllerConfig
from replication.replication_config import ReplicationConfig


def controller_config(config: BrokerConfig, inter_broker_ssl: ssl.SSLContext | None = None,
                      inter_broker_sasl: SaslSettings | None = None) -> ControllerConfig:
    """The controller's settings, under Kafka's names, from the broker's (``inter_broker_ssl``: the
    inter-broker listener's TLS context, None for plain TCP)."""
    return ControllerConfig(
        inter_broker_listener_name=config.inter_broker_listener,
        unclean_leader_election_enable=config.unclean_leader_election_enable,
        delete_topic_enable=config.delete_topic_enable,
        auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
        leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
        leader_imbalance_check_interval_seconds=float(config.leader_imbalance_check_interval_seconds),
        controller_socket_timeout_ms=config.controller_socket_timeout_ms,
        inter_broker_ssl_context=inter_broker_ssl,
        inter_broker_sasl=inter_broker_sasl,
    )


def replication_config(config: BrokerConfig, inter_broker_ssl: ssl.SSLContext | None = None,
                       inter_broker_sasl: SaslSettings | None = None) -> ReplicationConfig:
    """The replica manager's settings (replica.*, num.replica.fetchers) from the broker's, with the
    inter-broker listener's TLS context (None for plain TCP)."""
    return ReplicationConfig(
        replica_lag_time_max_ms=config.replica_lag_time_max_ms,
        num_replica_fetchers=config.num_replica_fetchers,
        replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
        replica_fetch_min_bytes=config.replica_fetch_min_bytes,
        replica_fetch_max_bytes=config.replica_fetch_max_bytes,
        replica_fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
        replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
        replica_socket_timeout_ms=config.replica_socket_timeout_ms,
        inter_broker_ssl_context=inter_broker_ssl,
        inter_broker_sasl=inter_broker_sasl,
    )
