"""The ZooKeeper-mode inter-broker APIs Kafka 4 dropped (issue 17): LeaderAndIsr (4),
StopReplica (5), UpdateMetadata (6) and ControlledShutdown (7), at every version
Kafka 3.9 accepted.

Every request and response round-trips at every version with a non-default value
in every field present at that version, tagged fields and nested structs
included; a few byte layouts are checked by hand. No broker handler serves these
APIs, so nothing advertises them.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest

from broker.handlers.api_versions import advertised_versions
from protocol.api import APIS
from protocol.messages import controlled_shutdown, leader_and_isr, stop_replica, update_metadata
from tests.protocol.conftest import Node, build_ours, in_range, load_schemas, snake

SCHEMAS = load_schemas()
KAFKA_3_9_RANGES = {4: range(8), 5: range(5), 6: range(9), 7: range(4)}


class NonDefaultValues:
    """Deterministic values, none equal to a field's default, for one message version."""

    def __init__(self, raw: dict[str, Any], version: int) -> None:
        self.version = version
        self.common = {c["name"]: c["fields"] for c in raw.get("commonStructs", [])}
        self.counter = itertools.count(7)

    def struct(self, name: str, fields: list[dict[str, Any]] | None) -> Node:
        fields = fields if fields is not None else self.common[name]
        values = {
            snake(field["name"]): self.field(field)
            for field in fields
            if in_range(field.get("versions"), self.version)
        }
        return Node(name, values)

    def field(self, field: dict[str, Any]) -> Any:
        typ = field["type"]
        if typ.startswith("[]"):
            return [self.scalar(typ[2:], field) for _ in range(2)]
        return self.scalar(typ, field)

    def scalar(self, typ: str, field: dict[str, Any]) -> Any:
        n = next(self.counter)
        if typ == "bool":
            return field.get("default") != "true"
        if typ in ("int8", "int16", "int32", "int64"):
            return n  # every default in these schemas is 0 or -1
        if typ == "string":
            return f"s{n}-é"
        if typ == "uuid":
            return UUID(int=n << 64 | n)
        return self.struct(typ, field.get("fields"))


def full_message(name: str, version: int) -> Node:
    raw = SCHEMAS[name]
    return NonDefaultValues(raw, version).struct(name, raw["fields"])


def pairs() -> Iterator[tuple[int, str, int]]:
    for api_key, versions in KAFKA_3_9_RANGES.items():
        spec = APIS[api_key]
        for cls in (spec.request, spec.response):
            for version in versions:
                yield api_key, cls.__name__, version


def fields_at(node: Node) -> Iterator[tuple[str, Any]]:
    for name, value in node.values.items():
        yield name, value
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, Node):
                yield from fields_at(item)


@pytest.mark.parametrize("api_key", sorted(KAFKA_3_9_RANGES))
def test_generated_ranges_are_kafka_3_9s(api_key: int) -> None:
    assert APIS[api_key].versions == KAFKA_3_9_RANGES[api_key]


@pytest.mark.parametrize(("api_key", "message", "version"), list(pairs()))
def test_every_field_round_trips(api_key: int, message: str, version: int) -> None:
    node = full_message(message, version)
    ours = build_ours(node, APIS[api_key].module, message)
    wire = ours.to_bytes(version)
    decoded = type(ours).decode(wire, version)
    assert decoded == ours
    assert decoded.to_bytes(version) == wire
    # The values survive, not just equality of two defaulted objects.
    assert decoded != type(ours)()
    for name, value in node.values.items():
        if not isinstance(value, (list, Node)):
            assert getattr(decoded, name) == value, name


def test_tagged_update_metadata_type_is_on_the_wire_at_v8_only() -> None:
    node = full_message("UpdateMetadataRequest", 8)
    assert "type" in node.values
    request = build_ours(node, update_metadata, "UpdateMetadataRequest")
    with_type = request.to_bytes(8)
    request.type = 0
    assert len(request.to_bytes(8)) == len(with_type) - 3  # tag, size, int8
    assert "type" not in full_message("UpdateMetadataRequest", 7).values


def test_controlled_shutdown_request_layout() -> None:
    request = controlled_shutdown.ControlledShutdownRequest(broker_id=3, broker_epoch=42)
    assert request.to_bytes(0) == struct.pack(">i", 3)
    assert request.to_bytes(1) == struct.pack(">i", 3)
    assert request.to_bytes(2) == struct.pack(">iq", 3, 42)
    assert request.to_bytes(3) == struct.pack(">iqB", 3, 42, 0)  # empty tagged fields


def test_controlled_shutdown_response_v0_layout() -> None:
    response = controlled_shutdown.ControlledShutdownResponse(
        error_code=8,
        remaining_partitions=[controlled_shutdown.RemainingPartition(topic_name="t", partition_index=2)],
    )
    assert response.to_bytes(0) == struct.pack(">hihsi", 8, 1, 1, b"t", 2)
    assert response.to_bytes(3) == struct.pack(">hBBsiBB", 8, 2, 2, b"t", 2, 0, 0)


def test_stop_replica_v0_layout() -> None:
    request = stop_replica.StopReplicaRequest(
        controller_id=1,
        controller_epoch=2,
        delete_partitions=True,
        ungrouped_partitions=[stop_replica.StopReplicaPartitionV0(topic_name="ab", partition_index=5)],
    )
    assert request.to_bytes(0) == struct.pack(">ii?ih2si", 1, 2, True, 1, 2, b"ab", 5)


def test_leader_and_isr_v0_layout() -> None:
    state = leader_and_isr.LeaderAndIsrPartitionState(
        topic_name="t", partition_index=0, controller_epoch=1, leader=2, leader_epoch=3,
        isr=[2], partition_epoch=4, replicas=[2, 5],
    )
    leader = leader_and_isr.LeaderAndIsrLiveLeader(broker_id=2, host_name="h", port=9092)
    request = leader_and_isr.LeaderAndIsrRequest(
        controller_id=9, controller_epoch=1, ungrouped_partition_states=[state], live_leaders=[leader],
    )
    expected = (
        struct.pack(">iii", 9, 1, 1)
        + struct.pack(">h1siiiiiiiiiii", 1, b"t", 0, 1, 2, 3, 1, 2, 4, 2, 2, 5, 1)
        + struct.pack(">ih1si", 2, 1, b"h", 9092)
    )
    assert request.to_bytes(0) == expected


def test_update_metadata_v0_broker_layout() -> None:
    broker = update_metadata.UpdateMetadataBroker(id=4, v0_host="h", v0_port=9092)
    request = update_metadata.UpdateMetadataRequest(controller_id=1, controller_epoch=2, live_brokers=[broker])
    assert request.to_bytes(0) == struct.pack(">iiiiih1si", 1, 2, 0, 1, 4, 1, b"h", 9092)


def test_only_a_cluster_member_serves_the_zookeeper_apis() -> None:
    alone = {key for key, _, _ in advertised_versions()}
    in_cluster = {key: (low, high) for key, low, high in advertised_versions(cluster=True)}
    for api_key, versions in KAFKA_3_9_RANGES.items():
        assert api_key not in alone
        # Every Kafka 3.9 version, each sent on the wire by tests/cluster/test_cluster_handlers.py.
        assert in_cluster[api_key] == (versions.start, versions.stop - 1)
