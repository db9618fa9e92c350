"""Client-metrics subscriptions (resource type CLIENT_METRICS): Kafka's ClientMetricsConfigs.

A subscription is a named set of three configs: ``metrics`` (the metric name prefixes the matching
clients push; ``*`` for all), ``interval.ms`` (how often they push, 100 ms to one hour, default five
minutes) and ``match`` (``selector=regex`` pairs over the client's instance id, client id, software
name and version, source address and port; no selector matches every client).

A new set is checked as Kafka checks it: an empty subscription name, an unknown config name or an
interval out of range answer INVALID_REQUEST; a value that does not parse or a bad match selector
answers INVALID_CONFIG.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from broker.config.topic_config import ConfigEntry
from protocol.config_types import ConfigSource, ConfigType
from protocol.errors import ErrorCode

SUBSCRIPTION_METRICS: Final = "metrics"
PUSH_INTERVAL_MS: Final = "interval.ms"
CLIENT_MATCH_PATTERN: Final = "match"

#: ``metrics`` naming every metric.
ALL_SUBSCRIBED_METRICS: Final = "*"
DEFAULT_INTERVAL_MS: Final = 5 * 60 * 1000
_MIN_INTERVAL_MS: Final = 100
_MAX_INTERVAL_MS: Final = 3_600_000

#: The client attributes a ``match`` selector may name.
CLIENT_INSTANCE_ID: Final = "client_instance_id"
CLIENT_ID: Final = "client_id"
CLIENT_SOFTWARE_NAME: Final = "client_software_name"
CLIENT_SOFTWARE_VERSION: Final = "client_software_version"
CLIENT_SOURCE_ADDRESS: Final = "client_source_address"
CLIENT_SOURCE_PORT: Final = "client_source_port"
MATCH_SELECTORS: Final = frozenset({CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
                                    CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT})

#: name -> (type, Kafka's documentation).
CLIENT_METRICS_CONFIGS: Final[dict[str, tuple[ConfigType, str]]] = {
    SUBSCRIPTION_METRICS: (ConfigType.LIST, "Subscription metrics list"),
    PUSH_INTERVAL_MS: (ConfigType.INT, "Push interval in milliseconds"),
    CLIENT_MATCH_PATTERN: (ConfigType.LIST, "Client match pattern list"),
}


class ClientMetricsConfigError(ValueError):
    """A subscription Kafka refuses: the error code and Kafka's message."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True, slots=True)
class Subscription:
    """One subscription, parsed: what a matching client is asked for."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: Mapping[str, re.Pattern[str]]

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        """Every selector's regex matches its attribute whole (a missing attribute matches nothing)."""
        for selector, pattern in self.match.items():
            value = attributes.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def split_list(value: str) -> list[str]:
    """Kafka's LIST parsing: comma-separated, each item trimmed, empty items dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


def _parse_interval(value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = None
    if number is None or not -(2**31) <= number < 2**31:  # Kafka's INT is 32 bits
        raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration "
                                                                  f"{PUSH_INTERVAL_MS}: Not a number of type INT")
    return number


def parse_match(patterns: list[str]) -> dict[str, re.Pattern[str]]:
    """``selector=regex`` pairs (split at '=', exactly two parts), as Kafka's parseMatchingPatterns."""
    parsed: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        while parts and not parts[-1]:  # Java's String.split drops trailing empty strings
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            parsed[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG,
                                           f"Illegal client matching pattern: {pattern}") from None
    return parsed


def validate_client_metrics_configs(name: str, configs: Mapping[str, str]) -> dict[str, str]:
    """The subscription's configs as stored; ClientMetricsConfigError for a set Kafka refuses."""
    if not name:
        raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CLIENT_METRICS_CONFIGS:
            raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    if PUSH_INTERVAL_MS in configs:
        interval = _parse_interval(configs[PUSH_INTERVAL_MS])
        if not _MIN_INTERVAL_MS <= interval <= _MAX_INTERVAL_MS:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST, f"Invalid value {interval} for {PUSH_INTERVAL_MS}, interval must be "
                                           f"between 100 and 3600000 (1 hour)")
    if CLIENT_MATCH_PATTERN in configs:
        parse_match(split_list(configs[CLIENT_MATCH_PATTERN]))
    return {key: value.strip() for key, value in configs.items()}


def parse_subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """A validated subscription's configs, with Kafka's defaults for those it does not set."""
    interval = configs.get(PUSH_INTERVAL_MS)
    return Subscription(
        name=name, metrics=frozenset(split_list(configs.get(SUBSCRIPTION_METRICS, ""))),
        interval_ms=DEFAULT_INTERVAL_MS if interval is None else _parse_interval(interval),
        match=parse_match(split_list(configs.get(CLIENT_MATCH_PATTERN, ""))))


def client_metrics_config_entries(configs: Mapping[str, str]) -> list[ConfigEntry]:
    """The subscription's own configs (CLIENT_METRICS_CONFIG), as Kafka's DescribeConfigs lists them:
    no defaults, no synonyms."""
    return [ConfigEntry(name=name, value=value, source=ConfigSource.CLIENT_METRICS_CONFIG,
                        config_type=CLIENT_METRICS_CONFIGS[name][0] if name in CLIENT_METRICS_CONFIGS else
                        ConfigType.UNKNOWN)
            for name, value in sorted(configs.items())]
