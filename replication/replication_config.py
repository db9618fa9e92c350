"""The broker settings replication runs by (Kafka's names and defaults).

The broker builds one from its config (``replica.*``, ``num.replica.fetchers``);
a lone broker without ZooKeeper never reads most of them.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from client.sasl import SaslSettings


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    #: replica.lag.time.max.ms: a follower not caught up for this long leaves the ISR.
    replica_lag_time_max_ms: int = 30_000
    #: num.replica.fetchers: fetcher tasks per source broker.
    num_replica_fetchers: int = 1
    #: replica.fetch.wait.max.ms: how long a follower's fetch long-polls at the leader.
    replica_fetch_wait_max_ms: int = 500
    #: replica.fetch.min.bytes: what a follower's fetch waits for.
    replica_fetch_min_bytes: int = 1
    #: replica.fetch.max.bytes: per partition (the first batch always comes whole, KIP-74).
    replica_fetch_max_bytes: int = 1_048_576
    #: replica.fetch.response.max.bytes: per fetch response.
    replica_fetch_response_max_bytes: int = 10_485_760
    #: replica.fetch.backoff.ms: the pause after a failed fetch.
    replica_fetch_backoff_ms: int = 1_000
    #: replica.socket.timeout.ms: a fetch's request timeout is this plus the wait.
    replica_socket_timeout_ms: int = 30_000
    #: Not a Kafka setting: the TLS context of connections to leaders when the inter-broker listener is
    #: SSL (built from its ssl.* settings); None for plain TCP.
    inter_broker_ssl_context: ssl.SSLContext | None = None
    #: The broker's own SASL credentials when the inter-broker listener is SASL_*; None otherwise.
    inter_broker_sasl: SaslSettings | None = None
    #: The AlterPartition manager's pause before resending after an error.
    alter_partition_retry_backoff_ms: int = 50
    #: Not a Kafka setting and never read from a config: followers truncate to their high watermark
    #: on becoming followers and never by leader epoch (Kafka before KIP-101). It exists only for the
    #: tests that replay the two ways that loses or forks data (tests/replication/test_leader_epochs.py).
    truncate_to_high_watermark_only: bool = False
