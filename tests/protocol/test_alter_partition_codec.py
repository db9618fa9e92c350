"""AlterPartition (API key 56) at every version Kafka 3.9 accepted (0-3; Kafka 4.0 cut 0-1).

A partition leader sends it to the controller to change an ISR (issue 17). Every request
and response round-trips at every version with a non-default value in every field present
at that version; the byte layouts of version 0 and 3 are checked by hand. No broker handler
serves it, so nothing advertises it.
"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest

from broker.handlers.api_versions import advertised_versions
from protocol.api import APIS
from protocol.messages import alter_partition as ap
from tests.protocol.conftest import build_ours
from tests.protocol.test_zk_inter_broker_codecs import full_message

HANDLERS = Path(__file__).resolve().parents[2] / "broker" / "handlers"
VERSIONS = range(4)


def test_generated_range_is_kafka_3_9s() -> None:
    assert APIS[56].versions == range(4)
    assert APIS[56].module is ap


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("message", ["AlterPartitionRequest", "AlterPartitionResponse"])
def test_every_field_round_trips(message: str, version: int) -> None:
    node = full_message(message, version)
    ours = build_ours(node, ap, message)
    wire = ours.to_bytes(version)
    decoded = type(ours).decode(wire, version)
    assert decoded == ours
    assert decoded.to_bytes(version) == wire
    assert decoded != type(ours)()
    for name, value in node.values.items():
        if not isinstance(value, list):
            assert getattr(decoded, name) == value, name


def test_version_dependent_fields() -> None:
    assert "topic_name" in full_message("AlterPartitionRequest", 1).values["topics"][0].values
    assert "topic_id" in full_message("AlterPartitionRequest", 2).values["topics"][0].values
    v2 = full_message("AlterPartitionRequest", 2).values["topics"][0].values["partitions"][0].values
    v3 = full_message("AlterPartitionRequest", 3).values["topics"][0].values["partitions"][0].values
    assert "new_isr" in v2 and "new_isr_with_epochs" not in v2
    assert "new_isr_with_epochs" in v3 and "new_isr" not in v3
    assert "leader_recovery_state" not in full_message("AlterPartitionResponse", 0).values["topics"][0].values["partitions"][0].values


def test_request_v0_layout() -> None:
    request = ap.AlterPartitionRequest(
        broker_id=2,
        broker_epoch=77,
        topics=[ap.AlterPartitionRequestTopicData(topic_name="t", partitions=[
            ap.AlterPartitionRequestPartitionData(partition_index=1, leader_epoch=5, new_isr=[2, 3], partition_epoch=9),
        ])],
    )
    # Flexible from version 0: compact arrays/strings (length + 1) and an empty tag buffer per struct.
    expected = struct.pack(">iqBB1sBiiBiiiBBB", 2, 77, 2, 2, b"t", 2, 1, 5, 3, 2, 3, 9, 0, 0, 0)
    assert request.to_bytes(0) == expected


def test_request_v3_layout() -> None:
    topic_id = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)
    state = ap.BrokerState(broker_id=3, broker_epoch=12)
    request = ap.AlterPartitionRequest(
        broker_id=2,
        broker_epoch=77,
        topics=[ap.AlterPartitionRequestTopicData(topic_id=topic_id, partitions=[ap.AlterPartitionRequestPartitionData(
            partition_index=1, leader_epoch=5, new_isr_with_epochs=[state], leader_recovery_state=1, partition_epoch=9,
        )])],
    )
    expected = (
        struct.pack(">iqB", 2, 77, 2) + topic_id.bytes
        + struct.pack(">BiiBiqBbiBBB", 2, 1, 5, 2, 3, 12, 0, 1, 9, 0, 0, 0)
    )
    assert request.to_bytes(3) == expected


def test_not_advertised_and_not_served() -> None:
    assert 56 not in advertised_versions()
    assert "alter_partition" not in {path.stem for path in HANDLERS.glob("*.py")}
