"""The consumer rebalance protocol's switch and configs: group.coordinator.rebalance.protocols, group.consumer.*."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from broker.config.broker_config import BrokerConfig
from broker.coordinator_wiring import consumer_group_config
from broker.handlers.api_versions import advertised_versions


def test_keys_68_and_69_are_advertised_only_when_the_consumer_protocol_is_on() -> None:
    assert not {68, 69} & {key for key, _, _ in advertised_versions(rebalance_protocols=("classic",))}
    on = {key: (low, high) for key, low, high in advertised_versions()}
    assert on[68] == (0, 1) and on[69] == (0, 1)


def test_defaults_are_kafkas_and_the_protocol_is_on() -> None:
    config = BrokerConfig()
    assert config.group_coordinator_rebalance_protocols == ["classic", "consumer", "share"]
    assert (config.group_consumer_heartbeat_interval_ms, config.group_consumer_session_timeout_ms) == (5000, 45000)
    settings = consumer_group_config(config)
    assert settings.assignors == ("uniform", "range")
    assert settings.migration_policy == "bidirectional"


def test_switched_off_and_configured_with_kafkas_names() -> None:
    off = BrokerConfig.model_validate({"group.coordinator.rebalance.protocols": "CLASSIC"})
    assert off.group_coordinator_rebalance_protocols == ["classic"]
    config = BrokerConfig.model_validate({
        "group.coordinator.rebalance.protocols": "classic,consumer",
        "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform"})
    assert config.group_coordinator_rebalance_protocols == ["classic", "consumer"]
    assert consumer_group_config(config).assignors == ("range", "uniform")
    policy = BrokerConfig.model_validate({"group.consumer.migration.policy": "Upgrade"})
    assert consumer_group_config(policy).migration_policy == "upgrade"  # case-insensitive, as Kafka parses it


@pytest.mark.parametrize(("settings", "message"), [
    ({"group.coordinator.rebalance.protocols": "consumer"}, "must contain classic"),
    ({"group.consumer.heartbeat.interval.ms": "1000"},
     "group.consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ({"group.consumer.session.timeout.ms": "90000"},
     "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"group.consumer.assignors": "sticky"}, "unknown assignor"),
    ({"group.consumer.migration.policy": "sideways"}, "group.consumer.migration.policy"),
])
def test_kafkas_checks(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        BrokerConfig.model_validate(settings)
