"""Kafka's checks of the consumer rebalance protocol's broker configs (GroupCoordinatorConfig).

``group.coordinator.rebalance.protocols`` is also this broker's switch for
the protocol: the ConsumerGroupHeartbeat and ConsumerGroupDescribe handlers
are routed and advertised only when it lists ``consumer``. Kafka 4's default
is ``classic,consumer``; here it stays ``classic`` until the whole of the
protocol is served (group records in ``__consumer_offsets``, regular
expression subscriptions, group configs). ``group.consumer.migration.policy``
(``bidirectional``, ``upgrade``, ``downgrade``, ``disabled``; Kafka's default
``bidirectional``) only matters with the switch on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.group.consumer_group_assignors import assignor_names

REBALANCE_PROTOCOLS = ("classic", "consumer", "share")


@dataclass(frozen=True, slots=True)
class BoundedMs:
    """A timeout config and the broker's bounds for it, in milliseconds."""

    value: int
    low: int
    high: int


def check_consumer_group_configs(protocols: Sequence[str], heartbeat: BoundedMs, session: BoundedMs, max_size: int,
                                 assignors: Sequence[str]) -> None:
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


def _between(name: str, config: BoundedMs, low_name: str, high_name: str) -> None:
    if config.value < config.low:
        raise ValueError(f"{name} must be greater than or equal to {low_name}")
    if config.value > config.high:
        raise ValueError(f"{name} must be less than or equal to {high_name}")
