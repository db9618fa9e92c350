"""Kafka's checks of the share groups' broker configs (KIP-932's ``group.share.*``).

The configs are read only when ``group.coordinator.rebalance.protocols``
lists ``share`` (the switch; see broker.config.consumer_group_config), but a
broker refuses at start-up a combination Kafka refuses, switch or not, as
Kafka's ShareGroupConfig and GroupCoordinatorConfig do: each value within
its ``group.share.min.*`` and ``group.share.max.*`` bounds, a heartbeat
interval shorter than the session, a group size between 1 and 1000, and
``simple`` as the only assignor (Kafka's SimpleAssignor).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

#: The share group assignors this broker has (Kafka's SimpleAssignor).
SHARE_ASSIGNORS = ("simple",)
#: Kafka's default value of ``group.share.assignors`` names the assignor by its class.
_CLASS_NAMES = {"org.apache.kafka.coordinator.group.assignor.SimpleAssignor": "simple"}
#: Kafka's bounds of ``group.share.max.size``.
SHARE_MAX_SIZE_BOUNDS = (1, 1000)


class ShareGroupSettings(Protocol):
    """The ``group.share.*`` fields of the broker's config."""

    @property
    def group_share_heartbeat_interval_ms(self) -> int: ...
    @property
    def group_share_min_heartbeat_interval_ms(self) -> int: ...
    @property
    def group_share_max_heartbeat_interval_ms(self) -> int: ...
    @property
    def group_share_session_timeout_ms(self) -> int: ...
    @property
    def group_share_min_session_timeout_ms(self) -> int: ...
    @property
    def group_share_max_session_timeout_ms(self) -> int: ...
    @property
    def group_share_max_size(self) -> int: ...
    @property
    def group_share_assignors(self) -> Sequence[str]: ...
    @property
    def group_share_record_lock_duration_ms(self) -> int: ...
    @property
    def group_share_min_record_lock_duration_ms(self) -> int: ...
    @property
    def group_share_max_record_lock_duration_ms(self) -> int: ...
    @property
    def group_share_delivery_count_limit(self) -> int: ...
    @property
    def group_share_min_delivery_count_limit(self) -> int: ...
    @property
    def group_share_max_delivery_count_limit(self) -> int: ...
    @property
    def group_share_partition_max_record_locks(self) -> int: ...
    @property
    def group_share_min_partition_max_record_locks(self) -> int: ...
    @property
    def group_share_max_partition_max_record_locks(self) -> int: ...


#: (config suffix, attribute suffix) of each value Kafka bounds by a min and a max config.
_BOUNDED = (("heartbeat.interval.ms", "heartbeat_interval_ms"), ("session.timeout.ms", "session_timeout_ms"),
            ("record.lock.duration.ms", "record_lock_duration_ms"), ("delivery.count.limit", "delivery_count_limit"),
            ("partition.max.record.locks", "partition_max_record_locks"))


def check_share_group_configs(config: ShareGroupSettings) -> None:
    """ValueError with Kafka's wording for a combination Kafka refuses at start-up."""
    for name, attr in _BOUNDED:
        value = getattr(config, f"group_share_{attr}")
        low, high = getattr(config, f"group_share_min_{attr}"), getattr(config, f"group_share_max_{attr}")
        if value < 1:
            raise ValueError(f"group.share.{name} must be greater than or equal to 1")
        if low > high:
            raise ValueError(f"group.share.min.{name} must be less than or equal to group.share.max.{name}")
        if value < low:
            raise ValueError(f"group.share.{name} must be greater than or equal to group.share.min.{name}")
        if value > high:
            raise ValueError(f"group.share.{name} must be less than or equal to group.share.max.{name}")
    if config.group_share_heartbeat_interval_ms >= config.group_share_session_timeout_ms:
        raise ValueError("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")
    low, high = SHARE_MAX_SIZE_BOUNDS
    if not low <= config.group_share_max_size <= high:
        raise ValueError(f"Invalid value {config.group_share_max_size} for configuration group.share.max.size: "
                         f"Value must be between {low} and {high}")
    share_assignor_names(config.group_share_assignors)


def share_assignor_names(configured: Sequence[str]) -> list[str]:
    """The short names of ``group.share.assignors`` (a class name as Kafka's default spells it, or the short
    name); ValueError for one this broker lacks."""
    names = list(dict.fromkeys(_CLASS_NAMES.get(a.strip(), a.strip()) for a in configured))
    unknown = [a for a in names if a not in SHARE_ASSIGNORS]
    if unknown or not names:
        raise ValueError(f"group.share.assignors: unknown assignor(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(SHARE_ASSIGNORS)}")
    return names
