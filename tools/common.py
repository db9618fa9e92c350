"""What the command-line tools share: ``k=v`` options and error reporting."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

import click

from broker.config.broker_config import parse_properties as parse_properties_file
from client.client_security import ClientSecurity


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


def command_config_security(command_config: Path | None) -> ClientSecurity:
    """``--command-config FILE``'s client properties (security.protocol, sasl.*, ssl.*), as Kafka's
    tools read them; exits with the reason when the file is unreadable or its settings are bad."""
    try:
        props = parse_properties_file(command_config.read_text()) if command_config is not None else {}
        return ClientSecurity.from_properties(props)
    except (OSError, ValueError) as exc:
        fail(f"Invalid --command-config: {exc}")


def fail(message: str, exit_code: int = 1) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(exit_code)
