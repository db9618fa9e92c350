"""ApiVersions' feature flags (KIP-584) as Kafka 4 reports them, and DescribeFeatures read from them.

Kafka's Admin.describeFeatures is an ApiVersions request; pafka's AdminClient
(and ``pafka features describe``) and kafka-python's
KafkaAdminClient.describe_features read the same fields.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from kafka.admin import KafkaAdminClient

from broker.features import finalized_features, report_features
from client.admin import AdminClient
from client.client import KafkaClient
from client.features import FeatureMetadata
from protocol.api import decode_response, encode_response
from protocol.buffers import join_chunks
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey
from pytest_pafka import BrokerProcess
from pytest_pafka.plugin import BrokerFactory
from testing.sockets import send_request
from tools.cli import main
from tools.features_command import describe_lines

CLASSIC = ("classic",)
BOTH = ("classic", "consumer")
ALL = ("classic", "consumer", "share")
GROUP_VERSION_0_1 = SupportedFeatureKey(name="group.version", min_version=0, max_version=1)
GROUP_VERSION_AT_1 = FinalizedFeatureKey(name="group.version", min_version_level=1, max_version_level=1)
SHARE_VERSION_0_1 = SupportedFeatureKey(name="share.version", min_version=0, max_version=1)
SHARE_VERSION_AT_1 = FinalizedFeatureKey(name="share.version", min_version_level=1, max_version_level=1)
SUPPORTED = {"group.version": (0, 1), "share.version": (0, 1)}


def _reported(api_version: int, protocols: tuple[str, ...]) -> ApiVersionsResponse:
    """An answer with the features filled in, sent through the codecs at ``api_version``."""
    response = ApiVersionsResponse()
    report_features(response, api_version, protocols)
    frame = join_chunks(encode_response(18, api_version, 7, response))
    _, decoded = decode_response(18, api_version, memoryview(frame)[4:])
    assert isinstance(decoded, ApiVersionsResponse)
    return decoded


def test_each_version_is_finalized_at_1_exactly_when_its_protocol_is_on() -> None:
    assert finalized_features(CLASSIC).levels == {"group.version": 0, "share.version": 0}
    assert finalized_features(BOTH).levels == {"group.version": 1, "share.version": 0}
    assert finalized_features(ALL).levels == {"group.version": 1, "share.version": 1}
    # The epoch: the sum of the levels, equal on brokers configured alike, higher once a feature is turned on.
    assert [finalized_features(p).epoch for p in (CLASSIC, BOTH, ALL)] == [0, 1, 2]


def test_v4_reports_the_versions_supported_and_finalized() -> None:
    supported = [GROUP_VERSION_0_1, SHARE_VERSION_0_1]
    on = _reported(4, ALL)
    assert (on.supported_features, on.finalized_features, on.finalized_features_epoch) == (
        supported, [GROUP_VERSION_AT_1, SHARE_VERSION_AT_1], 2)
    # Level 0 is not reported as finalized (Kafka's createFinalizedFeatureKeys); the epoch still says it is known.
    consumer = _reported(4, BOTH)
    assert (consumer.supported_features, consumer.finalized_features, consumer.finalized_features_epoch) == (
        supported, [GROUP_VERSION_AT_1], 1)
    off = _reported(4, CLASSIC)
    assert (off.supported_features, off.finalized_features, off.finalized_features_epoch) == (supported, [], 0)


def test_v3_leaves_out_features_whose_lowest_level_is_0() -> None:
    """KAFKA-17492: clients reading v3 fail on a supported range starting at 0, so Kafka omits it there."""
    on = _reported(3, BOTH)
    assert (on.supported_features, on.finalized_features, on.finalized_features_epoch) == (
        [], [GROUP_VERSION_AT_1], 1)


@pytest.mark.parametrize("api_version", [0, 1, 2])
def test_versions_before_3_carry_no_features(api_version: int) -> None:
    before = _reported(api_version, BOTH)
    assert (before.supported_features, before.finalized_features, before.finalized_features_epoch) == ([], [], -1)


@pytest.fixture(scope="module")
def brokers(pafka_module_broker_factory: BrokerFactory) -> dict[str, BrokerProcess]:
    return {"classic": pafka_module_broker_factory("group.coordinator.rebalance.protocols=classic"),
           "consumer": pafka_module_broker_factory("group.coordinator.rebalance.protocols=classic,consumer"),
           "default": pafka_module_broker_factory()}


@pytest.mark.process
@pytest.mark.parametrize(("setting", "finalized", "epoch"), [
    ("classic", {}, 0), ("consumer", {"group.version": (1, 1)}, 1),
    ("default", {"group.version": (1, 1), "share.version": (1, 1)}, 2)])
def test_pafka_admin_describes_the_features(brokers: dict[str, BrokerProcess], setting: str,
                                            finalized: dict[str, tuple[int, int]], epoch: int) -> None:
    with KafkaClient(brokers[setting].bootstrap) as client:
        described = AdminClient(client).describe_features()
    assert described == FeatureMetadata(finalized, epoch, SUPPORTED)


@pytest.mark.process
def test_kafka_python_describes_the_features(brokers: dict[str, BrokerProcess]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=brokers["default"].bootstrap, request_timeout_ms=10_000)
    try:
        described = admin.describe_features()
    finally:
        admin.close()
    assert described == {name: {"supported": (0, 1), "finalized": (1, 1), "finalized_epoch": 2}
                         for name in ("group.version", "share.version")}


@pytest.mark.process
@pytest.mark.parametrize("api_version", [3, 4])
def test_the_broker_answers_each_version_as_kafka(brokers: dict[str, BrokerProcess], api_version: int) -> None:
    response = send_request(brokers["default"], 18, api_version,
                            ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert response.finalized_features == [GROUP_VERSION_AT_1, SHARE_VERSION_AT_1]
    assert response.supported_features == ([GROUP_VERSION_0_1, SHARE_VERSION_0_1] if api_version >= 4 else [])
    assert {68, 69, 76, 77, 78, 79} <= {k.api_key for k in response.api_keys}
    assert 57 not in {k.api_key for k in response.api_keys}  # UpdateFeatures: levels follow the configuration


@pytest.mark.process
def test_pafka_features_describe_prints_kafka_features_lines(brokers: dict[str, BrokerProcess]) -> None:
    for setting, group_level, share_level, epoch in (("default", 1, 1, 2), ("consumer", 1, 0, 1), ("classic", 0, 0, 0)):
        result = CliRunner().invoke(main, ["features", "--bootstrap-server", brokers[setting].bootstrap, "describe"])
        assert (result.exit_code, result.output) == (0, "".join(
            f"Feature: {name}\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
            f"FinalizedVersionLevel: {level}\tEpoch: {epoch}\n"
            for name, level in (("group.version", group_level), ("share.version", share_level)))), result.output


def test_an_unknown_epoch_prints_as_a_dash() -> None:
    unknown = FeatureMetadata({}, None, {"group.version": (0, 1)})
    assert describe_lines(unknown) == [
        "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: -"]
