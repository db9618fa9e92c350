"""Shared test helpers for the protocol codecs.

The hypothesis strategies here are derived from Kafka's JSON schemas, read
independently of ``protocol.codegen`` (own comment stripping, own version
parsing), so a misreading of the schemas by the generator cannot hide itself
in the tests. A strategy yields a ``Node`` tree (schema struct name plus field
values by snake_case name); helpers turn it into generated objects or into
kio's entities.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import string
from pathlib import Path
from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

settings.register_profile(
    "protocol",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

OWN_SCHEMA_DIR = Path(__file__).resolve().parents[2] / "protocol" / "schemas"


def _kafka_python_dir() -> Path:
    # find_spec on the top-level package does not import kafka-python.
    spec = importlib.util.find_spec("kafka")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "protocol" / "schemas" / "resources"


def _load(path: Path) -> dict[str, Any]:
    text = re.sub(r"//[^\n]*", "", path.read_text(encoding="utf-8"))
    return json.loads(text)


def load_schemas() -> dict[str, dict[str, Any]]:
    """Every message schema JSON by message name (``ProduceRequest``)."""
    out = {}
    for directory in (_kafka_python_dir(), OWN_SCHEMA_DIR):
        for path in directory.glob("*.json"):
            raw = _load(path)
            out[raw["name"]] = raw
    return out


def in_range(spec: str | None, version: int) -> bool:
    """Whether ``version`` is in a Kafka version range string."""
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    low, _, high = spec.partition("-")
    return int(low) <= version <= int(high or low)


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z][a-z])", r"_\1\2", name).lower()


def valid_versions(raw: dict[str, Any]) -> range:
    spec = raw["validVersions"]
    low, _, high = spec.partition("-")
    return range(int(low), int(high or low) + 1)


@dataclasses.dataclass
class Node:
    """One struct value: its schema struct name and field values by attribute name."""

    struct: str
    values: dict[str, Any]


INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
# kio maps millisecond fields to datetime/timedelta, and error codes to an
# enum of known codes; the kio comparison uses these narrower value ranges.
KIO_INT64 = (-(2**40), 2**40)
KNOWN_ERROR_CODES: list[int] = []

_TEXT = st.text(alphabet=string.ascii_letters + "é€-_.", max_size=8)


class StrategyBuilder:
    """Hypothesis strategies for messages of one schema, at one version."""

    def __init__(self, raw: dict[str, Any], version: int, kio_ranges: bool) -> None:
        self.version = version
        self.flexible = in_range(raw["flexibleVersions"], version)
        self.kio_ranges = kio_ranges
        self.common = {c["name"]: c["fields"] for c in raw.get("commonStructs", [])}
        self.defined: dict[str, list[dict[str, Any]]] = {}

    def struct(self, name: str, fields: list[dict[str, Any]] | None, depth: int = 0) -> st.SearchStrategy[Node]:
        if fields is None:
            fields = self.defined.get(name) or self.common[name]
        self.defined.setdefault(name, fields)
        parts = {}
        for field in fields:
            if not in_range(field.get("versions"), self.version):
                continue
            value = self.field(field, depth)
            if self.flexible and in_range(field.get("taggedVersions"), self.version):
                value = st.one_of(st.just(_DEFAULT), value)  # tagged fields often stay default
            parts[snake(field["name"])] = value
        return st.fixed_dictionaries(parts).map(lambda values: Node(name, _drop_defaults(values)))

    def field(self, field: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
        typ = field["type"]
        nullable = in_range(field.get("nullableVersions"), self.version)
        if typ.startswith("[]"):
            elem = typ[2:]
            inner = self.scalar(elem, field, depth + 1, nullable=False)
            value: st.SearchStrategy[Any] = st.lists(inner, max_size=3 if depth < 2 else 1)
        else:
            value = self.scalar(typ, field, depth, nullable)
        if nullable:
            value = st.one_of(st.none(), value)
        return value

    def scalar(self, typ: str, field: dict[str, Any], depth: int, nullable: bool) -> st.SearchStrategy[Any]:
        if typ in INT_RANGES:
            low, high = INT_RANGES[typ]
            if self.kio_ranges and typ == "int64":
                low, high = KIO_INT64
            if self.kio_ranges and field["name"].endswith("ErrorCode") and typ == "int16":
                return st.sampled_from(KNOWN_ERROR_CODES)
            return st.integers(low, high)
        if typ == "bool":
            return st.booleans()
        if typ == "float64":
            return st.floats(allow_nan=False, allow_infinity=False)
        if typ == "string":
            return _TEXT
        if typ == "bytes":
            return st.binary(max_size=8)
        if typ == "records":
            return st.binary(max_size=40)
        if typ == "uuid":
            return st.one_of(st.just(UUID(int=0)), st.uuids())
        return self.struct(typ, field.get("fields"), depth)


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


_DEFAULT = _Default()


def _drop_defaults(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not _DEFAULT}


def message_strategy(raw: dict[str, Any], version: int, kio_ranges: bool = False) -> st.SearchStrategy[Node]:
    if not KNOWN_ERROR_CODES:
        from kio.schema.errors import ErrorCode as KioErrorCode

        KNOWN_ERROR_CODES.extend(sorted(int(code.value) for code in KioErrorCode))
    return StrategyBuilder(raw, version, kio_ranges).struct(raw["name"], raw["fields"])


def build_ours(node: Node, module: Any, message: str) -> Any:
    """The generated object for ``node``.

    Struct classes are looked up in the generated ``module`` by schema name; a
    name the request and response define differently is prefixed with the
    message name there (``DescribeQuorumRequestTopicData``).
    """
    cls = getattr(module, message + node.struct, None) or getattr(module, node.struct)
    return cls(**{name: _convert_ours(value, module, message) for name, value in node.values.items()})


def _convert_ours(value: Any, module: Any, message: str) -> Any:
    if isinstance(value, Node):
        return build_ours(value, module, message)
    if isinstance(value, list):
        return [_convert_ours(v, module, message) for v in value]
    return value
