"""Reading Kafka's JSON message schemas into a small model the emitters walk.

The JSON format is Kafka's own (``clients/src/main/resources/common/message``):
``//`` line comments, version ranges written as ``"3+"``, ``"1-5"``, ``"7"`` or
``"none"``, and fields that may carry ``nullableVersions``, ``taggedVersions``
plus ``tag``, ``default``, ``ignorable`` and nested ``fields``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

# Versions are int16 on the wire, so "N+" means "N up to the largest int16".
MAX_VERSION = 0x7FFF

# The schemas that kafka-python does not ship live next to this package.
OWN_SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"

PRIMITIVE_WIDTHS = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "float64": 8,
    "uuid": 16,
}
VARIABLE_PRIMITIVES = {"string", "bytes", "records"}


@dataclasses.dataclass(frozen=True)
class Versions:
    """An inclusive version range; empty when ``low > high``."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | int | None) -> Versions:
        if text is None:
            return cls(1, 0)
        text = str(text).strip()
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            low, high = text.split("-", 1)
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.low, other.low), min(self.high, other.high))

    @property
    def empty(self) -> bool:
        return self.low > self.high


@dataclasses.dataclass
class FieldSpec:
    name: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: Any
    ignorable: bool
    flexible_override: Versions | None
    about: str
    struct: StructSpec | None = None  # set for struct and struct-array fields

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def attr(self) -> str:
        return snake_case(self.name)


@dataclasses.dataclass
class StructSpec:
    name: str  # the Python class name
    schema_name: str  # the name in the JSON
    fields: list[FieldSpec]
    about: str = ""


@dataclasses.dataclass
class MessageSpec:
    name: str  # e.g. "ProduceRequest"
    kind: str  # "request", "response" or "header"
    api_key: int | None
    valid: Versions
    flexible: Versions
    struct: StructSpec
    listeners: list[str]
    source: str  # file name the schema came from


def snake_case(name: str) -> str:
    """``TopicData`` -> ``topic_data``; ``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def strip_comments(text: str) -> str:
    # Kafka's files only use whole-line or trailing "//" comments, and no
    # string in them contains "//", so a line-wise cut is exact.
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def kafka_python_schema_dir() -> Path:
    """kafka-python's ``kafka/protocol/schemas/resources`` directory.

    Found with ``find_spec`` on the top-level package, which does not import
    it: importing ``kafka`` loads the whole client and parses every schema.
    """
    spec = importlib.util.find_spec("kafka")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("kafka-python is not installed (pafka[test] pins kafka-python==3.0.12)")
    return Path(next(iter(spec.submodule_search_locations))) / "protocol" / "schemas" / "resources"


def load_json(path: Path) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    return schema


def schema_files() -> dict[str, Path]:
    """Every message schema by file stem, our own ones overriding none of Kafka's."""
    found: dict[str, Path] = {}
    for directory in (kafka_python_schema_dir(), OWN_SCHEMAS):
        for path in sorted(directory.glob("*.json")):
            if path.stem in found:
                raise ValueError(f"schema {path.stem} defined twice: {found[path.stem]} and {path}")
            found[path.stem] = path
    return found


def _field(raw: dict[str, Any]) -> FieldSpec:
    tagged = Versions.parse(raw.get("taggedVersions"))
    flex = raw.get("flexibleVersions")
    return FieldSpec(
        name=raw["name"],
        type=raw["type"],
        versions=Versions.parse(raw.get("versions")),
        nullable=Versions.parse(raw.get("nullableVersions")),
        tagged=tagged,
        tag=raw.get("tag"),
        default=raw.get("default"),
        ignorable=bool(raw.get("ignorable", False)),
        flexible_override=Versions.parse(flex) if flex is not None else None,
        about=raw.get("about", ""),
    )


class _StructResolver:
    """Builds StructSpecs for one message, resolving references to commonStructs."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.common_raw = {c["name"]: c for c in raw.get("commonStructs", [])}
        self.structs: dict[str, StructSpec] = {}

    def fields(self, raw_fields: list[dict[str, Any]]) -> list[FieldSpec]:
        out = []
        for raw in raw_fields:
            spec = _field(raw)
            base = spec.element_type
            if base not in PRIMITIVE_WIDTHS and base not in VARIABLE_PRIMITIVES:
                spec.struct = self.struct(base, raw.get("fields"), raw.get("about", ""))
            out.append(spec)
        return out

    def struct(self, name: str, raw_fields: list[dict[str, Any]] | None, about: str) -> StructSpec:
        if name in self.structs:
            return self.structs[name]
        if raw_fields is None:
            if name not in self.common_raw:
                raise ValueError(f"struct {name} has no fields and is not a common struct")
            raw_fields = self.common_raw[name]["fields"]
        spec = StructSpec(name=name, schema_name=name, fields=[], about=about)
        self.structs[name] = spec
        spec.fields = self.fields(raw_fields)
        return spec


def parse_message(path: Path) -> MessageSpec:
    raw = load_json(path)
    resolver = _StructResolver(raw)
    root = StructSpec(name=raw["name"], schema_name=raw["name"], fields=[])
    root.fields = resolver.fields(raw["fields"])
    return MessageSpec(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        valid=Versions.parse(raw["validVersions"]),
        flexible=Versions.parse(raw["flexibleVersions"]),
        struct=root,
        listeners=list(raw.get("listeners", [])),
        source=path.name,
    )


def parse_default(field: FieldSpec, version_nullable: bool = True) -> Any:
    """The Python value of a field's default, following Kafka's generator rules.

    Integers may be decimal or ``0x`` hex (optionally negative), booleans are
    ``"true"``/``"false"``, ``"null"`` is allowed for nullable strings, bytes,
    arrays and structs. Without a default: 0, False, "", b"", [] or a fresh
    struct; records default to None.
    """
    raw = field.default
    base = field.type
    if isinstance(raw, str) and raw.strip() == "null":
        return None
    if field.is_array:
        return []
    if field.struct is not None:
        return "STRUCT"
    if base in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        if raw is None or raw == "":
            return 0
        if isinstance(raw, int):
            return raw
        text = raw.strip().lower()
        negative = text.startswith("-")
        text = text.lstrip("-")
        value = int(text, 16) if text.startswith("0x") else int(text)
        return -value if negative else value
    if base == "float64":
        return float(raw) if raw not in (None, "") else 0.0
    if base == "bool":
        if isinstance(raw, bool):
            return raw
        return raw is not None and raw.strip().lower() == "true"
    if base == "string":
        return "" if raw is None else str(raw)
    if base == "bytes":
        return b""
    if base == "records":
        return None
    if base == "uuid":
        return "UUID_ZERO"
    raise ValueError(f"unknown type {base}")
