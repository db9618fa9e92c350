"""DescribeConfigs / AlterConfigs / IncrementalAlterConfigs for topics and the broker, on a real broker."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigSource, ResourceType
from confluent_kafka.admin import ConfigResource as CResource
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from protocol.errors import ErrorCode
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request

TOPIC, BROKER = ConfigResourceType.TOPIC, ConfigResourceType.BROKER


# One static setting, so STATIC_BROKER_CONFIG shows up in the chains.
pytestmark = pytest.mark.pafka_broker_config("log.retention.hours=24")


def describe_topic(admin: KafkaAdminClient, topic: str, **kwargs) -> dict:
    result = admin.describe_configs([ConfigResource(TOPIC, topic)], config_filter="all", **kwargs)
    return result["topic"][topic]


def describe_broker(admin: KafkaAdminClient, name: str = "0", **kwargs) -> dict:
    result = admin.describe_configs([ConfigResource(BROKER, name)], config_filter="all", **kwargs)
    return result["broker"][name]


def synonyms(entry: dict) -> list[tuple[str, str, str]]:
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


def alter(admin: KafkaAdminClient, kind: int, name: str, configs: dict, **kwargs) -> object:
    result = admin.alter_configs([ConfigResource(kind, name, configs)], raise_on_unknown=False, **kwargs)
    return result["topic" if kind == TOPIC else "broker"][name]


_OPS = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}


def alter_default(broker: BrokerProcess, configs: dict[str, tuple[str, str | None]],
                  resource_name: str = "") -> tuple[int, str | None]:
    """IncrementalAlterConfigs on the cluster-default broker resource ("", which kafka-python cannot name)."""
    request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=BROKER, resource_name=resource_name,
        configs=[AlterableConfig(name=n, config_operation=_OPS[op], value=v) for n, (op, v) in configs.items()])],
        validate_only=False)
    response = send_request(broker, 44, 1, request).responses[0]
    return response.error_code, response.error_message


def describe_default(broker: BrokerProcess) -> dict[str, tuple[str | None, int]]:
    request = DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=BROKER, resource_name="", configuration_keys=None)])
    result = send_request(broker, 32, 4, request).results[0]
    assert result.error_code == 0
    return {c.name: (c.value, c.config_source) for c in result.configs}


def ok(result: object) -> bool:
    """kafka-python reports a resource's success as the NoError result, printed 'OK'."""
    return str(result) == "OK"


def produce_one(broker: BrokerProcess, topic: str, size: int) -> KafkaError | None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.send.max.retries": 0})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value=b"x" * size, partition=0, on_delivery=lambda err, msg: outcome.append(err))
    assert producer.flush(10) == 0
    return outcome[0]


# -- DescribeConfigs: topics --------------------------------------------------------------
def test_describe_topic_sources_and_synonym_chain(admin):
    admin.create_topics({"dc-a": {"num_partitions": 1, "configs": {"cleanup.policy": "compact"}}})
    entries = describe_topic(admin, "dc-a", include_synonyms=True)
    assert len(entries) == 25  # every topic config
    policy = entries["cleanup.policy"]
    assert (policy["value"], policy["config_source"], policy["config_type"]) == ("compact", "DYNAMIC_TOPIC_CONFIG",
                                                                               "LIST")
    assert synonyms(policy) == [("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"),
                                ("log.cleanup.policy", "delete", "DEFAULT_CONFIG")]
    # retention.ms comes from the broker's static log.retention.hours=24.
    retention = entries["retention.ms"]
    assert (retention["value"], retention["config_source"]) == ("86400000", "STATIC_BROKER_CONFIG")
    assert synonyms(retention) == [("log.retention.hours", "24", "STATIC_BROKER_CONFIG"),
                                   ("log.retention.hours", "168", "DEFAULT_CONFIG")]
    segment = entries["segment.bytes"]
    assert (segment["value"], segment["config_source"], segment["config_type"]) == ("1073741824", "DEFAULT_CONFIG",
                                                                                  "INT")
    assert not any(e["read_only"] or e["is_sensitive"] for e in entries.values())
    without = describe_topic(admin, "dc-a")
    assert without["retention.ms"]["synonyms"] == []


def test_describe_topic_keys_documentation_and_unknown_topic(broker, admin):
    admin.create_topics({"dc-b": {"num_partitions": 1}})
    request = DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=TOPIC, resource_name="dc-b",
                                configuration_keys=["retention.ms", "segment.bytes", "not.a.config"]),
        DescribeConfigsResource(resource_type=TOPIC, resource_name="dc-missing", configuration_keys=None),
    ], include_synonyms=False, include_documentation=True)
    response = send_request(broker, 32, 4, request)
    found, missing = response.results
    assert [c.name for c in found.configs] == ["retention.ms", "segment.bytes"]
    assert all(c.documentation and c.config_type for c in found.configs)
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "dc-missing" in missing.error_message
    # v1 carries no type nor documentation.
    old = send_request(broker, 32, 1, DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=TOPIC, resource_name="dc-b", configuration_keys=["retention.ms"])],
        include_synonyms=True))
    assert [(c.name, c.value, c.config_source) for c in old.results[0].configs] == [
        ("retention.ms", "86400000", 4)]


def test_describe_topic_with_confluent(admin, cadmin):
    admin.create_topics({"dc-c": {"num_partitions": 1, "configs": {"retention.ms": "5000"}}})
    future = cadmin.describe_configs([CResource(ResourceType.TOPIC, "dc-c")])
    configs = next(iter(future.values())).result(10)
    assert configs["retention.ms"].value == "5000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    with pytest.raises(KafkaException) as info:
        next(iter(cadmin.describe_configs([CResource(ResourceType.TOPIC, "dc-nope")]).values())).result(10)
    assert info.value.args[0].code() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- DescribeConfigs: the broker -----------------------------------------------------------
def test_describe_broker(broker, admin):
    entries = describe_broker(admin, include_synonyms=True)
    log_dirs = entries["log.dirs"]
    assert (log_dirs["value"], log_dirs["config_source"], log_dirs["read_only"]) == (
        str(broker.data_dir), "STATIC_BROKER_CONFIG", True)
    hours = entries["log.retention.hours"]
    assert (hours["value"], hours["config_source"], hours["read_only"]) == ("24", "STATIC_BROKER_CONFIG", False)
    # Unset with a null default: the entry is there with no value.
    assert entries["log.retention.ms"]["value"] is None
    assert entries["log.retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert entries["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    assert entries["num.partitions"]["value"] == "1"
    assert entries["num.partitions"]["config_type"] == "INT"


def test_describe_broker_resource_names(broker, cadmin):
    bad = send_request(broker, 32, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=BROKER, resource_name="7", configuration_keys=None),
        DescribeConfigsResource(resource_type=BROKER, resource_name="abc", configuration_keys=None),
    ]))
    assert [r.error_code for r in bad.results] == [ErrorCode.INVALID_REQUEST] * 2
    assert "Unexpected broker id" in bad.results[0].error_message
    configs = next(iter(cadmin.describe_configs([CResource(ResourceType.BROKER, "0")]).values())).result(10)
    assert configs["log.dirs"].is_read_only
    assert configs["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value


# -- AlterConfigs / IncrementalAlterConfigs: topics ------------------------------------------
def test_incremental_alter_topic_ops(admin):
    admin.create_topics({"ia-a": {"num_partitions": 1}})
    assert ok(alter(admin, TOPIC, "ia-a", {"retention.ms": ("SET", "1000"), "cleanup.policy": ("APPEND", "compact")}))
    entries = describe_topic(admin, "ia-a")
    assert entries["retention.ms"]["value"] == "1000"
    assert entries["cleanup.policy"]["value"] == "delete,compact"
    alter(admin, TOPIC, "ia-a", {"cleanup.policy": ("SUBTRACT", "delete"), "retention.ms": ("DELETE", None)})
    entries = describe_topic(admin, "ia-a")
    assert entries["cleanup.policy"]["value"] == "compact"
    assert (entries["retention.ms"]["value"], entries["retention.ms"]["config_source"]) == (
        "86400000", "STATIC_BROKER_CONFIG")


@pytest.mark.parametrize("configs, message", [
    ({"cleanup.policy": "foo"}, "Invalid value [foo] for configuration cleanup.policy: String must be one of"),
    ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ({"segment.bytes": "1000"}, "Invalid value 1000 for configuration segment.bytes: Value must be at least 1048576"),
    ({"min.cleanable.dirty.ratio": "2"}, "configuration min.cleanable.dirty.ratio"),
    ({"preallocate": "maybe"}, "Expected value to be either true or false"),
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"retention.ms": ("APPEND", "5")}, "Config value append is not allowed for config key: retention.ms"),
])
def test_invalid_topic_configs(admin, configs, message):
    admin.create_topics({"ia-bad": {"num_partitions": 1}}, raise_errors=False)
    error = str(alter(admin, TOPIC, "ia-bad", configs))
    assert "InvalidConfigurationError" in error and message in error, error
    assert describe_topic(admin, "ia-bad")["retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"


def test_invalid_config_on_create_topics(admin):
    result = admin.create_topics({"ia-create": {"num_partitions": 1, "configs": {"segment.bytes": "10"}}},
                                 raise_errors=False)
    assert result["topics"][0]["error_code"] == ErrorCode.INVALID_CONFIG
    assert "ia-create" not in admin.list_topics()


def test_alter_unknown_topic(admin):
    error = str(alter(admin, TOPIC, "ia-none", {"retention.ms": ("SET", "1")}))
    assert "UnknownTopicOrPartition" in error


def test_validate_only_changes_nothing(admin, cadmin):
    admin.create_topics({"ia-v": {"num_partitions": 1}})
    assert ok(alter(admin, TOPIC, "ia-v", {"retention.ms": ("SET", "1000")}, validate_only=True))
    assert describe_topic(admin, "ia-v")["retention.ms"]["value"] == "86400000"
    futures = cadmin.incremental_alter_configs([CResource(ResourceType.TOPIC, "ia-v", incremental_configs=[
        ConfigEntry("retention.ms", "abc", incremental_operation=AlterConfigOpType.SET)])], validate_only=True)
    with pytest.raises(KafkaException) as info:
        next(iter(futures.values())).result(10)
    assert info.value.args[0].code() == ErrorCode.INVALID_CONFIG


def test_legacy_alter_configs_replaces_all_overrides(admin, cadmin):
    admin.create_topics({"ia-l": {"num_partitions": 1, "configs": {"retention.ms": "1000", "segment.ms": "5000"}}})
    futures = cadmin.alter_configs([CResource(ResourceType.TOPIC, "ia-l", set_config={"max.message.bytes": "2000"})])
    next(iter(futures.values())).result(10)
    entries = describe_topic(admin, "ia-l")
    overrides = {n: e["value"] for n, e in entries.items() if e["config_source"] == "DYNAMIC_TOPIC_CONFIG"}
    assert overrides == {"max.message.bytes": "2000"}
    futures = cadmin.alter_configs([CResource(ResourceType.TOPIC, "ia-l", set_config={"cleanup.policy": "foo"})])
    with pytest.raises(KafkaException) as info:
        next(iter(futures.values())).result(10)
    assert info.value.args[0].code() == ErrorCode.INVALID_CONFIG


def test_topic_config_applies_to_the_open_log(broker, admin, cadmin):
    admin.create_topics({"ia-live": {"num_partitions": 1}})
    assert produce_one(broker, "ia-live", 5000) is None
    futures = cadmin.incremental_alter_configs([CResource(ResourceType.TOPIC, "ia-live", incremental_configs=[
        ConfigEntry("max.message.bytes", "1000", incremental_operation=AlterConfigOpType.SET)])])
    next(iter(futures.values())).result(10)
    error = produce_one(broker, "ia-live", 5000)
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_one(broker, "ia-live", 100) is None


# -- the broker's dynamic configs -------------------------------------------------------------
def test_dynamic_broker_configs_and_their_sources(broker, admin):
    assert alter_default(broker, {"log.retention.ms": ("SET", "3600000")}) == (0, None)
    alter(admin, BROKER, "0", {"log.cleaner.delete.retention.ms": ("SET", "1000")})
    try:
        admin.create_topics({"bc-a": {"num_partitions": 1}})
        topic = describe_topic(admin, "bc-a", include_synonyms=True)
        assert (topic["retention.ms"]["value"], topic["retention.ms"]["config_source"]) == (
            "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert synonyms(topic["retention.ms"]) == [
            ("log.retention.ms", "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
            ("log.retention.hours", "24", "STATIC_BROKER_CONFIG"),
            ("log.retention.hours", "168", "DEFAULT_CONFIG")]
        assert topic["delete.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
        entries = describe_broker(admin, include_synonyms=True)
        assert (entries["log.retention.ms"]["value"], entries["log.retention.ms"]["config_source"]) == (
            "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert entries["log.cleaner.delete.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert describe_default(broker) == {"log.retention.ms": ("3600000", 3)}  # DYNAMIC_DEFAULT_BROKER_CONFIG
    finally:
        alter_default(broker, {"log.retention.ms": ("DELETE", None)})
        alter(admin, BROKER, "0", {"log.cleaner.delete.retention.ms": ("DELETE", None)})
    assert describe_broker(admin)["log.retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert describe_topic(admin, "bc-a")["retention.ms"]["value"] == "86400000"


def test_read_only_config_on_the_default_resource(broker, admin):
    code, message = alter_default(broker, {"broker.id": ("SET", "3"), "log.retention.ms": ("SET", "1")})
    assert code == ErrorCode.INVALID_REQUEST
    assert message == "Cannot update these configs dynamically: Set(broker.id)"
    assert describe_default(broker) == {}
    assert describe_broker(admin)["log.retention.ms"]["value"] is None
    code, message = alter_default(broker, {"log.retention.ms": ("SET", "1")}, resource_name="5")
    assert code == ErrorCode.INVALID_REQUEST
    assert message == "Unexpected broker id, expected 0 or empty string, but received 5"


@pytest.mark.parametrize("name, configs, message", [
    ("0", {"log.dirs": ("SET", "/elsewhere")}, "Cannot update these configs dynamically: Set(log.dirs)"),
    ("0", {"log.retention.ms": ("SET", "abc")}, "Not a number of type LONG"),
    ("0", {"log.cleanup.policy": ("SET", "foo")}, "String must be one of"),
    ("0", {"log.segment.bytes": ("SET", "1000")}, "Value must be at least 1048576"),
])
def test_invalid_broker_configs(admin, name, configs, message):
    error = str(alter(admin, BROKER, name, configs))
    assert "InvalidRequestError" in error and message in error, error
    assert describe_broker(admin)["log.retention.ms"]["value"] is None


def test_broker_list_config_append(broker, admin):
    assert alter_default(broker, {"log.cleanup.policy": ("APPEND", "compact")}) == (0, None)
    try:
        assert describe_broker(admin)["log.cleanup.policy"]["value"] == "delete,compact"
        admin.create_topics({"bc-list": {"num_partitions": 1}})
        assert describe_topic(admin, "bc-list")["cleanup.policy"]["value"] == "delete,compact"
    finally:
        alter_default(broker, {"log.cleanup.policy": ("DELETE", None)})
    assert describe_broker(admin)["log.cleanup.policy"]["value"] == "delete"


def test_broker_config_applies_to_open_logs(broker, admin, cadmin):
    admin.create_topics({"bc-live": {"num_partitions": 1},
                         "bc-own": {"num_partitions": 1, "configs": {"max.message.bytes": "100000"}}})

    def set_broker(op: AlterConfigOpType, value: str | None) -> None:
        futures = cadmin.incremental_alter_configs([CResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry("message.max.bytes", value, incremental_operation=op)])])
        next(iter(futures.values())).result(10)

    set_broker(AlterConfigOpType.SET, "1000")
    try:
        error = produce_one(broker, "bc-live", 5000)
        assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert produce_one(broker, "bc-own", 5000) is None  # its own override wins
    finally:
        set_broker(AlterConfigOpType.DELETE, None)
    assert produce_one(broker, "bc-live", 5000) is None
    # The cluster default reaches open logs the same way.
    assert alter_default(broker, {"message.max.bytes": ("SET", "1000")}) == (0, None)
    try:
        error = produce_one(broker, "bc-live", 5000)
        assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    finally:
        alter_default(broker, {"message.max.bytes": ("DELETE", None)})
    assert produce_one(broker, "bc-live", 5000) is None


# -- durability ----------------------------------------------------------------------------------
def test_configs_survive_restart():
    with BrokerProcess() as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_topics({"kept": {"num_partitions": 1, "configs": {"retention.ms": "1000"}}})
            alter(admin, TOPIC, "kept", {"cleanup.policy": ("SET", "compact,delete"),
                                         "max.message.bytes": ("SET", "1000")})
            alter(admin, BROKER, "0", {"log.retention.bytes": ("SET", "123456789")})
            assert alter_default(broker, {"log.cleaner.min.cleanable.ratio": ("SET", "0.25")}) == (0, None)
        finally:
            admin.close()
        assert broker.terminate() == 0
        broker.start()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            topic = describe_topic(admin, "kept")
            overrides = {n: e["value"] for n, e in topic.items() if e["config_source"] == "DYNAMIC_TOPIC_CONFIG"}
            assert overrides == {"retention.ms": "1000", "cleanup.policy": "compact,delete",
                                 "max.message.bytes": "1000"}
            assert (topic["retention.bytes"]["value"], topic["retention.bytes"]["config_source"]) == (
                "123456789", "DYNAMIC_BROKER_CONFIG")
            assert (topic["min.cleanable.dirty.ratio"]["value"],
                    topic["min.cleanable.dirty.ratio"]["config_source"]) == ("0.25", "DYNAMIC_DEFAULT_BROKER_CONFIG")
            entries = describe_broker(admin)
            assert entries["log.retention.bytes"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
            assert describe_default(broker) == {"log.cleaner.min.cleanable.ratio": ("0.25", 3)}
        finally:
            admin.close()
        # The reloaded override is enforced by the reopened log.
        error = produce_one(broker, "kept", 5000)
        assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
