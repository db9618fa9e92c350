"""AdminClient's requests and error mapping against a scripted broker.

The admin APIs the real broker does not serve yet (DeleteTopics,
CreatePartitions, configs) are checked here request by request: what the
client puts on the wire at the negotiated version, and how answers map back.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from client import (
    AdminClient,
    InvalidConfigError,
    InvalidPartitionsError,
    KafkaClient,
    UnknownTopicOrPartitionError,
)
from protocol.api import DecodedRequest
from protocol.config_types import AlterConfigOp, ConfigResourceType, ConfigSource
from protocol.errors import ErrorCode
from protocol.messages import create_partitions as cp
from protocol.messages import delete_topics as dt
from protocol.messages import describe_configs as dc
from protocol.messages import incremental_alter_configs as iac
from protocol.messages.metadata import MetadataResponse, MetadataResponseBroker
from protocol.primitives import Message
from tests.tools.fake_broker import FakeBroker, api_versions_response

NODE_ID = 3


def _admin_broker(port_box: list[int], answers: dict[int, Callable[[DecodedRequest], Message]], delete_max: int = 6) -> FakeBroker:
    ranges = {18: (0, 4), 3: (0, 12), 20: (1, delete_max), 37: (0, 3), 32: (1, 4), 44: (0, 1)}

    def handler(request: DecodedRequest) -> Message:
        if request.api_key == 18:
            return api_versions_response(ranges)
        if request.api_key == 3:
            return MetadataResponse(
                brokers=[MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1", port=port_box[0])],
                controller_id=NODE_ID,
            )
        return answers[request.api_key](request)

    return FakeBroker(handler)


def _run(answers: dict[int, Callable[[DecodedRequest], Message]], action, delete_max: int = 6):  # type: ignore[no-untyped-def]
    port_box = [0]
    with _admin_broker(port_box, answers, delete_max) as fake:
        port_box[0] = fake.port
        with KafkaClient(f"127.0.0.1:{fake.port}", timeout=5) as client:
            result = action(AdminClient(client, timeout_ms=1234))
        return result, [r for r in fake.requests if r.api_key not in (18, 3)]


@pytest.mark.parametrize("delete_max", [6, 5])
def test_delete_topics_by_name_at_either_schema(delete_max: int) -> None:
    def answer(request: DecodedRequest) -> Message:
        names = [t.name for t in request.body.topics] if request.api_version >= 6 else request.body.topic_names
        code = {"a": 0, "b": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        return dt.DeleteTopicsResponse(responses=[dt.DeletableTopicResult(name=n, error_code=code[n]) for n in names])

    _, sent = _run({20: answer}, lambda admin: admin.delete_topic("a"), delete_max)
    assert sent[0].api_version == delete_max and sent[0].body.timeout_ms == 1234
    with pytest.raises(UnknownTopicOrPartitionError) as info:
        _run({20: answer}, lambda admin: admin.delete_topics(["a", "b"]), delete_max)
    assert info.value.topic == "b"


def test_create_partitions_request_and_error() -> None:
    def answer(request: DecodedRequest) -> Message:
        return cp.CreatePartitionsResponse(
            results=[
                cp.CreatePartitionsTopicResult(
                    name=t.name,
                    error_code=ErrorCode.INVALID_PARTITIONS if t.count < 3 else 0,
                    error_message="Topic currently has 3 partitions" if t.count < 3 else None,
                )
                for t in request.body.topics
            ]
        )

    _, sent = _run({37: answer}, lambda admin: admin.create_partitions({"t": 5}))
    (topic,) = sent[0].body.topics
    assert (topic.name, topic.count, topic.assignments, sent[0].api_version) == ("t", 5, None, 3)
    with pytest.raises(InvalidPartitionsError, match="currently has 3 partitions"):
        _run({37: answer}, lambda admin: admin.create_partitions({"t": 2}))


def test_describe_configs_maps_sources() -> None:
    def answer(request: DecodedRequest) -> Message:
        (resource,) = request.body.resources
        configs = [
            dc.DescribeConfigsResourceResult(name="retention.ms", value="99", config_source=1),
            dc.DescribeConfigsResourceResult(name="segment.bytes", value="1024", config_source=5),
            dc.DescribeConfigsResourceResult(name="secret", value=None, config_source=4, is_sensitive=True),
        ]
        return dc.DescribeConfigsResponse(
            results=[
                dc.DescribeConfigsResult(
                    resource_type=resource.resource_type, resource_name=resource.resource_name, configs=configs,
                    error_message=None,
                )
            ]
        )

    entries, sent = _run({32: answer}, lambda admin: admin.describe_configs(ConfigResourceType.TOPIC, "t"))
    assert sent[0].body.resources[0].resource_type == 2 and sent[0].body.resources[0].configuration_keys is None
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG and not entries["retention.ms"].is_default
    assert entries["segment.bytes"].is_default
    assert entries["secret"].is_sensitive and entries["secret"].value is None


def test_incremental_alter_configs_operations_and_errors() -> None:
    def answer(request: DecodedRequest) -> Message:
        (resource,) = request.body.resources
        bad = any(c.name == "cleanup.policy" and c.value == "sometimes" for c in resource.configs)
        return iac.IncrementalAlterConfigsResponse(
            responses=[
                iac.AlterConfigsResourceResponse(
                    error_code=ErrorCode.INVALID_CONFIG if bad else 0,
                    error_message="Invalid value sometimes" if bad else None,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            ]
        )

    ops = [("retention.ms", AlterConfigOp.SET, "5"), ("cleanup.policy", AlterConfigOp.DELETE, None)]
    _, sent = _run({44: answer}, lambda admin: admin.incremental_alter_configs(ConfigResourceType.TOPIC, "t", ops))
    (resource,) = sent[0].body.resources
    assert [(c.name, c.config_operation, c.value) for c in resource.configs] == [("retention.ms", 0, "5"), ("cleanup.policy", 1, None)]
    with pytest.raises(InvalidConfigError) as info:
        _run(
            {44: answer},
            lambda admin: admin.incremental_alter_configs(
                ConfigResourceType.TOPIC, "t", [("cleanup.policy", AlterConfigOp.SET, "sometimes")]
            ),
        )
    assert info.value.error_code == ErrorCode.INVALID_CONFIG and info.value.topic == "t"

