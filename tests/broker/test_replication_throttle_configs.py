"""The replication throttles' configs on a running broker (KIP-73): the broker's
``leader/follower.replication.throttled.rate`` (per broker and as the cluster default) and the
topics' ``leader/follower.replication.throttled.replicas``, set with IncrementalAlterConfigs,
shown by DescribeConfigs, checked as Kafka checks them, and applied at once to the replica
manager's quotas. The broker runs in this process so the test can look at those quotas; the
admin requests come over its socket, from librdkafka where it can name the resource and by hand
on the wire for the cluster default "" (no Python client names it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from broker.admin_manager import AdminError, validate_topic_configs
from broker.config.broker_config import load_broker_config
from broker.config.dynamic_broker_config import BrokerConfigError, validate_dynamic_configs
from broker.config.dynamic_config_sets import NOT_APPLIED
from broker.kafka_server import KafkaServer, replication_quotas
from protocol.config_types import ConfigResourceType, ConfigSource, ConfigType
from protocol.errors import ErrorCode
from protocol.messages import describe_configs as dc
from protocol.messages import incremental_alter_configs as iac
from pytest_pafka.ports import free_port
from replication.replication_quota_manager import ALL_REPLICAS, LONG_MAX
from storage.log_config import LogConfig
from testing.sockets import send_request

T = TypeVar("T")
TOPIC = "throttled"
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
FORMAT = "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


# -- validation --------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["", "*", "0:0", "0:1, 1:2 ,2:0", " * "])
def test_throttled_replicas_accepted(value: str) -> None:
    assert validate_topic_configs(LogConfig(), {LEADER_REPLICAS: value, FOLLOWER_REPLICAS: value})


@pytest.mark.parametrize("value, shown", [
    ("0-1", "[0-1]"), ("0:1:2", "[0:1:2]"), ("*,0:1", "[*, 0:1]"), ("a:b", "[a:b]"), ("0", "[0]"), ("**", "[**]"),
])
def test_throttled_replicas_refused_as_kafka_refuses_them(value: str, shown: str) -> None:
    with pytest.raises(AdminError) as info:
        validate_topic_configs(LogConfig(), {FOLLOWER_REPLICAS: value})
    assert info.value.error_code == ErrorCode.INVALID_CONFIG
    assert info.value.message == (f"Invalid value {shown} for configuration {FOLLOWER_REPLICAS}: {FOLLOWER_REPLICAS} "
                                  f"must be the literal '*' or a list of replicas in the following format: {FORMAT}")


@pytest.mark.parametrize("value, reason", [("-1", "Value must be at least 0"), ("1.5", "Not a number of type LONG"),
                                           ("9223372036854775808", "Not a number of type LONG")])
def test_throttled_rates_refused_as_kafka_refuses_them(value: str, reason: str) -> None:
    with pytest.raises(BrokerConfigError, match=f"Invalid value {value} for configuration {LEADER_RATE}: {reason}"):
        validate_dynamic_configs({LEADER_RATE: value}, per_broker=True)
    assert validate_dynamic_configs({FOLLOWER_RATE: " 1048576 "}, per_broker=False) == {FOLLOWER_RATE: "1048576"}


def test_rate_windows_come_from_the_static_broker_config(tmp_path: Path) -> None:
    config = load_broker_config(overrides=[f"log.dirs={tmp_path}", "replication.quota.window.num=5",
                                           "replication.quota.window.size.seconds=2"], environ={})
    quotas = replication_quotas(config)
    for quota in (quotas.leader, quotas.follower):
        assert (quota.num_quota_samples, quota.quota_window_size_seconds, quota.upper_bound) == (5, 2, LONG_MAX)
    with pytest.raises(ValueError, match="at least 1"):
        load_broker_config(overrides=[f"log.dirs={tmp_path}", "replication.quota.window.num=0"], environ={})


# -- a running broker -------------------------------------------------------------------------------
def _run(tmp_path: Path, scenario: Callable[[KafkaServer, str], Awaitable[None]]) -> None:
    port = free_port()
    config = load_broker_config(overrides=[f"log.dirs={tmp_path / 'data'}", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                                          "prometheus.metrics.port=0"],
                                environ={})

    async def main() -> None:
        server = KafkaServer(config)
        await server.startup()
        try:
            await scenario(server, f"127.0.0.1:{port}")
        finally:
            await server.shutdown()

    asyncio.run(asyncio.wait_for(main(), 60))


class _Address:
    def __init__(self, bootstrap: str) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.host, self.port = host, int(port)


def _alter(admin: AdminClient, kind: ResourceType, name: str, configs: dict[str, str | None]) -> None:
    """IncrementalAlterConfigs through librdkafka: SET, or DELETE for None."""
    entries = [ConfigEntry(n, v, incremental_operation=AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET)
               for n, v in configs.items()]
    futures = admin.incremental_alter_configs([ConfigResource(kind, name, incremental_configs=entries)])
    next(iter(futures.values())).result(10)


def _describe(admin: AdminClient, kind: ResourceType, name: str) -> dict[str, Any]:
    return next(iter(admin.describe_configs([ConfigResource(kind, name)]).values())).result(10)


def _alter_cluster_default(bootstrap: str, configs: dict[str, str]) -> int:
    request = iac.IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
        resource_type=ConfigResourceType.BROKER, resource_name="",
        configs=[iac.AlterableConfig(name=n, config_operation=0, value=v) for n, v in configs.items()])],
        validate_only=False)
    return int(send_request(_Address(bootstrap), 44, 1, request).responses[0].error_code)


def _describe_wire(bootstrap: str, broker: str, keys: list[str] | None) -> dict[str, Any]:
    """DescribeConfigs v4 of a broker resource, synonyms and types included (librdkafka keys
    synonyms by name, so a chain of one name's sources does not survive it)."""
    request = dc.DescribeConfigsRequest(resources=[dc.DescribeConfigsResource(
        resource_type=ConfigResourceType.BROKER, resource_name=broker, configuration_keys=keys)],
        include_synonyms=True, include_documentation=True)
    result = send_request(_Address(bootstrap), 32, 4, request).results[0]
    assert result.error_code == ErrorCode.NO_ERROR, result.error_message
    return {c.name: c for c in result.configs}


async def _off_loop(call: Callable[..., T], *args: Any) -> T:
    """Blocking client calls run off the loop the broker serves on."""
    return await asyncio.to_thread(call, *args)


def test_rates_are_described_and_reach_the_quotas(tmp_path: Path) -> None:
    async def scenario(server: KafkaServer, bootstrap: str) -> None:
        quotas = server.replica_manager.quotas
        assert (quotas.leader.upper_bound, quotas.follower.upper_bound) == (LONG_MAX, LONG_MAX)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert await _off_loop(_alter_cluster_default, bootstrap, {LEADER_RATE: "4000000",
                                                                   FOLLOWER_RATE: "3000000"}) == ErrorCode.NO_ERROR
        await _off_loop(_alter, admin, ResourceType.BROKER, "0", {LEADER_RATE: "204800"})
        # Per broker wins over the cluster default, which applies where there is none.
        assert (quotas.leader.upper_bound, quotas.follower.upper_bound) == (204800, 3000000)
        described = await _off_loop(_describe, admin, ResourceType.BROKER, "0")
        leader, follower = described[LEADER_RATE], described[FOLLOWER_RATE]
        assert (leader.value, leader.source, leader.is_read_only) == (
            "204800", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
        assert (follower.value, follower.source) == ("3000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        # The rate windows are static (read-only) broker configs with Kafka's defaults.
        assert [(described[n].value, described[n].is_read_only) for n in (
            "replication.quota.window.num", "replication.quota.window.size.seconds")] == [("11", True), ("1", True)]
        wire = await _off_loop(_describe_wire, bootstrap, "0", [LEADER_RATE])
        assert [(s.value, s.source) for s in wire[LEADER_RATE].synonyms] == [
            ("204800", ConfigSource.DYNAMIC_BROKER_CONFIG), ("4000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (str(LONG_MAX), ConfigSource.DEFAULT_CONFIG)]
        assert wire[LEADER_RATE].config_type == ConfigType.LONG
        assert NOT_APPLIED not in wire[LEADER_RATE].documentation  # pafka acts on it
        default = await _off_loop(_describe_wire, bootstrap, "", None)
        assert {n: (c.value, c.config_source) for n, c in default.items()} == {
            LEADER_RATE: ("4000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            FOLLOWER_RATE: ("3000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)}
        # Deleting the broker's value falls back to the cluster default, at once.
        await _off_loop(_alter, admin, ResourceType.BROKER, "0", {LEADER_RATE: None})
        assert quotas.leader.upper_bound == 4000000
        with pytest.raises(KafkaException) as info:
            await _off_loop(_alter, admin, ResourceType.BROKER, "0", {FOLLOWER_RATE: "-1"})
        assert info.value.args[0].code() == ErrorCode.INVALID_REQUEST
        assert quotas.follower.upper_bound == 3000000

    _run(tmp_path, scenario)


def test_throttled_replicas_are_described_and_reach_the_quotas(tmp_path: Path) -> None:
    async def scenario(server: KafkaServer, bootstrap: str) -> None:
        quotas = server.replica_manager.quotas
        admin = AdminClient({"bootstrap.servers": bootstrap})
        created = admin.create_topics([NewTopic(TOPIC, 3, 1, config={FOLLOWER_REPLICAS: "*"})])
        await _off_loop(next(iter(created.values())).result, 10)
        assert quotas.follower.throttled_topics == {TOPIC: ALL_REPLICAS}
        # This broker is 0: its entries throttle partitions 0 and 2 here, broker 5's nothing.
        await _off_loop(_alter, admin, ResourceType.TOPIC, TOPIC, {LEADER_REPLICAS: "0:0,1:5,2:0"})
        assert [quotas.leader.is_throttled((TOPIC, p)) for p in range(3)] == [True, False, True]
        described = await _off_loop(_describe, admin, ResourceType.TOPIC, TOPIC)
        leader, follower = described[LEADER_REPLICAS], described[FOLLOWER_REPLICAS]
        assert (leader.value, leader.source) == ("0:0,1:5,2:0", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        assert (follower.value, follower.source) == ("*", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        # A bad list is refused with Kafka's InvalidConfigurationException and changes nothing.
        with pytest.raises(KafkaException) as info:
            await _off_loop(_alter, admin, ResourceType.TOPIC, TOPIC, {LEADER_REPLICAS: "0-0"})
        assert info.value.args[0].code() == ErrorCode.INVALID_CONFIG
        assert "must be the literal '*' or a list of replicas" in info.value.args[0].str()
        assert quotas.leader.is_throttled((TOPIC, 0))
        # Removing the configs lifts the throttles; the defaults describe as empty.
        await _off_loop(_alter, admin, ResourceType.TOPIC, TOPIC, {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None})
        assert quotas.leader.throttled_topics == {} and quotas.follower.throttled_topics == {}
        described = await _off_loop(_describe, admin, ResourceType.TOPIC, TOPIC)
        assert (described[LEADER_REPLICAS].value, described[LEADER_REPLICAS].source) == (
            "", ConfigSource.DEFAULT_CONFIG)

    _run(tmp_path, scenario)
