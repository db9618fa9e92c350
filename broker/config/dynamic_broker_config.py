"""Broker-resource configs: static settings, KIP-226 dynamic overrides, and their description.

A broker's effective setting comes from, most specific first: a dynamic value
for this broker (``ConfigResource(BROKER, "<id>")``), a dynamic cluster-wide
default (``ConfigResource(BROKER, "")``), the static properties it was started
with (file, env, ``--override``), and Kafka's default. Kafka keeps the dynamic
values in ZooKeeper (``/config/brokers/<id>``, ``/config/brokers/<default>``) or
the metadata log; the embedded broker keeps them in
``<log.dirs[0]>/pafka-dynamic-broker-configs.json``, replaced atomically.

Only the log defaults behind topic configs (``log.retention.ms``,
``log.segment.bytes``, ``message.max.bytes``…) are dynamically updatable here;
they apply at once to every open log without a topic override. Anything else
is refused as Kafka refuses a read-only config: INVALID_REQUEST with
``Cannot update these configs dynamically: Set(name)``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from broker.config.broker_config import BrokerConfig
from broker.config.config_def import (
    ConfigKey,
    ConfigValueError,
    at_least,
    between,
    config_type_of,
    format_value,
    list_of,
    one_of,
)
from broker.config.topic_config import COMPRESSION_TYPES, MIN_SEGMENT_BYTES, ConfigEntry, ConfigSynonym
from protocol.config_types import ConfigSource, ConfigType
from storage.checkpoints import write_atomically
from storage.log_config import LogConfig
from storage.log_manager import LogManager

log = logging.getLogger(__name__)

FILE_NAME = "pafka-dynamic-broker-configs.json"
FORMAT_VERSION = 1

_T = ConfigType
#: The dynamically updatable broker configs (cluster-wide or per broker), typed as in Kafka.
DYNAMIC_BROKER_CONFIG_KEYS: dict[str, ConfigKey] = {k.name: k for k in (
    ConfigKey("log.segment.bytes", _T.INT, "The maximum size of a single log file.", at_least(MIN_SEGMENT_BYTES)),
    ConfigKey("log.roll.ms", _T.LONG, "The maximum time before a new log segment is rolled out (ms).",
              at_least(1)),
    ConfigKey("log.roll.hours", _T.INT, "The maximum time before a new log segment is rolled out (hours).",
              at_least(1)),
    ConfigKey("log.index.size.max.bytes", _T.INT, "The maximum size in bytes of the offset index.", at_least(4)),
    ConfigKey("log.index.interval.bytes", _T.INT, "The interval with which an entry is added to the offset "
              "index.", at_least(0)),
    ConfigKey("log.flush.interval.messages", _T.LONG, "The number of messages accumulated on a log partition "
              "before messages are flushed to disk.", at_least(1)),
    ConfigKey("log.flush.interval.ms", _T.LONG, "The maximum time a message in any topic is kept in memory "
              "before being flushed to disk."),
    ConfigKey("log.retention.ms", _T.LONG, "The number of milliseconds to keep a log file before deleting it; "
              "-1 means no time limit.", at_least(-1)),
    ConfigKey("log.retention.minutes", _T.INT, "The number of minutes to keep a log file before deleting it."),
    ConfigKey("log.retention.hours", _T.INT, "The number of hours to keep a log file before deleting it."),
    ConfigKey("log.retention.bytes", _T.LONG, "The maximum size of the log before deleting it."),
    ConfigKey("log.segment.delete.delay.ms", _T.LONG, "The amount of time to wait before deleting a file from "
              "the filesystem.", at_least(0)),
    ConfigKey("log.cleanup.policy", _T.LIST, "The default cleanup policy for segments beyond the retention "
              "window.", list_of("compact", "delete")),
    ConfigKey("log.message.timestamp.type", _T.STRING, "Whether the timestamp in the message is the create "
              "time or the log append time.", one_of("CreateTime", "LogAppendTime")),
    ConfigKey("log.cleaner.min.cleanable.ratio", _T.DOUBLE, "The minimum ratio of dirty log to total log for "
              "a log to be eligible for cleaning.", between(0, 1)),
    ConfigKey("log.cleaner.min.compaction.lag.ms", _T.LONG, "The minimum time a message will remain "
              "uncompacted in the log.", at_least(0)),
    ConfigKey("log.cleaner.delete.retention.ms", _T.LONG, "The amount of time to retain tombstone markers for "
              "log compacted topics.", at_least(0)),
    ConfigKey("message.max.bytes", _T.INT, "The largest record batch size allowed by Kafka (after "
              "compression).", at_least(0)),
    ConfigKey("compression.type", _T.STRING, "The final compression type for topics without their own.",
              one_of(*COMPRESSION_TYPES)),
    ConfigKey("min.insync.replicas", _T.INT, "The minimum number of replicas that must acknowledge a write "
              "with acks=all.", at_least(1)),
    ConfigKey("unclean.leader.election.enable", _T.BOOLEAN, "Whether replicas not in the ISR may be elected "
              "leader as a last resort."),
)}

#: Kafka's brokerSynonyms: broker properties that set the same thing, most specific first.
_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)

_DOCS: dict[str, str] = {
    "node.id": "The id of this broker (broker.id).",
    "listeners": "Comma-separated listener URIs the broker binds to.",
    "advertised.listeners": "Listeners published to clients, if different from listeners.",
    "zookeeper.connect": "ZooKeeper connection string; unset for the embedded single broker.",
    "zookeeper.session.timeout.ms": "ZooKeeper session timeout.",
    "broker.rack": "Rack of the broker, used in rack-aware replication assignment.",
    "log.dirs": "The directories in which the log data is kept.",
    "num.partitions": "The default number of log partitions per topic.",
    "default.replication.factor": "The default replication factor for automatically created topics.",
    "auto.create.topics.enable": "Enable auto creation of topics on the server.",
    "delete.topic.enable": "Enables topic deletion through the admin API.",
    "socket.request.max.bytes": "The maximum number of bytes in a socket request.",
    "log.flush.scheduler.interval.ms": "The frequency with which the log flusher checks whether any log "
                                       "needs to be flushed to disk.",
    "log.flush.offset.checkpoint.interval.ms": "How often the record of the last flush (recovery point) is "
                                               "updated.",
    "log.retention.check.interval.ms": "How often the log cleaner checks for logs eligible for deletion.",
    "log.cleaner.enable": "Enable the log cleaner process on the server.",
    "log.cleaner.threads": "The number of background threads to use for log cleaning.",
    "log.cleaner.backoff.ms": "The amount of time to sleep when there are no logs to clean.",
    "group.initial.rebalance.delay.ms": "How long the group coordinator waits for more members before the "
                                        "first rebalance.",
    "group.min.session.timeout.ms": "The minimum allowed session timeout for registered consumers.",
    "group.max.session.timeout.ms": "The maximum allowed session timeout for registered consumers.",
    "group.max.size": "The maximum number of consumers that a single consumer group can accommodate.",
    "offsets.topic.num.partitions": "The number of partitions for the offset commit topic.",
    "offsets.topic.replication.factor": "The replication factor for the offsets topic.",
    "offsets.topic.segment.bytes": "The offsets topic segment bytes.",
    "offsets.retention.minutes": "How long committed offsets of an empty group are kept.",
    "offsets.retention.check.interval.ms": "Frequency at which to check for stale offsets.",
    "offsets.commit.timeout.ms": "Offset commit will be delayed until all replicas for the offsets topic receive "
                                 "the commit or this timeout is reached (ms).",
    "offset.metadata.max.bytes": "The maximum size for a metadata entry associated with an offset commit.",
    "producer.id.expiration.ms": "How long a producer id is kept without any write from it.",
    "transaction.state.log.num.partitions": "The number of partitions for the transaction topic.",
    "transaction.state.log.replication.factor": "The replication factor for the transaction topic.",
    "transaction.max.timeout.ms": "The maximum allowed timeout for transactions.",
    "transactional.id.expiration.ms": "How long a transactional id is kept without status updates.",
    "replica.lag.time.max.ms": "How long a follower may lag before it is removed from the ISR.",
    "replica.fetch.max.bytes": "The number of bytes of messages to attempt to fetch for each partition.",
    "replica.fetch.wait.max.ms": "The maximum wait time for each fetcher request issued by follower replicas.",
    "replica.fetch.min.bytes": "Minimum bytes expected for each fetch response.",
    "max.incremental.fetch.session.cache.slots": "The maximum number of incremental fetch sessions kept.",
}

#: Types where the Python value does not tell Kafka's type.
_TYPES: dict[str, ConfigType] = {
    "listeners": _T.STRING, "advertised.listeners": _T.STRING, "log.dirs": _T.STRING,
    "zookeeper.connect": _T.STRING, "broker.rack": _T.STRING, "node.id": _T.INT,
    "log.flush.scheduler.interval.ms": _T.LONG, "log.flush.interval.messages": _T.LONG,
}

_FIELD_OF = {str(info.serialization_alias): name for name, info in BrokerConfig.model_fields.items()}


class BrokerConfigError(Exception):
    """A refused broker config change (INVALID_REQUEST in Kafka, see KAFKA-13609)."""


def broker_config_key(name: str) -> ConfigKey:
    dynamic = DYNAMIC_BROKER_CONFIG_KEYS.get(name)
    if dynamic is not None:
        return dynamic
    default = BrokerConfig.model_fields[_FIELD_OF[name]].default
    return ConfigKey(name, _TYPES.get(name) or config_type_of(default, name), _DOCS.get(name, name))


def synonyms_of(name: str) -> tuple[str, ...]:
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


def log_config_for(config: BrokerConfig) -> LogConfig:
    """Topic defaults from the broker's settings, including those not named ``log.*``."""
    return LogConfig.from_broker_defaults(config, {
        "max.message.bytes": config.message_max_bytes,
        "compression.type": config.compression_type,
        "min.insync.replicas": config.min_insync_replicas,
        "unclean.leader.election.enable": config.unclean_leader_election_enable,
    })


def validate_dynamic_configs(configs: Mapping[str, str | None], per_broker: bool) -> dict[str, str]:
    """Kafka's DynamicBrokerConfig.validateConfigs; raises BrokerConfigError."""
    missing = sorted(name for name, value in configs.items() if value is None)
    if missing:
        raise BrokerConfigError(f"Null value not supported for : {', '.join(missing)}")
    not_dynamic = sorted(name for name in configs if name not in DYNAMIC_BROKER_CONFIG_KEYS)
    if not_dynamic:
        raise BrokerConfigError(f"Cannot update these configs dynamically: Set({', '.join(not_dynamic)})")
    try:
        for name, value in configs.items():
            DYNAMIC_BROKER_CONFIG_KEYS[name].parse(value)
    except ConfigValueError as exc:
        raise BrokerConfigError(str(exc)) from None
    return {name: str(value).strip() for name, value in configs.items()}


class DynamicBrokerConfig:
    """The dynamic broker configs of this broker and the cluster default, durable in the data dir.

    Owns the broker's current configuration (Kafka's DynamicBrokerConfig):
    ``config`` is the static properties with the dynamic values on top, and
    ``default_log_config`` the topic defaults derived from it. Both are
    replaced, never mutated, when a dynamic value changes; read them here each
    time rather than keeping a copy.
    """

    def __init__(self, static_config: BrokerConfig, broker_id: int, log_manager: LogManager) -> None:
        self.static_config = static_config
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.path = Path(static_config.log_dirs[0]) / FILE_NAME
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self.config = static_config
        self.default_log_config = log_config_for(static_config)
        self._load()
        self._apply()

    # -- persistence -------------------------------------------------------
    def _load(self) -> None:
        if not self.path.exists():
            return
        doc = json.loads(self.path.read_text())
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unsupported format {doc.get('version')!r}")
        self.per_broker = dict(doc.get("brokers", {}).get(str(self.broker_id), {}))
        self.cluster_default = dict(doc.get("default", {}))
        log.info("[KafkaServer id=%d] dynamic broker configs: %s, cluster default: %s",
                 self.broker_id, self.per_broker, self.cluster_default)

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"version": FORMAT_VERSION, "brokers": {str(self.broker_id): dict(sorted(self.per_broker.items()))},
               "default": dict(sorted(self.cluster_default.items()))}
        write_atomically(self.path, json.dumps(doc, indent=1) + "\n")

    # -- values --------------------------------------------------------------
    def static_props(self) -> dict[str, Any]:
        """Properties set explicitly at start-up (file, env, --override)."""
        config = self.static_config
        return {str(BrokerConfig.model_fields[f].serialization_alias): getattr(config, f)
                for f in config.model_fields_set if f in BrokerConfig.model_fields}

    @staticmethod
    def kafka_defaults() -> dict[str, Any]:
        return {str(info.serialization_alias): info.default for info in BrokerConfig.model_fields.values()
                if info.default is not None}

    def effective_config(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> BrokerConfig:
        update: dict[str, Any] = {}
        for values in (cluster_default, per_broker):  # the more specific one last, so it wins
            for name, text in values.items():
                update[_FIELD_OF[name]] = DYNAMIC_BROKER_CONFIG_KEYS[name].parse(text)
        return self.static_config.model_copy(update=update)

    def _apply(self) -> None:
        """Make the current dynamic values the broker's: its config, topic defaults, open logs."""
        self.config = self.effective_config(self.per_broker, self.cluster_default)
        self.default_log_config = log_config_for(self.config)
        log_manager = self.log_manager
        log_manager.default_config = self.default_log_config
        for (topic, _), opened in list(log_manager.logs.items()):
            opened.config = log_manager.config_for(topic)

    # -- changes (on the append thread) ---------------------------------------
    def check(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """The whole resulting config must still make valid topic defaults."""
        per_broker, default = self._replaced(resource_name, configs)
        try:
            log_config_for(self.effective_config(per_broker, default))
        except ValueError as exc:
            raise BrokerConfigError(str(exc).splitlines()[-1].strip()) from None

    def replace(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of this broker ("<id>") or the cluster default ("")."""
        self.check(resource_name, configs)
        self.per_broker, self.cluster_default = self._replaced(resource_name, configs)
        self._save()
        self._apply()
        log.info("[KafkaServer id=%d] dynamic configs of broker resource %r now %s",
                 self.broker_id, resource_name, dict(configs))

    def current(self, resource_name: str) -> dict[str, str]:
        return dict(self.cluster_default if resource_name == "" else self.per_broker)

    def _replaced(self, resource_name: str, configs: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        if resource_name == "":
            return dict(self.per_broker), dict(configs)
        return dict(configs), dict(self.cluster_default)

    # -- DescribeConfigs -------------------------------------------------------
    def synonyms(self, name: str, per_broker: bool = True) -> list[ConfigSynonym]:
        """Kafka's configSynonyms: the chain of sources, from ``name`` on in its synonym group."""
        group = synonyms_of(name)
        layers: list[tuple[ConfigSource, Mapping[str, Any]]] = []
        if per_broker:
            layers.append((ConfigSource.DYNAMIC_BROKER_CONFIG, self.per_broker))
        layers += [(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self.cluster_default),
                   (ConfigSource.STATIC_BROKER_CONFIG, self.static_props()),
                   (ConfigSource.DEFAULT_CONFIG, self.kafka_defaults())]
        found = [ConfigSynonym(n, format_value(values[n]), int(source))
                 for source, values in layers for n in group if values.get(n) is not None]
        while found and found[0].name != name:
            found.pop(0)
        return found

    def entries(self, resource_name: str, include_synonyms: bool, include_documentation: bool) -> list[ConfigEntry]:
        """All configs of this broker, or the dynamic cluster defaults for the "" resource."""
        per_broker = resource_name != ""
        if per_broker:
            names = sorted(_FIELD_OF)
            values = {n: getattr(self.config, _FIELD_OF[n]) for n in names}
        else:
            names = sorted(self.cluster_default)
            values = {n: DYNAMIC_BROKER_CONFIG_KEYS[n].parse(self.cluster_default[n]) for n in names}
        entries = []
        for name in names:
            key = broker_config_key(name)
            chain = self.synonyms(name, per_broker)
            source = chain[0].source if chain else int(ConfigSource.DEFAULT_CONFIG)
            entries.append(ConfigEntry(
                name, format_value(values[name]), source,
                read_only=name not in DYNAMIC_BROKER_CONFIG_KEYS,
                synonyms=tuple(chain) if include_synonyms else (),
                config_type=int(key.type),
                doc=key.doc if include_documentation else None,
            ))
        return entries
