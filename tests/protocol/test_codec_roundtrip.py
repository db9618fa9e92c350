"""Every (API, version, direction): random valid messages round-trip unchanged and
encode to the same bytes as kio, an independent implementation of the format.

Strategies come from the JSON schemas (see conftest), not from the generated
code. One hypothesis example draws one message for every version of both the
request and the response of an API, so each example covers all pairs.

kio 0.6.5 has every (API, version) pair of Kafka 4's schemas. The versions
Kafka 4 removed and pafka still serves (Kafka 3.9's, ``protocol.codegen.kafka_3_9``)
are not in kio; ``KIO_MISSING`` lists exactly those, and
``test_kafka_3_9_versions`` compares them with kafka-python's hand-written structs.
Where kio's types are narrower than the wire format (it decodes
millisecond fields to datetime/timedelta and error codes to an enum of known
codes), the kio comparison draws int64 values from +-2**40 and error codes from
the known ones; the round-trip test uses the full ranges.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional
from kio.static.constants import EntityType

from protocol.api import APIS
from protocol.buffers import join_chunks
from protocol.codegen.kafka_3_9 import KAFKA_3_9_API_VERSIONS
from tests.protocol.conftest import Node, build_ours, load_schemas, message_strategy

SCHEMAS = load_schemas()
API_KEYS = sorted(APIS)

def _below_kafka_4(raw: dict[str, Any]) -> range:
    return range(APIS[raw["apiKey"]].versions.start, int(raw["validVersions"].partition("-")[0]))


# (message name, version) pairs kio does not implement, with the reason.
KIO_MISSING: dict[tuple[str, int], str] = {
    (name, version): "removed in Kafka 4 (KIP-896); see test_kafka_3_9_versions"
    for name, raw in SCHEMAS.items()
    if raw.get("apiKey") in KAFKA_3_9_API_VERSIONS and raw["type"] in ("request", "response")
    for version in _below_kafka_4(raw)
}
# Kafka 4 dropped the ZooKeeper-mode inter-broker APIs whole (issue 17 needs
# them); tests/protocol/test_zk_inter_broker_codecs.py checks them instead.
ZK_INTER_BROKER_API_KEYS = (4, 5, 6, 7)
KIO_MISSING.update({
    (raw["name"], version): "ZooKeeper-mode inter-broker API, not in Kafka 4"
    for raw in SCHEMAS.values()
    if raw.get("apiKey") in ZK_INTER_BROKER_API_KEYS and raw["type"] in ("request", "response")
    for version in APIS[raw["apiKey"]].versions
})
# AlterPartition's v0-1 (before topic ids and leader recovery state) went with ZooKeeper mode:
# Kafka 4's schema starts at v2; tests/protocol/test_alter_partition_codec.py checks them.
KIO_MISSING.update({
    (f"AlterPartition{kind}", version): "AlterPartition v0-1: Kafka 3.9's ZooKeeper-mode versions"
    for kind in ("Request", "Response") for version in (0, 1)
})

UUID_ZERO = UUID(int=0)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@functools.cache
def strategy(message: str, version: int, kio_ranges: bool) -> st.SearchStrategy[Node]:
    return message_strategy(SCHEMAS[message], version, kio_ranges)


def kio_class(message: str, version: int) -> type | None:
    raw = SCHEMAS[message]
    try:
        path = schema_name_map[api_key_map[raw["apiKey"]]][version][EntityType[raw["type"]]]
    except KeyError:
        return None
    module, _, name = path.partition(":")
    return getattr(__import__(module, fromlist=[name]), name)


def to_kio(node: Node, cls: type) -> Any:
    """kio's entity for ``node``: same values, kio's types."""
    kwargs = {}
    for field in dataclasses.fields(cls):
        # kio drops the "_ms" suffix of the fields it turns into time types.
        for name in (field.name, field.name + "_ms"):
            if name in node.values:
                kwargs[field.name] = _kio_value(node.values[name], field)
                break
    return cls(**kwargs)


def _kio_value(value: Any, field: dataclasses.Field) -> Any:
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField):
        if value is None:
            return None
        return tuple(to_kio(item, kind.type_) for item in value)
    if isinstance(kind, EntityField):
        return None if value is None else to_kio(value, kind.type_)
    if kind.is_array:
        return None if value is None else tuple(_kio_scalar(v, field, False) for v in value)
    return _kio_scalar(value, field, is_optional(field))


def _kio_scalar(value: Any, field: dataclasses.Field, optional: bool) -> Any:
    kafka_type = field.metadata.get("kafka_type")
    if value is None:
        return None
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64":
        return None if optional and value == -1 else EPOCH + datetime.timedelta(milliseconds=value)
    if kafka_type == "uuid" and value == UUID_ZERO:
        # kio models "no UUID" as None (written as 16 zero bytes) and uses None
        # as the default of tagged uuid fields; Kafka's default is the zero
        # UUID, so a tagged zero UUID is left out by both once mapped to None.
        return None
    if kafka_type == "error_code":
        return KioErrorCode(value)
    return value


def kio_bytes(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def _messages(api_key: int) -> list[tuple[type, int]]:
    spec = APIS[api_key]
    return [(cls, version) for cls in (spec.request, spec.response) for version in spec.versions]


def test_kio_has_every_pair_but_the_listed_ones() -> None:
    missing = {
        (cls.__name__, version)
        for key in API_KEYS
        for cls, version in _messages(key)
        if kio_class(cls.__name__, version) is None
    }
    assert missing == set(KIO_MISSING)


@pytest.mark.parametrize("api_key", API_KEYS, ids=lambda k: APIS[k].name)
@settings(settings.get_profile("protocol"), max_examples=8)
@given(data=st.data())
def test_bytes_equal_kio_and_round_trip(api_key: int, data: st.DataObject) -> None:
    spec = APIS[api_key]
    for cls, version in _messages(api_key):
        if (cls.__name__, version) in KIO_MISSING:
            continue
        node = data.draw(strategy(cls.__name__, version, True), label=f"{cls.__name__} v{version}")
        ours = build_ours(node, spec.module, cls.__name__)
        wire = ours.to_bytes(version)
        theirs = kio_bytes(to_kio(node, kio_class(cls.__name__, version)))
        assert wire == theirs, f"{cls.__name__} v{version}"
        assert cls.decode(theirs, version) == ours, f"{cls.__name__} v{version}"


@pytest.mark.parametrize("api_key", API_KEYS, ids=lambda k: APIS[k].name)
@settings(settings.get_profile("protocol"), max_examples=4)
@given(data=st.data())
def test_round_trip_full_value_ranges(api_key: int, data: st.DataObject) -> None:
    spec = APIS[api_key]
    for cls, version in _messages(api_key):
        node = data.draw(strategy(cls.__name__, version, False), label=f"{cls.__name__} v{version}")
        ours = build_ours(node, spec.module, cls.__name__)
        wire = join_chunks(ours.encode(version))
        decoded = cls.decode(wire, version)
        assert decoded == ours, f"{cls.__name__} v{version}"
        assert decoded.to_bytes(version) == wire


HEADER_PAIRS = [("RequestHeader", 1), ("RequestHeader", 2), ("ResponseHeader", 0), ("ResponseHeader", 1)]
# Request header v0 (Kafka 4 dropped it; we still generate it) has no kio counterpart.
KIO_MISSING_HEADERS = {("RequestHeader", 0): "removed in Kafka 4.0; kio 0.6.5 has v1-v2 only"}


@pytest.mark.parametrize(("name", "version"), HEADER_PAIRS)
@settings(settings.get_profile("protocol"), max_examples=25)
@given(data=st.data())
def test_headers_equal_kio(name: str, version: int, data: st.DataObject) -> None:
    from protocol.messages import request_header, response_header

    module = request_header if name == "RequestHeader" else response_header
    node = data.draw(strategy(name, version, True))
    ours = build_ours(node, module, name)
    kio_module = __import__(f"kio.schema.{'request' if name == 'RequestHeader' else 'response'}_header.v{version}.header", fromlist=[name])
    theirs = kio_bytes(to_kio(node, getattr(kio_module, name)))
    assert ours.to_bytes(version) == theirs
    assert type(ours).decode(theirs, version) == ours


def test_request_header_v0_is_the_only_header_kio_lacks() -> None:
    from protocol.messages.request_header import RequestHeader

    assert set(RequestHeader.VALID_VERSIONS) == {0, 1, 2}
    assert {("RequestHeader", v) for v in RequestHeader.VALID_VERSIONS} - set(HEADER_PAIRS) == set(KIO_MISSING_HEADERS)
