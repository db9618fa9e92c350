"""The versions Kafka 4 removed (KIP-896) and pafka still serves encode exactly as
Kafka 3.9 clients write them.

kio 0.6.5 is generated from Kafka 4's schemas, so it has none of these versions.
kafka-python 3.0.12 keeps hand-written structs for the old versions
(``kafka.protocol.old``), written from Kafka's protocol guide rather than from
the JSON schemas: an independent encoder to compare our generated codecs with,
byte for byte, for every (API, version, direction) below Kafka 4's floor.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from typing import Any

import kafka.protocol.old as kafka_python_old
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.old.api import Request, Response
from kafka.protocol.old.types import Array, Int16, Int32, Schema, String

from protocol.api import APIS
from protocol.codegen.kafka_3_9 import KAFKA_3_9_API_VERSIONS, KEPT_AT_KAFKA_4_FLOOR
from tests.protocol.conftest import Node, build_ours, in_range, load_schemas, message_strategy, snake

SCHEMAS = load_schemas()


@functools.cache
def kafka_python_structs() -> dict[tuple[int, str, int], type]:
    """(api key, "Request"/"Response", version) -> kafka-python's hand-written struct."""
    found: dict[tuple[int, str, int], type] = {}
    for info in pkgutil.iter_modules(kafka_python_old.__path__):
        module = importlib.import_module(f"kafka.protocol.old.{info.name}")
        for obj in vars(module).values():
            if not (inspect.isclass(obj) and issubclass(obj, (Request, Response))):
                continue
            key, version = getattr(obj, "API_KEY", None), getattr(obj, "API_VERSION", None)
            if isinstance(key, int) and isinstance(version, int):
                found[(key, "Request" if issubclass(obj, Request) else "Response", version)] = obj
    found[(35, "Request", 0)] = DescribeLogDirsRequestV0
    found[(34, "Request", 0)] = AlterReplicaLogDirsRequestV0
    found[(34, "Response", 0)] = AlterReplicaLogDirsResponseV0
    return found


class DescribeLogDirsRequestV0(Request):
    """kafka-python's struct has ``partitions`` as one int32; Kafka's protocol guide
    (and every later version) has an array of them: ``topics => topic [partitions]``."""

    API_KEY = 35
    API_VERSION = 0
    RESPONSE_TYPE = None
    SCHEMA = Schema(("topics", Array(("topic", String("utf-8")), ("partitions", Array(Int32)))))


class AlterReplicaLogDirsResponseV0(Response):
    """Not in kafka-python's old structs; written here from Kafka's protocol guide:
    ``throttle_time_ms [results => topic_name [partitions => partition_index error_code]]``."""

    API_KEY = 34
    API_VERSION = 0
    SCHEMA = Schema(("throttle_time_ms", Int32), ("results", Array(
        ("topic_name", String("utf-8")), ("partitions", Array(("partition_index", Int32), ("error_code", Int16))))))


class AlterReplicaLogDirsRequestV0(Request):
    """From Kafka's protocol guide: ``dirs => path [topics => name [partitions]]``."""

    API_KEY = 34
    API_VERSION = 0
    RESPONSE_TYPE = AlterReplicaLogDirsResponseV0
    SCHEMA = Schema(("dirs", Array(("path", String("utf-8")), ("topics", Array(
        ("name", String("utf-8")), ("partitions", Array(Int32)))))))


def removed_versions() -> list[tuple[int, int]]:
    """(api key, version) of every version below Kafka 4's floor that we generate."""
    out = []
    for key in sorted(KAFKA_3_9_API_VERSIONS):
        floor_4x = int(SCHEMAS[APIS[key].request.__name__]["validVersions"].partition("-")[0])
        out += [(key, version) for version in APIS[key].versions if version < floor_4x]
    return out


CASES = removed_versions()


def positional(node: Node, raw: dict[str, Any], version: int) -> list[Any]:
    """A strategy node as kafka-python's structs take it: values in the schema's field order."""
    common = {c["name"]: c["fields"] for c in raw.get("commonStructs", [])}

    def walk(node: Node, fields: list[dict[str, Any]]) -> list[Any]:
        out = []
        for field in fields:
            if not in_range(field.get("versions"), version):
                continue
            value = node.values[snake(field["name"])]
            nested = field.get("fields") or common.get(field["type"].removeprefix("[]"))
            if nested is not None and isinstance(value, list):
                value = [walk(item, nested) for item in value]
            elif nested is not None and isinstance(value, Node):
                value = walk(value, nested)
            out.append(value)
        return out

    return walk(node, raw["fields"])


def test_every_api_kafka_3_9_started_lower_is_served_from_its_3_9_floor() -> None:
    for key, (low, high) in KAFKA_3_9_API_VERSIONS.items():
        if key not in KEPT_AT_KAFKA_4_FLOOR:
            assert APIS[key].versions.start == low, APIS[key].name
        assert APIS[key].versions.stop - 1 >= high, APIS[key].name  # 4.x only ever added versions
    assert CASES, "no removed version generated"


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=lambda v: str(v))
@settings(settings.get_profile("protocol"), max_examples=12)
@given(data=st.data())
def test_bytes_equal_kafka_python_old_structs(api_key: int, version: int, data: st.DataObject) -> None:
    spec = APIS[api_key]
    for cls, kind in ((spec.request, "Request"), (spec.response, "Response")):
        theirs_cls = kafka_python_structs()[(api_key, kind, version)]
        node = data.draw(message_strategy(SCHEMAS[cls.__name__], version), label=f"{cls.__name__} v{version}")
        ours = build_ours(node, spec.module, cls.__name__)
        wire = ours.to_bytes(version)
        theirs = theirs_cls(*positional(node, SCHEMAS[cls.__name__], version)).encode()
        assert wire == theirs, f"{cls.__name__} v{version}"
        assert cls.decode(theirs, version) == ours, f"{cls.__name__} v{version}"
