"""Every dynamically updatable broker config Kafka documents: accepted, checked, stored, described.

Real clients where they can name the resource (confluent-kafka for a broker id,
kafka-python at api_version (0, 11) for DescribeConfigs v0); the cluster
default resource "" by hand on the wire, as no Python client can name it.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from confluent_kafka.admin import ConfigResource as CResource
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from broker.config.dynamic_broker_config import FILE_NAME
from broker.config.dynamic_config_sets import NOT_APPLIED
from protocol.errors import ErrorCode
from protocol.messages import alter_configs as ac
from protocol.messages import describe_configs as dc
from protocol.messages import incremental_alter_configs as iac
from pytest_pafka.broker_process import BrokerProcess
from testing.sockets import send_request

BROKER = 4
SECRET = "pafka-dynconf-s3cret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        f'password="{SECRET}";')
_OPS = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}


@pytest.fixture(autouse=True)
def clean_configs(broker: BrokerProcess) -> Iterator[None]:
    """Each test starts and ends with no dynamic broker config (AlterConfigs replaces the whole set)."""
    reset(broker)
    yield
    reset(broker)


def reset(broker: BrokerProcess) -> None:
    request = ac.AlterConfigsRequest(resources=[
        ac.AlterConfigsResource(resource_type=BROKER, resource_name=name, configs=[]) for name in ("0", "")],
        validate_only=False)
    assert [r.error_code for r in send_request(broker, 33, 2, request).responses] == [0, 0]


def alter_wire(broker: BrokerProcess, name: str, configs: dict[str, tuple[str, str | None]],
               validate_only: bool = False) -> tuple[int, str | None]:
    request = iac.IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
        resource_type=BROKER, resource_name=name,
        configs=[iac.AlterableConfig(name=n, config_operation=_OPS[op], value=v) for n, (op, v) in configs.items()])],
        validate_only=validate_only)
    response = send_request(broker, 44, 1, request).responses[0]
    return response.error_code, response.error_message


def describe_wire(broker: BrokerProcess, name: str, version: int = 4,
                  keys: list[str] | None = None) -> dict[str, dc.DescribeConfigsResourceResult]:
    request = dc.DescribeConfigsRequest(resources=[
        dc.DescribeConfigsResource(resource_type=BROKER, resource_name=name, configuration_keys=keys)],
        include_synonyms=version >= 1, include_documentation=version >= 3)
    result = send_request(broker, 32, version, request).results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: c for c in result.configs}


def alter_confluent(cadmin: AdminClient, configs: dict[str, str], validate_only: bool = False) -> None:
    entries = [ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET) for n, v in configs.items()]
    futures = cadmin.incremental_alter_configs([CResource(ResourceType.BROKER, "0", incremental_configs=entries)],
                                               validate_only=validate_only)
    next(iter(futures.values())).result(10)


def describe_confluent(cadmin: AdminClient) -> dict:
    return next(iter(cadmin.describe_configs([CResource(ResourceType.BROKER, "0")]).values())).result(10)


# -- per broker, with librdkafka ------------------------------------------------------------
PER_BROKER = {
    "listener.name.plaintext.ssl.keystore.location": "/etc/pafka/broker0.jks",   # SSL, per listener
    "listener.name.plaintext.ssl.keystore.password": SECRET,
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,                 # SASL, per mechanism
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "ssl.client.auth": "required",
    "num.io.threads": "12",                                                      # thread counts
    "log.cleaner.threads": "2",                                                  # log cleaner
    "max.connections.per.ip.overrides": "127.0.0.1:50,localhost:20",             # connection quotas
    "leader.replication.throttled.rate": "10485760",                             # replication quotas
}


def test_every_dynamic_set_per_broker(broker, cadmin):
    alter_confluent(cadmin, PER_BROKER)
    described = describe_confluent(cadmin)
    for name, value in PER_BROKER.items():
        entry = described[name]
        assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, name
        assert not entry.is_read_only, name
        if "password" in name or "jaas" in name:
            assert (entry.value, entry.is_sensitive) == (None, True), name
        else:
            assert (entry.value, entry.is_sensitive) == (value, False), name
    # Not set: Kafka's defaults, still dynamic.
    assert (described["num.network.threads"].value, described["num.network.threads"].source) == (
        "3", ConfigSource.DEFAULT_CONFIG.value)
    assert not described["num.network.threads"].is_read_only
    assert described["log.dirs"].is_read_only
    # A log default pafka applies keeps its plain documentation; the others say they are only stored.
    documented = describe_wire(broker, "0", keys=["num.io.threads", "log.retention.ms",
                                                  "listener.name.plaintext.ssl.keystore.password"])
    assert documented["num.io.threads"].documentation.endswith(NOT_APPLIED)
    assert documented["num.io.threads"].config_type == 3  # INT
    assert NOT_APPLIED not in documented["log.retention.ms"].documentation
    password = documented["listener.name.plaintext.ssl.keystore.password"]
    assert (password.config_type, password.value, password.is_sensitive) == (9, None, True)  # PASSWORD
    assert [(s.name, s.value, s.source) for s in password.synonyms] == [
        ("listener.name.plaintext.ssl.keystore.password", None, 2)]


def test_cluster_default_resource(broker, cadmin):
    assert alter_wire(broker, "", {"max.connections": ("SET", "1000"), "num.io.threads": ("SET", "16"),
                                   "listener.name.plaintext.max.connections": ("SET", "500"),
                                   "follower.replication.throttled.rate": ("SET", "2097152")}) == (0, None)
    default = describe_wire(broker, "")
    assert {n: (e.value, e.config_source) for n, e in default.items()} == {
        "max.connections": ("1000", 3), "num.io.threads": ("16", 3),
        "listener.name.plaintext.max.connections": ("500", 3), "follower.replication.throttled.rate": ("2097152", 3)}
    # Per broker wins over the cluster default; both show in the synonyms, most specific first.
    alter_confluent(cadmin, {"num.io.threads": "10"})
    entry = describe_wire(broker, "0", keys=["num.io.threads"])["num.io.threads"]
    assert (entry.value, entry.config_source) == ("10", 2)
    assert [(s.value, s.source) for s in entry.synonyms] == [("10", 2), ("16", 3), ("8", 5)]
    described = describe_confluent(cadmin)
    assert described["max.connections"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    # A listener override's synonym is the config it overrides.
    listener = describe_wire(broker, "0", keys=["listener.name.plaintext.max.connections"])
    assert [(s.name, s.value, s.source) for s in listener["listener.name.plaintext.max.connections"].synonyms] == [
        ("listener.name.plaintext.max.connections", "500", 3), ("max.connections", "1000", 3),
        ("max.connections", "2147483647", 5)]


@pytest.mark.parametrize("configs, message", [
    ({"ssl.client.auth": "required"},
     "Cannot update these configs at default cluster level, broker id must be specified: Set(ssl.client.auth)"),
    ({"listener.name.plaintext.ssl.keystore.location": "/x"},
     ("Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(listener.name.plaintext.ssl.keystore.location)")),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092"},
     "Cannot update these configs at default cluster level, broker id must be specified: Set(listeners)"),
    ({"num.io.threads": "0"}, "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
])
def test_per_broker_configs_refused_as_cluster_default(broker, configs, message):
    code, error = alter_wire(broker, "", {n: ("SET", v) for n, v in configs.items()})
    assert (code, error) == (ErrorCode.INVALID_REQUEST, message)
    assert describe_wire(broker, "") == {}


@pytest.mark.parametrize("configs, message", [
    ({"num.io.threads": "0"}, "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
    ({"num.io.threads": "abc"}, "Invalid value abc for configuration num.io.threads: Not a number of type INT"),
    ({"num.io.threads": "17"}, ("Dynamic thread count update validation failed for num.io.threads=17, value should "
                               "not be greater than double the current value 8")),
    ({"background.threads": "4"}, ("Dynamic thread count update validation failed for background.threads=4, value "
                                  "should be at least half the current value 10")),
    ({"num.replica.fetchers": "0"}, ("Dynamic thread count update validation failed for num.replica.fetchers=0, "
                                    "value should be at least 1")),
    ({"log.cleaner.threads": "3"}, ("Log cleaner threads cannot be increased to more than double the current "
                                   "value 1")),
    ({"ssl.client.auth": "maybe"}, ("Invalid value maybe for configuration ssl.client.auth: String must be one of: "
                                   "required, requested, none")),
    ({"listener.name.plaintext.ssl.client.auth": "sometimes"}, ("Invalid value sometimes for configuration "
                                                                "listener.name.plaintext.ssl.client.auth")),
    ({"ssl.keystore.password": SECRET}, ("These security configs can be dynamically updated only per-listener using "
                                        "the listener prefix: Set(ssl.keystore.password)")),
    ({"broker.id": "3"}, "Cannot update these configs dynamically: Set(broker.id)"),
    ({"listener.name.plaintext.log.retention.ms": "1"},
     "Cannot update these configs dynamically: Set(listener.name.plaintext.log.retention.ms)"),
    ({"max.connections": "-1"}, "Invalid value -1 for configuration max.connections: Value must be at least 0"),
    ({"max.connections.per.ip.overrides": "127.0.0.1=5"}, "configuration max.connections.per.ip.overrides"),
    ({"leader.replication.throttled.rate": "-5"}, "leader.replication.throttled.rate: Value must be at least 0"),
    ({"sasl.login.refresh.window.factor": "2"}, "sasl.login.refresh.window.factor: Value must be no more than 1.0"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,FOO://127.0.0.1:9093"},
     "Listeners 'Set(FOO, PLAINTEXT)' must be subset of listener map"),
    ({"listeners": "OTHER://127.0.0.1:9093", "listener.security.protocol.map": "OTHER:PLAINTEXT"},
     "Advertised listeners 'Set(PLAINTEXT)' must be a subset of listeners 'Set(OTHER)'"),
    ({"listener.security.protocol.map": "PLAINTEXT:CLEARTEXT"}, "configuration listener.security.protocol.map"),
])
def test_invalid_broker_configs_refused(broker, cadmin, configs, message):
    with pytest.raises(KafkaException) as info:
        alter_confluent(cadmin, configs)
    error = info.value.args[0]
    assert error.code() == ErrorCode.INVALID_REQUEST
    assert message in error.str(), error.str()
    assert SECRET not in error.str()
    assert describe_wire(broker, "0", keys=["num.io.threads"])["num.io.threads"].config_source == 5


def test_thread_count_steps_from_the_current_value(broker, cadmin):
    alter_confluent(cadmin, {"num.io.threads": "16"})
    alter_confluent(cadmin, {"num.io.threads": "32"})  # double the new current value
    with pytest.raises(KafkaException):
        alter_confluent(cadmin, {"num.io.threads": "8"})  # less than half of 32
    # Deleting the value is a change back to the default (8): refused the same way, so step down first.
    assert alter_wire(broker, "0", {"num.io.threads": ("DELETE", None)})[0] == ErrorCode.INVALID_REQUEST
    alter_confluent(cadmin, {"num.io.threads": "16"})
    assert alter_wire(broker, "0", {"num.io.threads": ("DELETE", None)}) == (0, None)


def test_validate_only_stores_nothing(broker, cadmin):
    alter_confluent(cadmin, {"num.io.threads": "12", "ssl.client.auth": "requested"}, validate_only=True)
    assert describe_confluent(cadmin)["num.io.threads"].value == "8"
    assert alter_wire(broker, "0", {"num.io.threads": ("SET", "0")}, validate_only=True)[0] == ErrorCode.INVALID_REQUEST


def test_list_configs_append_and_subtract(broker):
    assert alter_wire(broker, "0", {"sasl.enabled.mechanisms": ("APPEND", "PLAIN")}) == (0, None)
    assert describe_wire(broker, "0", keys=["sasl.enabled.mechanisms"])["sasl.enabled.mechanisms"].value == (
        "GSSAPI,PLAIN")
    assert alter_wire(broker, "0", {"sasl.enabled.mechanisms": ("SUBTRACT", "GSSAPI")}) == (0, None)
    assert describe_wire(broker, "0", keys=["sasl.enabled.mechanisms"])["sasl.enabled.mechanisms"].value == "PLAIN"
    code, message = alter_wire(broker, "0", {"num.io.threads": ("APPEND", "1")})
    assert (code, message) == (ErrorCode.INVALID_CONFIG, ("Config value append is not allowed for config key: "
                                                         "num.io.threads"))


def test_sensitive_values_never_leave_the_broker(broker, cadmin):
    alter_confluent(cadmin, PER_BROKER)
    for version in range(5):
        for name in ("0", ""):
            request = dc.DescribeConfigsRequest(resources=[
                dc.DescribeConfigsResource(resource_type=BROKER, resource_name=name, configuration_keys=None)],
                include_synonyms=version >= 1, include_documentation=version >= 3)
            response = send_request(broker, 32, version, request)
            assert SECRET not in repr(response)
    assert SECRET not in repr(describe_confluent(cadmin))
    assert SECRET not in broker.log_text()
    store = broker.data_dir / FILE_NAME
    assert stat.S_IMODE(store.stat().st_mode) == 0o600


# -- DescribeConfigs v0, with kafka-python speaking as a 0.11 client ----------------------------
def test_kafka_python_0_11_describe_configs_v0(broker, cadmin):
    alter_confluent(cadmin, {"num.io.threads": "12", "listener.name.plaintext.ssl.keystore.password": SECRET})
    created = cadmin.create_topics([NewTopic("dyn-v0", 1, 1, config={"retention.ms": "1234"})])
    next(iter(created.values())).result(10)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=(0, 11), request_timeout_ms=10_000)
    try:
        result = client.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")
        entries = result["broker"]["0"]
        topic = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "dyn-v0")],
                                        config_filter="all")["topic"]["dyn-v0"]
    finally:
        client.close()
    # is_default is a v0-only field: its presence shows the version that was spoken.
    assert (entries["num.io.threads"]["value"], entries["num.io.threads"]["is_default"]) == ("12", False)
    assert (entries["num.network.threads"]["value"], entries["num.network.threads"]["is_default"]) == ("3", True)
    assert entries["log.dirs"]["read_only"] and not entries["log.dirs"]["is_default"]
    password = entries["listener.name.plaintext.ssl.keystore.password"]
    assert (password["value"], password["is_sensitive"]) == (None, True)
    assert (topic["retention.ms"]["value"], topic["retention.ms"]["is_default"]) == ("1234", False)
    assert topic["cleanup.policy"]["is_default"] is True
    # The same on the wire: no sources, no synonyms at v0.
    wire = describe_wire(broker, "0", version=0, keys=["num.io.threads", "num.network.threads"])
    assert {n: (e.value, e.is_default, e.synonyms) for n, e in wire.items()} == {
        "num.io.threads": ("12", False, []), "num.network.threads": ("3", True, [])}


# -- durability -----------------------------------------------------------------------------------
def test_custom_configs_are_kept_like_kafka_keeps_them(broker, cadmin):
    """A name that is no broker config is a custom one (for a plugin): Kafka stores it rather than refusing
    it, and describes it as it describes what it cannot type: read-only, sensitive, value null."""
    custom = {"my.plugin.endpoint": "https://plugin.example/v1", "listener.name.plaintext.my.plugin.mode": "fast"}
    alter_confluent(cadmin, custom)
    described = describe_confluent(cadmin)
    for name in custom:
        entry = described[name]
        assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, name
        assert (entry.value, entry.is_sensitive, entry.is_read_only) == (None, True, True), name
    assert "https://plugin.example/v1" not in broker.log_text()  # sensitive: hidden in the log too
    wire = describe_wire(broker, "0", keys=list(custom))
    assert {n: (e.value, e.config_type) for n, e in wire.items()} == dict.fromkeys(custom, (None, 0))
    alter_wire(broker, "0", dict.fromkeys(custom, ("DELETE", None)))
    assert not set(custom) & set(describe_confluent(cadmin))


def test_dynamic_configs_survive_restart():
    with BrokerProcess() as broker:
        cadmin = AdminClient({"bootstrap.servers": broker.bootstrap})
        alter_confluent(cadmin, {**PER_BROKER, "my.plugin.endpoint": "kept"})
        assert alter_wire(broker, "", {"max.connections": ("SET", "1000"),
                                       "log.cleaner.backoff.ms": ("SET", "30000")}) == (0, None)
        assert broker.terminate() == 0
        broker.start()
        cadmin = AdminClient({"bootstrap.servers": broker.bootstrap})
        described = describe_confluent(cadmin)
        for name, value in PER_BROKER.items():
            assert described[name].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value, name
            assert described[name].value == (None if described[name].is_sensitive else value), name
        assert described["listener.name.plaintext.ssl.keystore.password"].is_sensitive
        assert described["my.plugin.endpoint"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value  # custom, reloaded
        assert described["max.connections"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert {n: e.value for n, e in describe_wire(broker, "").items()} == {
            "max.connections": "1000", "log.cleaner.backoff.ms": "30000"}
        # The reloaded thread count is the base the next change is checked against.
        with pytest.raises(KafkaException) as info:
            alter_confluent(cadmin, {"num.io.threads": "25"})
        assert "double the current value 12" in info.value.args[0].str()
        assert SECRET not in broker.log_text()
