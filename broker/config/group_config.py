"""Group configs (resource type GROUP): Kafka's GroupConfig, its names, checks and descriptions.

A group's configs override the broker's for that group: ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` are read by the consumer protocol's heartbeat; the ``share.*``
configs by the share groups (``share.session.timeout.ms`` and ``share.heartbeat.interval.ms`` by their
heartbeat), their defaults and bounds the broker's ``group.share.*`` configs.

A new set of configs is checked as Kafka checks it: every name must be a group config
(``Unknown group config name: x``), every value must parse and pass its validator, and the
resulting values (the group's, else the broker's) must lie within the broker's bounds
(``consumer.session.timeout.ms must be greater than or equal to
group.consumer.min.session.timeout.ms``), a session longer than the heartbeat interval.
All of these answer INVALID_CONFIG.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.config.broker_config import BrokerConfig
from broker.config.config_def import ConfigKey, ConfigValueError, at_least, format_value, one_of
from broker.config.topic_config import ConfigEntry, ConfigSynonym
from protocol.config_types import ConfigSource, ConfigType

#: Kafka 4's ISO-8601 duration of ``by_duration:<duration>`` (PnDTnHnMn.nS, never negative).
_DURATION = re.compile(r"P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?", re.IGNORECASE)

class GroupConfigError(ValueError):
    """Kafka's InvalidConfigurationException / ConfigException for a group config: INVALID_CONFIG."""


def _auto_offset_reset(name: str, value: Any) -> None:
    """Kafka's ShareGroupAutoOffsetResetStrategy.Validator."""
    text = str(value).lower()
    if text in ("earliest", "latest"):
        return
    if text.startswith("by_duration:"):
        duration = str(value)[len("by_duration:"):]
        if duration.startswith("-"):
            raise ConfigValueError(name, value, "Negative duration is not supported.")
        if not _DURATION.fullmatch(duration) or duration.upper() in ("P", "PT"):
            raise ConfigValueError(name, value, "Unable to parse duration string.")
        return
    raise ConfigValueError(name, value, "Invalid value `" + str(value) + "` for configuration " + name
                           + ". The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.")


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    key: ConfigKey
    #: The value a group without its own has (the broker's, as Kafka's GroupConfig.fromProps).
    default: Callable[[BrokerConfig], Any]
    #: (low, high, low config name, high config name) the value must lie within; None: no bounds.
    bounds: Callable[[BrokerConfig], tuple[int, int, str, str]] | None = None


def _fixed(value: Any) -> Callable[[BrokerConfig], Any]:
    return lambda config: value


def _share_default(attr: str) -> Callable[[BrokerConfig], Any]:
    return lambda config: getattr(config, f"group_share_{attr}")


def _share_bounds(name: str) -> Callable[[BrokerConfig], tuple[int, int, str, str]]:
    attr = name.replace(".", "_")
    return lambda config: (getattr(config, f"group_share_min_{attr}"), getattr(config, f"group_share_max_{attr}"),
                           f"group.share.min.{name}", f"group.share.max.{name}")


def _int_key(name: str, minimum: int, doc: str) -> ConfigKey:
    return ConfigKey(name, ConfigType.INT, doc, at_least(minimum))


GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.key.name: d for d in (
    GroupConfigDef(_int_key("consumer.session.timeout.ms", 1, "The timeout to detect client failures when using "
                                                               "the consumer group protocol."),
                   lambda c: c.group_consumer_session_timeout_ms,
                   lambda c: (c.group_consumer_min_session_timeout_ms, c.group_consumer_max_session_timeout_ms,
                              "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms")),
    GroupConfigDef(_int_key("consumer.heartbeat.interval.ms", 1, "The heartbeat interval given to the members of "
                                                                 "a consumer group."),
                   lambda c: c.group_consumer_heartbeat_interval_ms,
                   lambda c: (c.group_consumer_min_heartbeat_interval_ms, c.group_consumer_max_heartbeat_interval_ms,
                              "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms")),
    GroupConfigDef(_int_key("share.session.timeout.ms", 1, "The timeout to detect client failures when using the "
                                                           "share group protocol."),
                   _share_default("session_timeout_ms"), _share_bounds("session.timeout.ms")),
    GroupConfigDef(_int_key("share.heartbeat.interval.ms", 1, "The heartbeat interval given to the members of a "
                                                              "share group."),
                   _share_default("heartbeat_interval_ms"), _share_bounds("heartbeat.interval.ms")),
    GroupConfigDef(_int_key("share.record.lock.duration.ms", 1000, "The record acquisition lock duration in "
                                                                   "milliseconds for share groups."),
                   _share_default("record_lock_duration_ms"), _share_bounds("record.lock.duration.ms")),
    GroupConfigDef(_int_key("share.delivery.count.limit", 2, "The maximum number of delivery attempts for a record "
                                                             "delivered to a share group."),
                   _share_default("delivery_count_limit"), _share_bounds("delivery.count.limit")),
    GroupConfigDef(_int_key("share.partition.max.record.locks", 100, "Share-group record lock limit per "
                                                                     "share-partition."),
                   _share_default("partition_max_record_locks"), _share_bounds("partition.max.record.locks")),
    GroupConfigDef(ConfigKey("share.auto.offset.reset", ConfigType.STRING, "The strategy to initialize the "
                             "share-partition start offset.", _auto_offset_reset), _fixed("latest")),
    GroupConfigDef(ConfigKey("share.isolation.level", ConfigType.STRING, "Controls how to read records written "
                             "transactionally.", one_of("read_committed", "read_uncommitted")),
                   _fixed("read_uncommitted")),
    GroupConfigDef(ConfigKey("share.renew.acknowledge.enable", ConfigType.BOOLEAN, "Whether the renew acknowledge "
                             "type is enabled for the share group."), _fixed(True)),
)}

#: (session timeout, heartbeat interval) pairs Kafka checks against each other.
_SESSION_OVER_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                           ("share.session.timeout.ms", "share.heartbeat.interval.ms"))


def validate_group_configs(configs: Mapping[str, str], broker: BrokerConfig) -> dict[str, str]:
    """The group's configs as stored; GroupConfigError with Kafka's message for a set Kafka refuses."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise GroupConfigError(f"Unknown group config name: {name}")
    values = {}
    for name, definition in GROUP_CONFIGS.items():
        try:
            values[name] = definition.key.parse(configs[name]) if name in configs else definition.default(broker)
        except ConfigValueError as exc:
            raise GroupConfigError(str(exc)) from None
    for name, definition in GROUP_CONFIGS.items():
        if definition.bounds is None:
            continue
        low, high, low_name, high_name = definition.bounds(broker)
        if values[name] < low:
            raise GroupConfigError(f"{name} must be greater than or equal to {low_name}")
        if values[name] > high:
            raise GroupConfigError(f"{name} must be less than or equal to {high_name}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise GroupConfigError(f"{session} must be greater than {heartbeat}")
    return {name: str(value).strip() for name, value in configs.items()}


def group_config_entries(configs: Mapping[str, str], broker: BrokerConfig, synonyms: bool,
                         docs: bool) -> list[ConfigEntry]:
    """Every group config: the group's value (GROUP_CONFIG) or the broker's (DEFAULT_CONFIG), as Kafka lists them."""
    entries = []
    for name, definition in sorted(GROUP_CONFIGS.items()):
        own = name in configs
        value = configs[name] if own else format_value(definition.default(broker))
        source = ConfigSource.GROUP_CONFIG if own else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(
            name=name, value=value, source=source,
            synonyms=(ConfigSynonym(name, value, source),) if synonyms else (),
            config_type=definition.key.type, doc=definition.key.doc if docs else None))
    return entries
