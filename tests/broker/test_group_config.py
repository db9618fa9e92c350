"""Group configs (resource type GROUP): Kafka's checks, their description, and where each mode keeps them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker.cluster.zk_group_configs import ZkGroupConfigStore
from broker.config.broker_config import BrokerConfig
from broker.config.config_admin_manager import ConfigChangeError, ConfigOp, incremental_alter_group
from broker.config.group_config import GROUP_CONFIGS, GroupConfigError, group_config_entries, validate_group_configs
from broker.group_config_store import GroupConfigAdmin, GroupConfigsFile, LocalGroupConfigStore
from coordinator.group.group_configs import GroupConfigs
from protocol.config_types import AlterConfigOp, ConfigSource, ConfigType
from protocol.errors import ErrorCode

CONFIG = BrokerConfig.model_validate({"group.consumer.max.session.timeout.ms": "90000"})


def test_the_names_are_kafka_4_2s_consumer_and_share_configs() -> None:
    assert set(GROUP_CONFIGS) == {
        "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.session.timeout.ms",
        "share.heartbeat.interval.ms", "share.record.lock.duration.ms", "share.delivery.count.limit",
        "share.partition.max.record.locks", "share.auto.offset.reset", "share.isolation.level",
        "share.renew.acknowledge.enable"}


@pytest.mark.parametrize("configs, message", [
    ({"consumer.session.timeout.ms": "60000", "bogus": "1"}, "Unknown group config name: bogus"),
    ({"consumer.session.timeout.ms": "abc"},
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ({"consumer.session.timeout.ms": "0"},
     "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
    ({"consumer.session.timeout.ms": "40000"},
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "90001"},
     "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"consumer.heartbeat.interval.ms": "4999"},
     "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ({"consumer.heartbeat.interval.ms": "15001"},
     "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ({"share.record.lock.duration.ms": "999"},
     "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ({"share.isolation.level": "serializable"},
     ("Invalid value serializable for configuration share.isolation.level: "
      "String must be one of: read_committed, read_uncommitted")),
    ({"share.renew.acknowledge.enable": "yes"},
     "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value to be either true or false"),
])
def test_refused_as_kafka_refuses(configs: dict[str, str], message: str) -> None:
    with pytest.raises(GroupConfigError) as refused:
        validate_group_configs(configs, CONFIG)
    assert str(refused.value) == message


def test_session_must_outlast_the_heartbeat_interval() -> None:
    config = BrokerConfig.model_validate({"group.consumer.min.session.timeout.ms": "1000",
                                          "group.consumer.min.heartbeat.interval.ms": "1000"})
    with pytest.raises(GroupConfigError) as refused:
        validate_group_configs({"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "3000"},
                               config)
    assert str(refused.value) == "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"


@pytest.mark.parametrize("value", ["earliest", "latest", "by_duration:PT1H", "by_duration:P1DT2H3M4.5S"])
def test_share_auto_offset_reset_values(value: str) -> None:
    assert validate_group_configs({"share.auto.offset.reset": value}, CONFIG) == {"share.auto.offset.reset": value}


@pytest.mark.parametrize("value", ["newest", "by_duration:-PT1H", "by_duration:1h"])
def test_bad_share_auto_offset_reset(value: str) -> None:
    with pytest.raises(GroupConfigError):
        validate_group_configs({"share.auto.offset.reset": value}, CONFIG)


def test_entries_list_the_groups_values_and_the_brokers_defaults() -> None:
    entries = {e.name: e for e in group_config_entries({"consumer.session.timeout.ms": "60000"}, CONFIG,
                                                       synonyms=True, docs=True)}
    assert set(entries) == set(GROUP_CONFIGS)
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.source, session.config_type) == ("60000", ConfigSource.GROUP_CONFIG,
                                                                     ConfigType.INT)
    assert [(s.name, s.value, s.source) for s in session.synonyms] == [
        ("consumer.session.timeout.ms", "60000", ConfigSource.GROUP_CONFIG)]
    heartbeat = entries["consumer.heartbeat.interval.ms"]
    assert (heartbeat.value, heartbeat.source) == ("5000", ConfigSource.DEFAULT_CONFIG)
    assert entries["share.auto.offset.reset"].value == "latest"
    assert entries["share.renew.acknowledge.enable"].value == "true"
    assert heartbeat.doc


def _broker(tmp_path: Path) -> tuple[Any, GroupConfigs, LocalGroupConfigStore]:
    configs = GroupConfigs(45000, 5000)
    store = LocalGroupConfigStore(str(tmp_path))
    asyncio.run(store.load(configs))
    return SimpleNamespace(config=CONFIG, group_config_admin=GroupConfigAdmin(configs, store)), configs, store


def test_incremental_alter_sets_deletes_and_persists(tmp_path: Path) -> None:
    broker, configs, _ = _broker(tmp_path)
    incremental_alter_group(broker, "g", [ConfigOp("consumer.session.timeout.ms", AlterConfigOp.SET, "60000"),
                                          ConfigOp("share.isolation.level", AlterConfigOp.SET, "read_committed")],
                            validate_only=False)
    assert configs.consumer_session_timeout_ms("g") == 60000
    incremental_alter_group(broker, "g", [ConfigOp("share.isolation.level", AlterConfigOp.DELETE, None)], False)
    assert configs.get("g") == {"consumer.session.timeout.ms": "60000"}
    reloaded = GroupConfigs(45000, 5000)
    asyncio.run(LocalGroupConfigStore(str(tmp_path)).load(reloaded))  # as a restarted broker reads it
    assert reloaded.get("g") == {"consumer.session.timeout.ms": "60000"}
    assert GroupConfigsFile(str(tmp_path)).load() == {"g": {"consumer.session.timeout.ms": "60000"}}


def test_incremental_alter_errors(tmp_path: Path) -> None:
    broker, configs, _ = _broker(tmp_path)

    def code(group: str, *ops: ConfigOp, validate_only: bool = False) -> tuple[ErrorCode, str]:
        with pytest.raises(ConfigChangeError) as refused:
            incremental_alter_group(broker, group, list(ops), validate_only)
        return refused.value.error_code, refused.value.message

    assert code("g", ConfigOp("bogus", AlterConfigOp.SET, "1")) == (
        ErrorCode.INVALID_CONFIG, "Unknown group config name: bogus")
    assert code("g", ConfigOp("consumer.session.timeout.ms", AlterConfigOp.APPEND, "1"))[0] == ErrorCode.INVALID_CONFIG
    assert code("", ConfigOp("consumer.session.timeout.ms", AlterConfigOp.SET, "50000"))[0] == ErrorCode.INVALID_REQUEST
    incremental_alter_group(broker, "g", [ConfigOp("consumer.session.timeout.ms", AlterConfigOp.SET, "50000")],
                            validate_only=True)
    assert configs.get("g") == {}
    assert not (tmp_path / "group-configs.json").exists()


class FakeZk:
    def __init__(self) -> None:
        self.znodes: dict[str, dict[str, str]] = {"a%2Fb": {"consumer.heartbeat.interval.ms": "6000"}}

    async def get_group_configs(self) -> dict[str, dict[str, str]]:
        return {"a/b": dict(self.znodes["a%2Fb"])}

    async def get_group_config(self, group_id: str) -> dict[str, str]:
        return dict(self.znodes.get(group_id.replace("/", "%2F"), {}))

    async def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        self.znodes[group_id.replace("/", "%2F")] = dict(configs)


def test_a_cluster_members_configs_follow_zookeeper() -> None:
    async def run() -> None:
        zk, configs = FakeZk(), GroupConfigs(45000, 5000)
        store = ZkGroupConfigStore(zk, asyncio.get_running_loop())  # type: ignore[arg-type]
        await store.load(configs)
        assert configs.consumer_heartbeat_interval_ms("a/b") == 6000
        # A change through this broker: the znode, written from the append thread.
        await asyncio.to_thread(store.write_blocking, "g", {"consumer.session.timeout.ms": "50000"})
        assert zk.znodes["g"] == {"consumer.session.timeout.ms": "50000"}
        assert configs.consumer_session_timeout_ms("g") == 50000
        # A change through another broker reaches this one by notification.
        zk.znodes["g"] = {"consumer.session.timeout.ms": "55000"}
        await store.reload("g")
        assert configs.consumer_session_timeout_ms("g") == 55000
    asyncio.run(run())


def test_legacy_alter_configs_replaces_the_whole_set(tmp_path: Path) -> None:
    from broker.config.config_admin_manager import alter_group

    broker, configs, _ = _broker(tmp_path)
    alter_group(broker, "g", [("consumer.session.timeout.ms", "60000"), ("share.isolation.level", "read_committed")],
                validate_only=False)
    alter_group(broker, "g", [("consumer.heartbeat.interval.ms", "6000")], validate_only=False)
    assert configs.get("g") == {"consumer.heartbeat.interval.ms": "6000"}
    with pytest.raises(ConfigChangeError) as refused:
        alter_group(broker, "g", [("consumer.heartbeat.interval.ms", None)], validate_only=False)
    assert refused.value.error_code == ErrorCode.INVALID_CONFIG
