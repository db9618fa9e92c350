"""The generator's reading of schema syntax: version ranges, defaults, names, comments."""

from __future__ import annotations

import struct

import pytest

from protocol.codegen.schema import FieldSpec, Versions, parse_default, snake_case, strip_comments
from protocol.errors import ProtocolError


def field(typ: str, default: object = None, nullable: str = "none") -> FieldSpec:
    return FieldSpec(
        name="F",
        type=typ,
        versions=Versions.parse("0+"),
        nullable=Versions.parse(nullable),
        tagged=Versions.parse(None),
        tag=None,
        default=default,
        ignorable=False,
        flexible_override=None,
        about="",
    )


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [("3+", [3, 4, 32767], [2]), ("1-5", [1, 5], [0, 6]), ("7", [7], [6, 8]), ("none", [], [0, 1]), ("0+", [0], [-1])],
)
def test_version_ranges(text: str, inside: list[int], outside: list[int]) -> None:
    versions = Versions.parse(text)
    assert all(v in versions for v in inside)
    assert not any(v in versions for v in outside)


@pytest.mark.parametrize(
    ("typ", "raw", "expected"),
    [
        ("int32", "0x7fffffff", 0x7FFFFFFF),
        ("int32", "-0x10", -16),
        ("int64", "-1", -1),
        ("int64", -1, -1),
        ("int64", "9223372036854775807", 2**63 - 1),
        ("int32", "-2147483648", -(2**31)),
        ("int8", None, 0),
        ("bool", "true", True),
        ("bool", "false", False),
        ("bool", False, False),
        ("bool", None, False),
        ("string", None, ""),
        ("string", "", ""),
        ("string", "null", None),
        ("bytes", None, b""),
        ("float64", "1.5", 1.5),
        ("records", None, None),
        ("[]int32", None, []),
        ("[]int32", "null", None),
    ],
)
def test_defaults(typ: str, raw: object, expected: object) -> None:
    assert parse_default(field(typ, raw)) == expected


def test_names_and_comments() -> None:
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    assert snake_case("TopicID") == "topic_id"
    assert snake_case("V3AndBelowTransactionalId") == "v3_and_below_transactional_id"
    assert strip_comments('// header\n{ "a": 1 } // trailing\n') == '\n{ "a": 1 } '


SYNTHETIC = """
// A made-up API exercising what Kafka's own schemas barely use.
{
  "apiKey": 32000, "type": "request", "name": "SyntheticRequest",
  "validVersions": "0-3", "flexibleVersions": "2+",
  "fields": [
    { "name": "Small", "type": "uint16", "versions": "0+", "default": "0xffff", "about": "" },
    { "name": "Big", "type": "uint32", "versions": "0+", "default": 4000000000, "about": "" },
    { "name": "Ratio", "type": "float64", "versions": "0+", "default": "-2.5", "about": "" },
    { "name": "Flag", "type": "bool", "versions": "1+", "default": "true", "about": "" },
    { "name": "Legacy", "type": "int32", "versions": "0-1", "default": "-0x10", "ignorable": true, "about": "" },
    { "name": "Id", "type": "uuid", "versions": "0+", "about": "" },
    { "name": "Blob", "type": "bytes", "versions": "0+", "nullableVersions": "1+", "default": "null", "about": "" },
    { "name": "Tagged", "type": "[]int64", "versions": "2+", "taggedVersions": "2+", "tag": 7, "about": "" },
    { "name": "Inner", "type": "Inner", "versions": "0+", "nullableVersions": "3+", "default": "null", "about": "",
      "fields": [ { "name": "Value", "type": "int8", "versions": "0+", "default": "-1", "about": "" } ] }
  ]
}
"""


def test_synthetic_schema_types_defaults_and_versions(tmp_path) -> None:
    from uuid import UUID

    from protocol.codegen.module import emit_module
    from protocol.codegen.schema import parse_message

    path = tmp_path / "SyntheticRequest.json"
    path.write_text(SYNTHETIC, encoding="utf-8")
    spec = parse_message(path)
    namespace: dict = {}
    exec(compile(emit_module("Synthetic.", [spec], None), "synthetic", "exec"), namespace)
    Synthetic, Inner = namespace["SyntheticRequest"], namespace["Inner"]

    default = Synthetic()
    assert (default.small, default.big, default.ratio, default.flag, default.legacy) == (0xFFFF, 4000000000, -2.5, True, -16)
    assert default.blob is None and default.inner is None and default.tagged == []

    message = Synthetic(small=7, big=2**32 - 1, ratio=0.1, id=UUID(int=5), blob=b"ab", inner=Inner(value=3))
    message.tagged = [1, -2]
    with pytest.raises(ProtocolError):
        message.to_bytes(1)  # Tagged exists from v2 and is not ignorable
    message.tagged = []
    message.flag = False
    with pytest.raises(ProtocolError):
        message.to_bytes(0)  # Flag exists from v1 and is not ignorable
    message.flag = True
    for version in range(4):
        if version >= 2:
            message.tagged = [1, -2]
        decoded = Synthetic.decode(message.to_bytes(version), version)
        assert decoded == message
    # v2 carries the tagged array as tag 7, 17 bytes (compact length 3, two int64s);
    # at its default it is left out entirely.
    wire = message.to_bytes(2)
    assert wire.endswith(b"\x01\x07\x11\x03" + struct.pack(">qq", 1, -2))
    message.tagged = []
    assert message.to_bytes(2).endswith(b"\x00")
    assert len(message.to_bytes(2)) == len(wire) - 19
    # Nullable struct only from v3: null is sent as marker -1 there, refused before.
    message.inner = None
    assert Synthetic.decode(message.to_bytes(3), 3).inner is None
    with pytest.raises(ProtocolError):
        message.to_bytes(2)
    # Legacy (0-1) is ignorable: a non-default value is dropped silently from v2 on.
    message.legacy = 99
    message.inner = Inner()
    assert Synthetic.decode(message.to_bytes(2), 2).legacy == -16
    assert Synthetic.decode(message.to_bytes(1), 1).legacy == 99
