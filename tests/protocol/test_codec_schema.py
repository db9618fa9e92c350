"""The generator's reading of schema syntax: version ranges, defaults, names, comments."""

from __future__ import annotations

import pytest

from protocol.codegen.schema import FieldSpec, Versions, parse_default, snake_case, strip_comments


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
