"""A topic's configuration as Kafka defines, validates and describes it.

Each topic config has a Kafka type, a validator and a doc string
(``TOPIC_CONFIG_KEYS``). Describing a topic gives every key with its effective
value and source: a topic override (DYNAMIC_TOPIC_CONFIG), else the first of
its broker synonyms (``retention.ms`` ← ``log.retention.ms`` /
``log.retention.minutes`` / ``log.retention.hours``) that is set dynamically
for this broker, dynamically as the cluster default, statically in the broker's
properties, or has a Kafka default — the same chain ``include_synonyms`` lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from broker.config.config_def import (
    ConfigKey,
    ConfigValueError,
    at_least,
    between,
    format_value,
    list_of,
    one_of,
)
from protocol.config_types import ConfigSource, ConfigType
from replication.replication_quota_manager import THROTTLED_REPLICAS_FORMAT, is_valid_throttled_replicas
from storage.log_config import LogConfig

# Kept under their old names: CreateTopics and Metadata use them.
DYNAMIC_TOPIC_CONFIG = int(ConfigSource.DYNAMIC_TOPIC_CONFIG)
STATIC_BROKER_CONFIG = int(ConfigSource.STATIC_BROKER_CONFIG)
DEFAULT_CONFIG = int(ConfigSource.DEFAULT_CONFIG)

#: Kafka 4's lower bound for segment.bytes (KIP-1030).
MIN_SEGMENT_BYTES = 1024 * 1024
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

_T = ConfigType


def _throttled_replicas(name: str, value: Any) -> None:
    """Kafka's ThrottledReplicaListValidator (its words: the client sees them)."""
    if not is_valid_throttled_replicas(value or []):
        raise ConfigValueError(name, value, f"{name} must be the literal '*' or a list of replicas in the "
                                            f"following format: {THROTTLED_REPLICAS_FORMAT}")


TOPIC_CONFIG_KEYS: dict[str, ConfigKey] = {k.name: k for k in (
    ConfigKey("cleanup.policy", _T.LIST, "The retention policy for old log segments: delete and/or compact.",
              list_of("compact", "delete")),
    ConfigKey("compression.type", _T.STRING, "The final compression type for the topic; 'producer' keeps the "
              "producer's codec.", one_of(*COMPRESSION_TYPES)),
    ConfigKey("delete.retention.ms", _T.LONG, "How long delete tombstones are kept for compacted topics.",
              at_least(0)),
    ConfigKey("file.delete.delay.ms", _T.LONG, "The time to wait before deleting a file from the filesystem.",
              at_least(0)),
    ConfigKey("flush.messages", _T.LONG, "Force an fsync of the log after this many messages.", at_least(1)),
    ConfigKey("flush.ms", _T.LONG, "Force an fsync of the log after this much time.", at_least(0)),
    ConfigKey("follower.replication.throttled.replicas", _T.LIST, "A list of replicas for which log replication "
              "should be throttled on the follower side: [PartitionId]:[BrokerId],[PartitionId]:[BrokerId],... or "
              "the wildcard '*' for all replicas of this topic.", _throttled_replicas),
    ConfigKey("index.interval.bytes", _T.INT, "How often an entry is added to the offset index.", at_least(0)),
    ConfigKey("leader.replication.throttled.replicas", _T.LIST, "A list of replicas for which log replication "
              "should be throttled on the leader side: [PartitionId]:[BrokerId],[PartitionId]:[BrokerId],... or "
              "the wildcard '*' for all replicas of this topic.", _throttled_replicas),
    ConfigKey("max.compaction.lag.ms", _T.LONG, "The maximum time a message stays ineligible for compaction.",
              at_least(1)),
    ConfigKey("max.message.bytes", _T.INT, "The largest record batch size allowed by Kafka (after compression).",
              at_least(0)),
    ConfigKey("message.timestamp.after.max.ms", _T.LONG, "How far in the future a message timestamp may be.",
              at_least(0)),
    ConfigKey("message.timestamp.before.max.ms", _T.LONG, "How far in the past a message timestamp may be.",
              at_least(0)),
    ConfigKey("message.timestamp.type", _T.STRING, "Whether the timestamp is the message create time or the log "
              "append time.", one_of("CreateTime", "LogAppendTime")),
    ConfigKey("min.cleanable.dirty.ratio", _T.DOUBLE, "How frequently the log compactor cleans the log.",
              between(0, 1)),
    ConfigKey("min.compaction.lag.ms", _T.LONG, "The minimum time a message stays uncompacted.", at_least(0)),
    ConfigKey("min.insync.replicas", _T.INT, "The minimum number of in-sync replicas for acks=all.",
              at_least(1)),
    ConfigKey("preallocate", _T.BOOLEAN, "Preallocate the file on disk when creating a new log segment."),
    ConfigKey("retention.bytes", _T.LONG, "The maximum size a partition can grow to before old segments are "
              "discarded (-1: no limit)."),
    ConfigKey("retention.ms", _T.LONG, "The maximum time a log segment is retained before it is discarded "
              "(-1: no limit).", at_least(-1)),
    ConfigKey("segment.bytes", _T.INT, "The segment file size for the log.", at_least(MIN_SEGMENT_BYTES)),
    ConfigKey("segment.index.bytes", _T.INT, "The size of the index that maps offsets to file positions.",
              at_least(4)),
    ConfigKey("segment.jitter.ms", _T.LONG, "The maximum random jitter subtracted from segment.ms.", at_least(0)),
    ConfigKey("segment.ms", _T.LONG, "The period after which a segment is rolled even if not full.", at_least(1)),
    ConfigKey("unclean.leader.election.enable", _T.BOOLEAN, "Whether replicas not in the ISR may be elected "
              "leader as a last resort."),
)}

#: topic config -> the broker properties that set its default, in Kafka's precedence order
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "retention.bytes": ("log.retention.bytes",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "cleanup.policy": ("log.cleanup.policy",),
    "max.message.bytes": ("message.max.bytes",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "compression.type": ("compression.type",),
    "min.insync.replicas": ("min.insync.replicas",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
}
#: the first (most specific) synonym of each topic config, as older callers used it
BROKER_SYNONYMS: dict[str, str] = {name: chain[0] for name, chain in TOPIC_CONFIG_SYNONYMS.items()}


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = field(default=())
    config_type: int = ConfigType.UNKNOWN
    doc: str | None = None


def known_topic_configs() -> set[str]:
    return set(TOPIC_CONFIG_KEYS)


def parse_topic_config(name: str, value: str | None) -> Any:
    """The typed value of one topic config; ConfigValueError for a bad one."""
    key = TOPIC_CONFIG_KEYS.get(name)
    if key is None:
        raise KeyError(name)
    return key.parse(value)


def validate_topic_overrides(defaults: LogConfig, overrides: Mapping[str, str]) -> dict[str, str]:
    """Every override typed and range-checked as Kafka does, then checked against LogConfig.

    Raises KeyError for an unknown name and ConfigValueError for a bad value.
    Returns the overrides as strings, as they are stored.
    """
    typed = {name: parse_topic_config(name, value) for name, value in overrides.items()}
    for name, value in typed.items():
        _check_log_config(defaults, {name: value}, name, overrides[name])
    _check_log_config(defaults, typed, next(iter(typed), ""), None)
    return {k: str(v).strip() for k, v in overrides.items()}


def _check_log_config(defaults: LogConfig, typed: Mapping[str, Any], name: str, shown: str | None) -> None:
    """Storage's own constraints (LogConfig validators) on top of Kafka's ranges."""
    try:
        defaults.with_overrides(typed)
    except ValidationError as exc:
        raise ConfigValueError(name, shown, str(exc.errors()[0].get("msg", exc))) from None


class BrokerConfigLayers(Protocol):
    """Where a broker-side value comes from (``DynamicBrokerConfig`` is the implementation)."""

    per_broker: dict[str, str]
    cluster_default: dict[str, str]
    default_log_config: LogConfig

    def static_props(self) -> dict[str, Any]: ...

    def kafka_defaults(self) -> dict[str, Any]: ...


def broker_synonyms(dynamic: BrokerConfigLayers, topic_config: str, sensitive: bool = False) -> list[ConfigSynonym]:
    """The broker-side chain behind a topic config, most specific source first."""
    chain = TOPIC_CONFIG_SYNONYMS.get(topic_config, ())
    found: list[ConfigSynonym] = []
    for source, values in (
        (ConfigSource.DYNAMIC_BROKER_CONFIG, dynamic.per_broker),
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic.cluster_default),
        (ConfigSource.STATIC_BROKER_CONFIG, dynamic.static_props()),
        (ConfigSource.DEFAULT_CONFIG, dynamic.kafka_defaults()),
    ):
        found.extend(ConfigSynonym(name, None if sensitive else format_value(values[name]), int(source))
                     for name in chain if values.get(name) is not None)
    return found


def topic_config_entries(dynamic: BrokerConfigLayers, overrides: Mapping[str, str], include_synonyms: bool = False,
                         include_documentation: bool = False) -> list[ConfigEntry]:
    """Every config of a topic with these overrides: effective value and source (sorted by name)."""
    effective = dynamic.default_log_config.with_overrides(overrides).model_dump(by_alias=True)
    entries = []
    for name in sorted(TOPIC_CONFIG_KEYS):
        key = TOPIC_CONFIG_KEYS[name]
        value = format_value(effective.get(name))
        chain = broker_synonyms(dynamic, name)
        if name in overrides:
            chain.insert(0, ConfigSynonym(name, value, DYNAMIC_TOPIC_CONFIG))
        source = chain[0].source if chain else DEFAULT_CONFIG
        entries.append(ConfigEntry(
            name, value, source,
            synonyms=tuple(chain) if include_synonyms else (),
            config_type=int(key.type),
            doc=key.doc if include_documentation else None,
        ))
    return entries
