"""Client-metrics subscriptions checked as Kafka's ClientMetricsConfigs checks them, and kept in a lone
broker's file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.config.client_metrics_config import (
    ClientMetricsConfigError,
    parse_subscription,
    validate_client_metrics_configs,
)
from broker.telemetry.subscriptions import (
    ClientMetricsConfigAdmin,
    ClientMetricsSubscriptions,
    LocalClientMetricsStore,
)
from protocol.config_types import ConfigSource
from protocol.errors import ErrorCode


@pytest.mark.parametrize(("name", "configs", "error", "message"), [
    ("", {"metrics": "*"}, ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"),
    ("s", {"metric": "*"}, ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: metric"),
    ("s", {"interval.ms": "50"}, ErrorCode.INVALID_REQUEST,
     "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ("s", {"interval.ms": "3600001"}, ErrorCode.INVALID_REQUEST,
     "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ("s", {"interval.ms": "soon"}, ErrorCode.INVALID_CONFIG,
     "Invalid value soon for configuration interval.ms: Not a number of type INT"),
    ("s", {"match": "client_id"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id"),
    ("s", {"match": "client_host=a"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_host=a"),
    ("s", {"match": "client_id=a=b"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id=a=b"),
    ("s", {"match": "client_id=(a"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id=(a"),
    ("s", {"match": "client_id="}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id="),
])
def test_refused_subscriptions(name: str, configs: dict[str, str], error: ErrorCode, message: str) -> None:
    with pytest.raises(ClientMetricsConfigError) as refused:
        validate_client_metrics_configs(name, configs)
    assert (refused.value.error_code, refused.value.message) == (error, message)


def test_a_trailing_equals_sign_is_dropped_as_java_splits() -> None:
    assert parse_subscription("s", {"match": "client_id=app=="}).match["client_id"].pattern == "app"


def test_a_subscription_and_its_defaults() -> None:
    configs = validate_client_metrics_configs("s", {"metrics": "a., b.", "match": "client_id=app.*, "
                                                                                   "client_software_name=java"})
    subscription = parse_subscription("s", configs)
    assert subscription.metrics == {"a.", "b."}
    assert subscription.interval_ms == 300_000
    assert subscription.matches({"client_id": "app-1", "client_software_name": "java"})
    assert not subscription.matches({"client_id": "app-1", "client_software_name": "javascript"})  # whole match
    assert not subscription.matches({"client_id": "other", "client_software_name": "java"})


def test_a_lone_brokers_subscriptions_survive_a_restart(tmp_path: Path) -> None:
    subscriptions = ClientMetricsSubscriptions()
    admin = ClientMetricsConfigAdmin(subscriptions, LocalClientMetricsStore(str(tmp_path)))
    asyncio.run(admin.store.load(subscriptions))
    admin.replace_blocking("s", {"metrics": "*", "interval.ms": "1000"}, validate_only=False)
    admin.replace_blocking("t", {"metrics": "x."}, validate_only=True)
    assert subscriptions.version == 1
    assert admin.names() == ["s"]
    assert [(e.name, e.value, e.source) for e in admin.entries("s")] == [
        ("interval.ms", "1000", ConfigSource.CLIENT_METRICS_CONFIG), ("metrics", "*", ConfigSource.CLIENT_METRICS_CONFIG)]
    reloaded = ClientMetricsSubscriptions()
    asyncio.run(LocalClientMetricsStore(str(tmp_path)).load(reloaded))
    assert reloaded.items() == [("s", {"metrics": "*", "interval.ms": "1000"})]
    admin.replace_blocking("s", {}, validate_only=False)  # every config deleted: the subscription is gone
    assert admin.names() == []
    emptied = ClientMetricsSubscriptions()
    asyncio.run(LocalClientMetricsStore(str(tmp_path)).load(emptied))
    assert emptied.items() == []
