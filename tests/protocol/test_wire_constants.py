"""protocol's named wire values are Kafka's, member for member.

Checked twice: against the values of Kafka's own Java enums and constants
(ConfigResource.Type, DescribeConfigsResponse.ConfigSource / ConfigType,
AlterConfigOp.OpType, IsolationLevel, ListOffsetsRequest's timestamps,
FindCoordinatorRequest.CoordinatorType), and against two independent client
implementations (kafka-python and librdkafka through confluent-kafka), so a
typo in either table shows up.
"""

from __future__ import annotations

import enum

import confluent_kafka
import confluent_kafka.admin as confluent_admin
import kafka.admin as kafka_python_admin
import pytest
from kafka.protocol.consumer.offsets import IsolationLevel as KafkaPythonIsolationLevel
from kafka.protocol.consumer.offsets import OffsetSpec as KafkaPythonOffsetSpec
from kafka.protocol.metadata.find_coordinator import CoordinatorType as KafkaPythonCoordinatorType

from protocol import request_constants
from protocol.config_types import AlterConfigOp, ConfigResourceType, ConfigSource, ConfigType
from protocol.request_constants import CoordinatorType

KAFKA_VALUES: dict[type[enum.IntEnum], dict[str, int]] = {
    ConfigResourceType: {
        "UNKNOWN": 0, "TOPIC": 2, "BROKER": 4, "BROKER_LOGGER": 8, "CLIENT_METRICS": 16, "GROUP": 32,
    },
    ConfigSource: {
        "UNKNOWN": 0, "DYNAMIC_TOPIC_CONFIG": 1, "DYNAMIC_BROKER_CONFIG": 2, "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
        "STATIC_BROKER_CONFIG": 4, "DEFAULT_CONFIG": 5, "DYNAMIC_BROKER_LOGGER_CONFIG": 6,
        "CLIENT_METRICS_CONFIG": 7, "GROUP_CONFIG": 8,
    },
    ConfigType: {
        "UNKNOWN": 0, "BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7,
        "CLASS": 8, "PASSWORD": 9,
    },
    AlterConfigOp: {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3},
    CoordinatorType: {"GROUP": 0, "TRANSACTION": 1, "SHARE": 2},
}

KAFKA_REQUEST_CONSTANTS = {
    "READ_UNCOMMITTED": 0, "READ_COMMITTED": 1,
    "LATEST_TIMESTAMP": -1, "EARLIEST_TIMESTAMP": -2, "MAX_TIMESTAMP": -3, "EARLIEST_LOCAL_TIMESTAMP": -4,
    "LATEST_TIERED_TIMESTAMP": -5, "EARLIEST_PENDING_UPLOAD_TIMESTAMP": -6,
    # Kafka's FetchMetadata: INVALID_SESSION_ID, INITIAL_EPOCH, FINAL_EPOCH; nextEpoch wraps after Integer.MAX_VALUE.
    "INVALID_SESSION_ID": 0, "INITIAL_EPOCH": 0, "FINAL_EPOCH": -1, "MAX_SESSION_EPOCH": 2**31 - 1,
}


@pytest.mark.parametrize("ours", list(KAFKA_VALUES), ids=lambda e: e.__name__)
def test_members_and_values_are_kafkas(ours: type[enum.IntEnum]) -> None:
    assert {m.name: m.value for m in ours} == KAFKA_VALUES[ours]


# kafka-python names two ConfigSource members with a DYNAMIC_ prefix Kafka's Java enum does not have.
_KAFKA_PYTHON_NAMES = {"DYNAMIC_CLIENT_METRICS_CONFIG": "CLIENT_METRICS_CONFIG", "DYNAMIC_GROUP_CONFIG": "GROUP_CONFIG"}


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (ConfigResourceType, kafka_python_admin.ConfigResourceType),
        (ConfigSource, kafka_python_admin.ConfigSourceType),
        (ConfigType, kafka_python_admin.ConfigType),
        (AlterConfigOp, kafka_python_admin.AlterConfigOp),
        (CoordinatorType, KafkaPythonCoordinatorType),
    ],
    ids=lambda e: e.__name__,
)
def test_same_as_kafka_python(ours: type[enum.IntEnum], theirs: type[enum.IntEnum]) -> None:
    assert {m.name: m.value for m in ours} == {_KAFKA_PYTHON_NAMES.get(m.name, m.name): m.value for m in theirs}


def test_librdkafka_agrees_where_it_has_the_member() -> None:
    # librdkafka's ResourceType is its own numbering (GROUP 3, ANY 1), not the wire's: not compared.
    sources = {m.name.removesuffix("_CONFIG") if m.name == "UNKNOWN_CONFIG" else m.name: m.value
               for m in confluent_admin.ConfigSource}
    assert sources and all(ConfigSource[name].value == value for name, value in sources.items())
    assert {m.name: m.value for m in confluent_admin.AlterConfigOpType} == {m.name: m.value for m in AlterConfigOp}


def test_request_constants_are_kafkas() -> None:
    ours = {name: getattr(request_constants, name) for name in request_constants.__all__ if name.isupper()}
    assert ours == KAFKA_REQUEST_CONSTANTS


def test_request_constants_agree_with_kafka_python_and_librdkafka() -> None:
    for level in KafkaPythonIsolationLevel:
        assert getattr(request_constants, level.name) == level.value
    for level in confluent_kafka.IsolationLevel:
        assert getattr(request_constants, level.name) == level.value
    # kafka-python's OffsetSpec stops at -5 (it has no EARLIEST_PENDING_UPLOAD yet).
    for spec in KafkaPythonOffsetSpec:
        assert getattr(request_constants, f"{spec.name.removesuffix('_TIMESTAMP')}_TIMESTAMP") == spec.value
