"""A topic's effective configuration as Kafka describes it.

Each entry carries its value as Kafka prints it (``compact,delete``, ``true``)
and its source: a topic override (DYNAMIC_TOPIC_CONFIG), a broker setting that
provides the default (STATIC_BROKER_CONFIG via its ``log.*`` synonym), or
Kafka's built-in default (DEFAULT_CONFIG).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from storage.config import LogConfig

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer

# org.apache.kafka.clients.admin.ConfigEntry.ConfigSource wire values
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

#: topic config -> the broker property that sets its default (Kafka's synonyms)
BROKER_SYNONYMS: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "cleanup.policy": "log.cleanup.policy",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "compression.type": "compression.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool = False
    sensitive: bool = False


def format_value(value: Any) -> str | None:
    """Kafka's string form of a config value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def topic_config_entries(server: "KafkaServer", topic: str) -> list[ConfigEntry]:
    meta = server.metadata.get(topic)
    overrides = meta.configs if meta is not None else {}
    effective = server.default_log_config.with_overrides(overrides).model_dump(by_alias=True)
    set_in_broker = set(server.config.model_fields_set)
    broker_fields = {info.serialization_alias: name for name, info in type(server.config).model_fields.items()}
    entries = []
    for name in sorted(effective):
        if name in overrides:
            source = DYNAMIC_TOPIC_CONFIG
        elif broker_fields.get(BROKER_SYNONYMS.get(name, "")) in set_in_broker:
            source = STATIC_BROKER_CONFIG
        else:
            source = DEFAULT_CONFIG
        entries.append(ConfigEntry(name, format_value(effective[name]), source))
    return entries


def known_topic_configs() -> set[str]:
    return set(LogConfig.model_json_schema(by_alias=True)["properties"])
