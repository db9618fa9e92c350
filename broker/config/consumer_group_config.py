"""Kafka's checks of the consumer rebalance protocol's broker configs (GroupCoordinatorConfig).

``group.coordinator.rebalance.protocols`` is also this broker's switch for
the protocol: the ConsumerGroupHeartbeat and ConsumerGroupDescribe handlers
are routed and advertised, and the ``group.version`` feature finalized at 1,
only when it lists ``consumer``. The default, ``classic,consumer,share``, serves
what a new Kafka 4.2 cluster serves; ``classic`` alone turns the protocol off. ``group.consumer.migration.policy``
(``bidirectional``, ``upgrade``, ``downgrade``, ``disabled``; Kafka's default
``bidirectional``) only matters while ``consumer`` is listed. ``share`` (KIP-932's
share groups) turns on the share group APIs (see broker.config.share_group_config) and
finalizes ``share.version`` at 1: on by default, as a new Kafka 4.2 cluster has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.group.consumer_group_assignors import assignor_names

REBALANCE_PROTOCOLS = ("classic", "consumer", "share")

#: ``group.coordinator.rebalance.protocols``' default here; what a broker serves and advertises follows it.
DEFAULT_REBALANCE_PROTOCOLS: tuple[str, ...] = ("classic", "consumer", "share")


@dataclass(frozen=True, slots=True)
class BoundedMs:
    """A timeout config and the broker's bounds for it, in milliseconds."""

    value: int
    low: int
    high: int


#: The least ``group.consumer.regex.refresh.interval.ms`` Kafka's config definition accepts.
REGEX_REFRESH_MIN_INTERVAL_MS = 10_000


def check_consumer_group_configs(protocols: Sequence[str], heartbeat: BoundedMs, session: BoundedMs, max_size: int,
                                 assignors: Sequence[str], regex_refresh_max_interval_ms: int = 600_000) -> None:
    """ValueError with Kafka's wording for a combination Kafka refuses at start-up."""
    unknown = [p for p in protocols if p not in REBALANCE_PROTOCOLS]
    if unknown:
        raise ValueError(f"group.coordinator.rebalance.protocols: unknown protocol(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(REBALANCE_PROTOCOLS)}")
    if "classic" not in protocols:
        raise ValueError("group.coordinator.rebalance.protocols must contain classic")
    for name, value in (("group.consumer.max.size", max_size),
                        ("group.consumer.heartbeat.interval.ms", heartbeat.value),
                        ("group.consumer.session.timeout.ms", session.value)):
        if value < 1:
            raise ValueError(f"{name} must be greater than or equal to 1")
    _between("group.consumer.heartbeat.interval.ms", heartbeat, "group.consumer.min.heartbeat.interval.ms",
             "group.consumer.max.heartbeat.interval.ms")
    _between("group.consumer.session.timeout.ms", session, "group.consumer.min.session.timeout.ms",
             "group.consumer.max.session.timeout.ms")
    if heartbeat.value >= session.value:
        raise ValueError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
    assignor_names(list(assignors))
    if regex_refresh_max_interval_ms < REGEX_REFRESH_MIN_INTERVAL_MS:
        raise ValueError("group.consumer.regex.refresh.interval.ms must be at least "
                         f"{REGEX_REFRESH_MIN_INTERVAL_MS}")


def _between(name: str, config: BoundedMs, low_name: str, high_name: str) -> None:
    if config.value < config.low:
        raise ValueError(f"{name} must be greater than or equal to {low_name}")
    if config.value > config.high:
        raise ValueError(f"{name} must be less than or equal to {high_name}")
