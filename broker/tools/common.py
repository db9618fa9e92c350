"""What the command-line tools share: ``k=v`` options and error reporting."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import NoReturn

import click


def parse_properties(values: Iterable[str], option: str) -> dict[str, str]:
    """``--property k=v`` values as a dict (later ones win, as in Kafka's tools)."""
    props = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint=option)
        props[key.strip()] = value
    return props


def parse_bool(value: str | None, default: bool = False) -> bool:
    if value is None:
        return default
    return value.strip().lower() == "true"


def fail(message: str, exit_code: int = 1) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(exit_code)
