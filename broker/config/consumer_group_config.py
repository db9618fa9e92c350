"""Kafka's checks of the consumer rebalance protocol's broker configs (GroupCoordinatorConfig).

``group.coordinator.rebalance.protocols`` is also this broker's switch for
the protocol: the ConsumerGroupHeartbeat and ConsumerGroupDescribe handlers
are routed and advertised only when it lists ``consumer``. Kafka 4's default
is ``classic,consumer``; here it stays ``classic`` until the whole of the
protocol is served (group records in ``__consumer_offsets``, regular
expression subscriptions, online migration, group configs).
"""

from __future__ import annotations

from collections.abc import Sequence

from coordinator.group.consumer_group_assignors import assignor_names

REBALANCE_PROTOCOLS = ("classic", "consumer")


def check_consumer_group_configs(protocols: Sequence[str], heartbeat_ms: int, min_heartbeat_ms: int,
                                 max_heartbeat_ms: int, session_ms: int, min_session_ms: int, max_session_ms: int,
                                 max_size: int, assignors: Sequence[str]) -> None:
    """ValueError with Kafka's wording for a combination Kafka refuses at start-up."""
    unknown = [p for p in protocols if p not in REBALANCE_PROTOCOLS]
    if unknown:
        raise ValueError(f"group.coordinator.rebalance.protocols: unknown protocol(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(REBALANCE_PROTOCOLS)}")
    if "classic" not in protocols:
        raise ValueError("group.coordinator.rebalance.protocols must contain classic")
    for name, value in (("group.consumer.max.size", max_size), ("group.consumer.heartbeat.interval.ms", heartbeat_ms),
                        ("group.consumer.session.timeout.ms", session_ms)):
        if value < 1:
            raise ValueError(f"{name} must be greater than or equal to 1")
    _between("group.consumer.heartbeat.interval.ms", heartbeat_ms, "group.consumer.min.heartbeat.interval.ms",
             min_heartbeat_ms, "group.consumer.max.heartbeat.interval.ms", max_heartbeat_ms)
    _between("group.consumer.session.timeout.ms", session_ms, "group.consumer.min.session.timeout.ms",
             min_session_ms, "group.consumer.max.session.timeout.ms", max_session_ms)
    if heartbeat_ms >= session_ms:
        raise ValueError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
    assignor_names(list(assignors))


def _between(name: str, value: int, low_name: str, low: int, high_name: str, high: int) -> None:
    if value < low:
        raise ValueError(f"{name} must be greater than or equal to {low_name}")
    if value > high:
        raise ValueError(f"{name} must be less than or equal to {high_name}")
