"""Typed config keys as Kafka's ConfigDef describes them: type, validator, documentation.

The admin APIs need more than a value per config: DescribeConfigs reports each
key's type (``config_type``, v3+) and documentation, and AlterConfigs /
IncrementalAlterConfigs must refuse a bad value with Kafka's own wording
(``Invalid value abc for configuration retention.ms: Not a number of type
LONG``) before anything is stored. This module holds that vocabulary; the topic
and broker tables live in ``broker.config.topic_config`` and ``broker.config.dynamic_broker_config``,
and the wire enums (``ConfigType``, ``ConfigSource``...) in ``protocol.config_types``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from protocol.config_types import AlterConfigOp, ConfigType

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class ConfigValueError(ValueError):
    """Kafka's ConfigException: the message is what the client sees."""

    def __init__(self, name: str, value: Any, reason: str) -> None:
        shown = f"[{', '.join(map(str, value))}]" if isinstance(value, list) else value
        super().__init__(f"Invalid value {shown} for configuration {name}: {reason}")


Validator = Callable[[str, Any], None]


def at_least(minimum: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigValueError(name, value, f"Value must be at least {minimum}")
    return check


def between(low: float, high: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise ConfigValueError(name, value, f"Value must be no more than {high}" if value > high
                                   else f"Value must be at least {low}")
    return check


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value not in allowed:
            raise ConfigValueError(name, value, f"String must be one of: {', '.join(allowed)}")
    return check


def list_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        bad = [item for item in value or [] if item not in allowed]
        if bad:
            raise ConfigValueError(name, value, f"String must be one of: {', '.join(allowed)}")
    return check


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    doc: str
    validator: Validator | None = None

    def parse(self, text: str | None) -> Any:
        """Kafka's ConfigDef.parseType followed by the validator."""
        value = parse_typed(self.name, self.type, text)
        if self.validator is not None:
            self.validator(self.name, value)
        return value


def parse_typed(name: str, type_: ConfigType, text: str | None) -> Any:
    if text is None:
        return None
    trimmed = text.strip()
    if type_ is ConfigType.BOOLEAN:
        if trimmed.lower() not in ("true", "false"):
            raise ConfigValueError(name, text, "Expected value to be either true or false")
        return trimmed.lower() == "true"
    if type_ in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        limits = {ConfigType.INT: (INT_MIN, INT_MAX), ConfigType.SHORT: (-(2**15), 2**15 - 1),
                  ConfigType.LONG: (LONG_MIN, LONG_MAX)}[type_]
        try:
            number = int(trimmed)
        except ValueError:
            raise ConfigValueError(name, text, f"Not a number of type {type_.name}") from None
        if not limits[0] <= number <= limits[1]:
            raise ConfigValueError(name, text, f"Not a number of type {type_.name}")
        return number
    if type_ is ConfigType.DOUBLE:
        try:
            return float(trimmed)
        except ValueError:
            raise ConfigValueError(name, text, "Not a number of type DOUBLE") from None
    if type_ is ConfigType.LIST:
        return [item.strip() for item in trimmed.split(",") if item.strip()] if trimmed else []
    return trimmed if type_ is not ConfigType.PASSWORD else text


def format_value(value: Any) -> str | None:
    """Kafka's ConfigDef.convertToString: ``true``, ``compact,delete``, ``0.5``."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def config_type_of(annotation_value: Any, name: str) -> ConfigType:
    """A Kafka type for a broker property from its Python value type and name."""
    if isinstance(annotation_value, bool):
        return ConfigType.BOOLEAN
    if isinstance(annotation_value, float):
        return ConfigType.DOUBLE
    if isinstance(annotation_value, (list, tuple)):
        return ConfigType.LIST
    if isinstance(annotation_value, int):
        return ConfigType.LONG if name.endswith(".ms") or abs(annotation_value) > INT_MAX else ConfigType.INT
    return ConfigType.STRING


def apply_list_op(current: Sequence[str], op: AlterConfigOp, values: Sequence[str]) -> list[str]:
    """IncrementalAlterConfigs APPEND / SUBTRACT on a LIST config (duplicates not re-added)."""
    if op is AlterConfigOp.APPEND:
        return list(current) + [v for v in values if v not in current]
    return [v for v in current if v not in values]
