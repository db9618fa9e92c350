"""Broker configuration: Kafka's names and defaults, and the file < env < override layering."""

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from broker.config.broker_config import BrokerConfig, Listener, load_broker_config, parse_properties


def test_defaults_are_kafkas() -> None:
    config = load_broker_config(environ={})
    assert config.num_partitions == 1
    assert config.log_segment_bytes == 1073741824
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.group_initial_rebalance_delay_ms == 3000
    assert config.offsets_topic_num_partitions == 50
    assert config.retention_ms == 168 * 3_600_000
    assert config.log_flush_interval_messages == 2**63 - 1
    assert config.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]


def test_file_env_and_overrides_layer_in_kafka_order(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# a comment\nbroker.id=7\nnum.partitions=3\nlog.dirs=/data/a,/data/b\n"
        "log.segment.bytes : 1000\nlog.retention.hours=1\n"
    )
    config = load_broker_config(
        props,
        overrides=["num.partitions=5"],
        environ={"PAFKA_LOG_SEGMENT_BYTES": "2000", "PAFKA_NUM_PARTITIONS": "4", "UNRELATED": "x"},
    )
    assert config.node_id == 7  # broker.id is node.id's synonym
    assert config.log_dirs == ["/data/a", "/data/b"]
    assert config.log_segment_bytes == 2000  # env beats file
    assert config.num_partitions == 5  # override beats env
    assert config.retention_ms == 3_600_000


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    both = load_broker_config(overrides=["log.retention.minutes=2", "log.retention.hours=5"], environ={})
    assert both.retention_ms == 120_000
    ms = load_broker_config(overrides=["log.retention.ms=99", "log.retention.minutes=2"], environ={})
    assert ms.retention_ms == 99


def test_unknown_properties_are_kept_and_warned(caplog: pytest.LogCaptureFixture) -> None:
    config = load_broker_config(overrides=["some.plugin.setting=1"], environ={})
    assert config.unknown_properties == {"some.plugin.setting": "1"}
    assert "isn't a known config" in caplog.text


def test_bad_values_are_rejected() -> None:
    with pytest.raises(ValidationError):
        load_broker_config(overrides=["num.partitions=many"], environ={})
    with pytest.raises(ValidationError):
        load_broker_config(overrides=["listeners=127.0.0.1:9092"], environ={})
    with pytest.raises(ValueError):
        load_broker_config(overrides=["no-equals-sign"], environ={})


def test_advertised_listeners_default_to_listeners() -> None:
    config = load_broker_config(overrides=["listeners=PLAINTEXT://127.0.0.2:19092"], environ={})
    assert [str(listener) for listener in config.effective_advertised_listeners] == ["PLAINTEXT://127.0.0.2:19092"]


def test_properties_parser_handles_separators_and_continuations() -> None:
    text = "a=1\n! bang comment\nb: 2\nc 3\nlong=x,\\\n    y\nempty=\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "long": "x,y", "empty": ""}


def test_property_names_cover_the_model() -> None:
    names = BrokerConfig.property_names()
    assert "log.dirs" in names and "node.id" in names and len(names) == len(set(names))


def test_cluster_settings_have_kafkas_names_and_defaults() -> None:
    config = load_broker_config(environ={})
    assert not config.is_cluster_member and config.zookeeper_connect is None
    assert config.zookeeper_session_timeout_ms == 18000
    assert config.zookeeper_connection_timeout == 18000  # unset: the session timeout
    assert (config.broker_id_generation_enable, config.reserved_broker_max_id) == (True, 1000)
    assert (config.num_replica_fetchers, config.replica_fetch_response_max_bytes) == (1, 10485760)
    assert (config.replica_fetch_backoff_ms, config.replica_socket_timeout_ms) == (1000, 30000)
    assert (config.auto_leader_rebalance_enable, config.leader_imbalance_per_broker_percentage,
            config.leader_imbalance_check_interval_seconds) == (True, 10, 300)
    assert (config.controlled_shutdown_enable, config.controlled_shutdown_max_retries,
            config.controlled_shutdown_retry_backoff_ms) == (True, 3, 5000)
    assert (config.transaction_state_log_replication_factor, config.transaction_state_log_min_isr) == (3, 2)
    assert config.offsets_topic_replication_factor == 3 and config.default_replication_factor == 1
    assert config.security_inter_broker_protocol == "PLAINTEXT" and config.inter_broker_listener == "PLAINTEXT"
    tuned = load_broker_config(overrides=["zookeeper.connect=127.0.0.1:2181/pafka", "broker.id=2",
                                          "zookeeper.connection.timeout.ms=4000", "broker.rack=r1"], environ={})
    assert tuned.is_cluster_member and tuned.node_id == 2 and tuned.rack == "r1"
    assert tuned.zookeeper_connection_timeout == 4000


def test_inter_broker_listener_resolution_and_kafkas_checks() -> None:
    two = ["listeners=CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093",
           "listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:SSL"]
    by_name = load_broker_config(overrides=[*two, "inter.broker.listener.name=replication"], environ={})
    assert by_name.inter_broker_listener == "REPLICATION"
    assert by_name.security_protocol_of("REPLICATION") == "SSL"
    by_protocol = load_broker_config(overrides=[*two, "security.inter.broker.protocol=SSL"], environ={})
    assert by_protocol.inter_broker_listener == "REPLICATION"
    with pytest.raises(ValidationError, match=re.escape("Only one of inter.broker.listener.name and "
                                                        "security.inter.broker.protocol should be set")):
        load_broker_config(overrides=["inter.broker.listener.name=PLAINTEXT",
                                      "security.inter.broker.protocol=PLAINTEXT"], environ={})
    with pytest.raises(ValidationError, match=r"must be one of"):
        load_broker_config(overrides=["security.inter.broker.protocol=TLS"], environ={})
    with pytest.raises(ValidationError, match=re.escape("inter.broker.listener.name must be a listener name "
                                                        "defined in advertised.listeners")):
        load_broker_config(overrides=["zookeeper.connect=127.0.0.1:2181", "inter.broker.listener.name=NOPE"],
                           environ={})
    with pytest.raises(ValidationError, match=re.escape("broker.id must be greater than or equal to -1 and not "
                                                        "greater than reserved.broker.max.id")):
        load_broker_config(overrides=["zookeeper.connect=127.0.0.1:2181", "broker.id=1001"], environ={})
    # The embedded broker keeps accepting any id, as before.
    assert load_broker_config(overrides=["broker.id=5000"], environ={}).node_id == 5000
