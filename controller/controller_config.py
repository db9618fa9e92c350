"""The configs the controller reads, under Kafka's names (the broker builds this from its BrokerConfig)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from client.sasl import SaslSettings

__all__ = ["ControllerConfig"]


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Kafka's controller settings; defaults are Kafka 3.9's."""

    #: inter.broker.listener.name: the listener the controller connects to on every broker.
    inter_broker_listener_name: str = "PLAINTEXT"
    #: unclean.leader.election.enable (a topic's own setting overrides it).
    unclean_leader_election_enable: bool = False
    #: delete.topic.enable
    delete_topic_enable: bool = True
    #: auto.leader.rebalance.enable
    auto_leader_rebalance_enable: bool = True
    #: leader.imbalance.per.broker.percentage
    leader_imbalance_per_broker_percentage: int = 10
    #: leader.imbalance.check.interval.seconds
    leader_imbalance_check_interval_seconds: float = 300.0
    #: controller.socket.timeout.ms: how long the controller waits for a broker's answer.
    controller_socket_timeout_ms: int = 30_000
    #: The TLS context of the controller's connections when the inter-broker listener is SSL (built from
    #: its ssl.* settings); None for plain TCP.
    inter_broker_ssl_context: ssl.SSLContext | None = None
    #: The broker's own SASL credentials when the inter-broker listener is SASL_*; None otherwise.
    inter_broker_sasl: SaslSettings | None = None
    #: Kafka's controller resends a failed request after this backoff (grows up to 10x).
    controller_retry_backoff_ms: int = 100
    #: Kafka schedules the first automatic preferred-leader check this long after failover.
    auto_leader_rebalance_initial_delay_s: float = 5.0
