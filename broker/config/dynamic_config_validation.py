"""Kafka's checks on a dynamic broker config change, in Kafka's order and words.

First each name and value on its own (DynamicBrokerConfig.validateConfigs):
read-only names (a name that is no broker config at all is kept as a custom
config, as Kafka keeps it), keystore configs without a listener prefix, each
value's type and range, per-broker configs on the cluster-default resource.
Then the broker's whole resulting config (the reconfigurables' own checks):
a thread count moves by at most half or double at a time, max.connections.per.ip is 0
only with overrides, the listeners stay
within the security protocol map and keep every advertised listener.

Every refusal is a BrokerConfigError whose message is what the client sees.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from broker.config.broker_config import INT_MAX, check_connections_per_ip
from broker.config.config_def import ConfigValueError
from broker.config.dynamic_config_sets import DYNAMIC_CONFIGS, THREAD_COUNT_CONFIGS, dynamic_config, is_custom_config


class BrokerConfigError(Exception):
    """A refused broker config change (INVALID_REQUEST in Kafka, see KAFKA-13609)."""


def _scala_set(names: list[str]) -> str:
    return f"Set({', '.join(sorted(names))})"


def validate_dynamic_configs(configs: Mapping[str, str | None], per_broker: bool) -> dict[str, str]:
    """Kafka's DynamicBrokerConfig.validateConfigs; returns the values as they are stored."""
    missing = sorted(name for name, value in configs.items() if value is None)
    if missing:
        raise BrokerConfigError(f"Null value not supported for : {', '.join(missing)}")
    not_dynamic = [name for name in configs if dynamic_config(name) is None and not is_custom_config(name)]
    if not_dynamic:
        raise BrokerConfigError(f"Cannot update these configs dynamically: {_scala_set(not_dynamic)}")
    unprefixed = [name for name in configs if name in DYNAMIC_CONFIGS and DYNAMIC_CONFIGS[name].listener_only]
    if unprefixed:
        raise BrokerConfigError("These security configs can be dynamically updated only per-listener using the "
                                f"listener prefix: {_scala_set(unprefixed)}")
    definitions = {name: definition for name in configs if (definition := dynamic_config(name)) is not None}
    try:
        for name, definition in definitions.items():
            definition.key.parse(configs[name])
    except ConfigValueError as exc:
        raise BrokerConfigError(str(exc)) from None
    if not per_broker:
        only_per_broker = [name for name, definition in definitions.items() if definition.per_broker]
        if only_per_broker:
            raise BrokerConfigError("Cannot update these configs at default cluster level, broker id must be "
                                    f"specified: {_scala_set(only_per_broker)}")
    # Passwords keep their exact text; everything else is stored trimmed, as Kafka parses it.
    # A custom config's text is kept as given: its type is its plugin's business.
    return {name: str(value).strip() if name in definitions and not definitions[name].sensitive else str(value)
            for name, value in configs.items()}


Lookup = Callable[[str], str | None]


def check_reconfiguration(old: Lookup, new: Lookup, advertised_listener_names: set[str]) -> None:
    """The reconfigurables' checks of the whole new config against the current one.

    ``old`` / ``new`` give a config's effective text before and after the change.
    """
    for name in sorted(THREAD_COUNT_CONFIGS):
        _check_thread_count(name, old(name), new(name))
    _check_cleaner_threads(old("log.cleaner.threads"), new("log.cleaner.threads"))
    _check_connections_per_ip(new("max.connections.per.ip"), new("max.connections.per.ip.overrides"))
    if (old("listeners"), old("listener.security.protocol.map")) != (
            new("listeners"), new("listener.security.protocol.map")):
        _check_listeners(new("listeners") or "", new("listener.security.protocol.map") or "",
                         advertised_listener_names)


def _check_thread_count(name: str, old_text: str | None, new_text: str | None) -> None:
    """Kafka's DynamicThreadPool rule: at least 1, at least half and at most double the current count."""
    if old_text is None or new_text is None or old_text == new_text:
        return
    old_value, new_value = int(old_text), int(new_text)
    if old_value == new_value:
        return
    failed = f"Dynamic thread count update validation failed for {name}={new_value}"
    if new_value <= 0:
        raise BrokerConfigError(f"{failed}, value should be at least 1")
    if new_value < old_value // 2:
        raise BrokerConfigError(f"{failed}, value should be at least half the current value {old_value}")
    if new_value > old_value * 2:
        raise BrokerConfigError(f"{failed}, value should not be greater than double the current value {old_value}")


def _check_cleaner_threads(old_text: str | None, new_text: str | None) -> None:
    """Kafka's LogCleaner.validateReconfiguration."""
    if old_text is None or new_text is None:
        return
    old_value, new_value = int(old_text), int(new_text)
    if new_value == old_value:
        return
    if new_value < 1:
        raise BrokerConfigError("Log cleaner threads should be at least 1")
    if new_value < old_value // 2:
        raise BrokerConfigError(f"Log cleaner threads cannot be reduced to less than half the current value "
                                f"{old_value}")
    if new_value > old_value * 2:
        raise BrokerConfigError(f"Log cleaner threads cannot be increased to more than double the current value "
                                f"{old_value}")


def _check_connections_per_ip(max_per_ip: str | None, overrides: str | None) -> None:
    """Kafka's KafkaConfig check, run on the whole new config: per.ip 0 only with overrides."""
    try:
        check_connections_per_ip(int(max_per_ip or INT_MAX), overrides or "")
    except ValueError as exc:
        raise BrokerConfigError(str(exc)) from None


def _check_listeners(listeners: str, protocol_map: str, advertised: set[str]) -> None:
    """Kafka's DynamicListenerConfig.validateReconfiguration (listener names are case-insensitive)."""
    names = {item.strip().partition("://")[0].upper() for item in listeners.split(",") if item.strip()}
    mapped = {item.strip().partition(":")[0].upper() for item in protocol_map.split(",") if item.strip()}
    if not advertised <= names:
        raise BrokerConfigError(f"Advertised listeners '{_scala_set(list(advertised))}' must be a subset of "
                                f"listeners '{_scala_set(list(names))}'")
    if not names <= mapped:
        raise BrokerConfigError(f"Listeners '{_scala_set(list(names))}' must be subset of listener map "
                                f"'{protocol_map}'")
