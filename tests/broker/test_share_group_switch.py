"""Share groups' switch and broker configs: share in group.coordinator.rebalance.protocols, group.share.*."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from broker.config.broker_config import BrokerConfig
from broker.config.group_config import GroupConfigError, validate_group_configs
from broker.coordinator_wiring import share_group_config
from broker.handlers.api_versions import advertised_versions


def test_keys_76_and_77_are_advertised_only_when_share_groups_are_on() -> None:
    assert {76, 77} <= {key for key, _, _ in advertised_versions()}  # on by default, as in a new Kafka 4.2 cluster
    assert not {76, 77} & {key for key, _, _ in advertised_versions(rebalance_protocols=("classic", "consumer"))}
    on = {key: (low, high) for key, low, high in advertised_versions(rebalance_protocols=("classic", "share"))}
    assert on[76] == (1, 1) and on[77] == (1, 1)


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert "share" in config.group_coordinator_rebalance_protocols  # share groups are on, as Kafka 4.2's
    assert (config.group_share_heartbeat_interval_ms, config.group_share_min_heartbeat_interval_ms,
            config.group_share_max_heartbeat_interval_ms) == (5000, 5000, 15000)
    assert (config.group_share_session_timeout_ms, config.group_share_min_session_timeout_ms,
            config.group_share_max_session_timeout_ms) == (45000, 45000, 60000)
    assert (config.group_share_record_lock_duration_ms, config.group_share_min_record_lock_duration_ms,
            config.group_share_max_record_lock_duration_ms) == (30000, 15000, 3600000)
    assert (config.group_share_delivery_count_limit, config.group_share_min_delivery_count_limit,
            config.group_share_max_delivery_count_limit) == (5, 2, 10)
    assert (config.group_share_partition_max_record_locks, config.group_share_min_partition_max_record_locks,
            config.group_share_max_partition_max_record_locks) == (2000, 100, 10000)
    assert config.group_share_max_size == 200
    settings = share_group_config(config)
    assert (settings.heartbeat_interval_ms, settings.session_timeout_ms, settings.max_size, settings.assignor) == (
        5000, 45000, 200, "simple")


def test_switched_on() -> None:
    config = BrokerConfig.model_validate({"group.coordinator.rebalance.protocols": "classic,consumer,share"})
    assert config.group_coordinator_rebalance_protocols == ["classic", "consumer", "share"]
    by_class = BrokerConfig.model_validate(
        {"group.share.assignors": "org.apache.kafka.coordinator.group.assignor.SimpleAssignor"})
    assert share_group_config(by_class).assignor == "simple"


@pytest.mark.parametrize(("settings", "message"), [
    ({"group.coordinator.rebalance.protocols": "classic,queue"}, "unknown protocol"),
    ({"group.share.heartbeat.interval.ms": "1000"},
     "group.share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"),
    ({"group.share.session.timeout.ms": "90000"},
     "group.share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"),
    ({"group.share.record.lock.duration.ms": "1000"},
     "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"group.share.delivery.count.limit": "11"},
     "group.share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"),
    ({"group.share.max.size": "1001"}, "group.share.max.size"),
    ({"group.share.assignors": "uniform"}, "unknown assignor"),
])
def test_kafkas_checks(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        BrokerConfig.model_validate(settings)


def test_group_configs_are_bounded_by_the_broker_configs() -> None:
    broker = BrokerConfig.model_validate({"group.share.max.record.lock.duration.ms": "40000"})
    assert validate_group_configs({"share.record.lock.duration.ms": "40000"}, broker)
    with pytest.raises(GroupConfigError, match=re.escape("must be less than or equal to group.share.max.record.lock.duration.ms")):
        validate_group_configs({"share.record.lock.duration.ms": "50000"}, broker)
