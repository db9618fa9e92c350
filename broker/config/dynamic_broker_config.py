"""Broker-resource configs: static settings, KIP-226 dynamic overrides, and their description.

A broker's effective setting comes from, most specific first: a dynamic value
for this broker (``ConfigResource(BROKER, "<id>")``), a dynamic cluster-wide
default (``ConfigResource(BROKER, "")``), the static properties it was started
with (file, env, ``--override``), and Kafka's default. Kafka keeps the dynamic
values in ZooKeeper (``/config/brokers/<id>``, ``/config/brokers/<default>``) or
the metadata log; the embedded broker keeps them in
``<log.dirs[0]>/pafka-dynamic-broker-configs.json`` (owner-only: it may hold
passwords), replaced atomically. A broker in a cluster writes them to
ZooKeeper's znodes (``cluster_writer``) and takes every broker's changes from
there (``adopt``), keeping the file as its local copy.

Every config Kafka documents as dynamically updatable is accepted
(``broker.config.dynamic_config_sets``), checked as Kafka checks it
(``broker.config.dynamic_config_validation``), stored and described. The log
defaults behind topic configs apply at once to every open log without a topic
override, and the replication throttled rates to the replica manager's quotas
(through ``add_reconfigurable``); the others are stored and reported with a
documentation saying pafka does not apply them yet. Password values never leave
the broker: described as null with ``is_sensitive``, and hidden in the log.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from broker.config.broker_config import BrokerConfig
from broker.config.config_def import ConfigKey, config_type_of, format_value
from broker.config.dynamic_config_sets import (
    DYNAMIC_CONFIGS,
    REPLICATION_QUOTA_CONFIGS,
    base_name,
    dynamic_config,
    is_custom_config,
    is_sensitive,
    listener_base,
)
from broker.config.dynamic_config_validation import (
    BrokerConfigError,
    check_reconfiguration,
    validate_dynamic_configs,
)
from broker.config.topic_config import ConfigEntry, ConfigSynonym
from protocol.config_types import ConfigSource, ConfigType
from storage.checkpoints import write_atomically
from storage.log_config import LogConfig
from storage.log_manager import LogManager

__all__ = ["BrokerConfigError", "DynamicBrokerConfig", "broker_config_key", "log_config_for",
           "validate_dynamic_configs"]

log = logging.getLogger(__name__)

FILE_NAME = "pafka-dynamic-broker-configs.json"
FORMAT_VERSION = 1
#: A running component told of the broker's current config after each dynamic change.
Reconfigurable = Callable[["DynamicBrokerConfig"], None]

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
    "group.coordinator.rebalance.protocols": "The list of enabled rebalance protocols (classic, consumer, share).",
    "group.consumer.heartbeat.interval.ms": "The heartbeat interval given to the members of a consumer group.",
    "group.consumer.min.heartbeat.interval.ms": "The minimum heartbeat interval for registered consumers.",
    "group.consumer.max.heartbeat.interval.ms": "The maximum heartbeat interval for registered consumers.",
    "group.consumer.session.timeout.ms": "The timeout to detect client failures when using the consumer group "
                                         "protocol.",
    "group.consumer.min.session.timeout.ms": "The minimum allowed session timeout for registered consumers.",
    "group.consumer.max.session.timeout.ms": "The maximum allowed session timeout for registered consumers.",
    "group.consumer.max.size": "The maximum number of consumers that a single consumer group can accommodate.",
    "group.consumer.assignors": "The server side assignors; the first one is the default, used when the consumer "
                                "does not specify an assignor.",
    "group.consumer.migration.policy": "The config that enables converting the non-empty classic group using the "
                                       "consumer embedded protocol to the non-empty consumer group using the "
                                       "consumer group protocol and vice versa; conversions of empty groups in "
                                       "both directions are always enabled regardless of this policy.",
    "group.consumer.regex.refresh.interval.ms": "The maximum time between two refreshes of a consumer "
                                                          "group's regular expressions, which follow the topics "
                                                          "the members may describe.",
    "group.share.heartbeat.interval.ms": "The heartbeat interval given to the members of a share group.",
    "group.share.min.heartbeat.interval.ms": "The minimum heartbeat interval for share group members.",
    "group.share.max.heartbeat.interval.ms": "The maximum heartbeat interval for share group members.",
    "group.share.session.timeout.ms": "The timeout to detect client failures when using the share group protocol.",
    "group.share.min.session.timeout.ms": "The minimum allowed session timeout for share group members.",
    "group.share.max.session.timeout.ms": "The maximum allowed session timeout for share group members.",
    "group.share.max.size": "The maximum number of members that a single share group can accommodate.",
    "group.share.assignors": "The server-side assignors as a list of either names for built-in assignors or full "
                             "class names for custom assignors.",
    "group.share.record.lock.duration.ms": "The record acquisition lock duration in milliseconds for share groups.",
    "group.share.min.record.lock.duration.ms": "The record acquisition lock minimum duration in milliseconds for "
                                               "share groups.",
    "group.share.max.record.lock.duration.ms": "The record acquisition lock maximum duration in milliseconds for "
                                               "share groups.",
    "group.share.delivery.count.limit": "The maximum number of delivery attempts for a record delivered to a share "
                                        "group.",
    "group.share.min.delivery.count.limit": "The minimum value of the delivery count limit of a share group.",
    "group.share.max.delivery.count.limit": "The maximum value of the delivery count limit of a share group.",
    "group.share.partition.max.record.locks": "Share-group record lock limit per share-partition.",
    "group.share.min.partition.max.record.locks": "The minimum value of the record lock limit per share-partition.",
    "group.share.max.partition.max.record.locks": "The maximum value of the record lock limit per share-partition.",
    "group.share.max.share.sessions": "The maximum number of share sessions per broker.",
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
    "telemetry.max.bytes": "The maximum size (after compression if compression is used) of telemetry metrics "
                           "pushed from a client to the broker.",
    "replication.quota.window.num": "The number of samples to retain in memory for replication quotas.",
    "replication.quota.window.size.seconds": "The time span of each sample for replication quotas.",
    "ssl.principal.mapping.rules": "A list of rules for mapping from the distinguished name of a client "
                                   "certificate to a short name (RULE:pattern/replacement/[LU], DEFAULT).",
}

#: Types where the Python value does not tell Kafka's type.
_T = ConfigType
#: Types where the Python value does not tell Kafka's type.
_TYPES: dict[str, ConfigType] = {
    "listeners": _T.STRING, "advertised.listeners": _T.STRING, "log.dirs": _T.STRING,
    "zookeeper.connect": _T.STRING, "broker.rack": _T.STRING, "node.id": _T.INT,
    "log.flush.scheduler.interval.ms": _T.LONG, "log.flush.interval.messages": _T.LONG,
}

_FIELD_OF = {str(info.serialization_alias): name for name, info in BrokerConfig.model_fields.items()}
#: Set only dynamically (no server.properties name): described only once set, as Kafka does.
_DYNAMIC_ONLY = frozenset(c.name for c in REPLICATION_QUOTA_CONFIGS)
HIDDEN = "[hidden]"


def broker_config_key(name: str) -> ConfigKey:
    dynamic = dynamic_config(name)
    if dynamic is not None:
        return dynamic.key
    if is_custom_config(name):  # Kafka cannot tell a custom config's type or documentation
        return ConfigKey(name, ConfigType.UNKNOWN, "")
    default = BrokerConfig.model_fields[_FIELD_OF[name]].default
    return ConfigKey(name, _TYPES.get(name) or config_type_of(default, name), _DOCS.get(name, name))


def synonyms_of(name: str) -> tuple[str, ...]:
    """Kafka's brokerConfigSynonyms: a listener override's synonym is the config it overrides."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    base = base_name(name)
    return (name, base) if base != name else (name,)


def redacted(configs: Mapping[str, Any]) -> dict[str, Any]:
    """For the log: a password's value never appears (Kafka's configMapToRedactedString)."""
    return {name: HIDDEN if is_sensitive(name) else value for name, value in configs.items()}


def log_config_for(config: BrokerConfig) -> LogConfig:
    """Topic defaults from the broker's settings, including those not named ``log.*``."""
    return LogConfig.from_broker_defaults(config, {
        "max.message.bytes": config.message_max_bytes,
        "compression.type": config.compression_type,
        "min.insync.replicas": config.min_insync_replicas,
        "unclean.leader.election.enable": config.unclean_leader_election_enable,
    })


class DynamicBrokerConfig:
    """The dynamic broker configs of this broker and the cluster default, durable in the data dir.

    Owns the broker's current configuration (Kafka's DynamicBrokerConfig):
    ``config`` is the static properties with the applied dynamic values on
    top, and ``default_log_config`` the topic defaults derived from it. Both are
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
        #: A cluster member's: writes a broker resource's dynamic configs to ZooKeeper
        #: (/config/brokers/<id> or <default>), blocking the append thread until it is there.
        self.cluster_writer: Callable[[str, dict[str, str]], None] | None = None
        self._reconfigurables: list[Reconfigurable] = []
        self._load()
        self._apply()

    # -- persistence -------------------------------------------------------
    def _load(self) -> None:
        if not self.path.exists():
            return
        doc = json.loads(self.path.read_text())
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unsupported format {doc.get('version')!r}")
        self.per_broker = self._valid(dict(doc.get("brokers", {}).get(str(self.broker_id), {})), "broker")
        self.cluster_default = self._valid(dict(doc.get("default", {})), "default cluster")
        log.info("[KafkaServer id=%d] dynamic broker configs: %s, cluster default: %s",
                 self.broker_id, redacted(self.per_broker), redacted(self.cluster_default))

    def _valid(self, stored: dict[str, str], level: str) -> dict[str, str]:
        """Kafka's fromPersistentProps: a stored config no longer valid is dropped with an error, not fatal."""
        kept = {}
        for name, value in stored.items():
            try:
                kept.update(validate_dynamic_configs({name: value}, per_broker=level == "broker"))
            except BrokerConfigError as exc:
                log.error("[KafkaServer id=%d] Dynamic %s config %s is ignored: %s",
                          self.broker_id, level, name, exc)
        return kept

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"version": FORMAT_VERSION, "brokers": {str(self.broker_id): dict(sorted(self.per_broker.items()))},
               "default": dict(sorted(self.cluster_default.items()))}
        write_atomically(self.path, json.dumps(doc, indent=1) + "\n", mode=0o600)

    # -- values --------------------------------------------------------------
    def static_props(self) -> dict[str, Any]:
        """Properties set explicitly at start-up (file, env, --override), dynamic ones among the unknown too."""
        config = self.static_config
        props = {str(BrokerConfig.model_fields[f].serialization_alias): getattr(config, f)
                 for f in config.model_fields_set if f in BrokerConfig.model_fields}
        props.update({name: value for name, value in config.unknown_properties.items()
                      if dynamic_config(name) is not None})
        return props

    @staticmethod
    def kafka_defaults() -> dict[str, Any]:
        defaults: dict[str, Any] = {name: c.default for name, c in DYNAMIC_CONFIGS.items() if c.default is not None}
        defaults.update({str(info.serialization_alias): info.default for info in BrokerConfig.model_fields.values()
                         if info.default is not None})
        return defaults

    def effective_config(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> BrokerConfig:
        """The static config with the dynamic values pafka applies on top (the others are only stored)."""
        update: dict[str, Any] = {}
        for values in (cluster_default, per_broker):  # the more specific one last, so it wins
            for name, text in values.items():
                definition = DYNAMIC_CONFIGS.get(name)
                # Applied configs without a BrokerConfig field reach their component as reconfigurables.
                if definition is not None and definition.applied and name in _FIELD_OF:
                    update[_FIELD_OF[name]] = definition.key.parse(text)
        return self.static_config.model_copy(update=update)

    def long_value(self, name: str) -> int:
        """A LONG config's current value (dynamic, static or Kafka's default)."""
        text = self.value_text(name, self.per_broker, self.cluster_default)
        if text is None:
            raise KeyError(f"{name} has no value and no default")
        return int(text)

    def value_text(self, name: str, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> str | None:
        """A config's effective text with these dynamic layers: the first of its synonym chain."""
        for values in (per_broker, cluster_default, self.static_props(), self.kafka_defaults()):
            for synonym in synonyms_of(name):
                if values.get(synonym) is not None:
                    return format_value(values[synonym])
        return None

    def _apply(self) -> None:
        """Make the current dynamic values the broker's: its config, topic defaults, open logs."""
        self.config = self.effective_config(self.per_broker, self.cluster_default)
        self.default_log_config = log_config_for(self.config)
        log_manager = self.log_manager
        log_manager.default_config = self.default_log_config
        for (topic, _), opened in list(log_manager.logs.items()):
            opened.config = log_manager.config_for(topic)
        for reconfigure in self._reconfigurables:
            self._reconfigure(reconfigure)

    def add_reconfigurable(self, reconfigure: Reconfigurable) -> None:
        """Kafka's addReconfigurable: ``reconfigure`` is told now and after every change of the
        dynamic values, on the thread making it (the append thread for the admin APIs)."""
        self._reconfigurables.append(reconfigure)
        self._reconfigure(reconfigure)

    def _reconfigure(self, reconfigure: Reconfigurable) -> None:
        try:
            reconfigure(self)
        except Exception:
            # The values are stored and valid; one component failing to follow must not undo them.
            log.exception("[KafkaServer id=%d] reconfiguration by %r failed", self.broker_id, reconfigure)

    # -- changes (on the append thread) ---------------------------------------
    def check(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """The whole resulting config must pass the reconfigurables' checks and make valid topic defaults."""
        per_broker, default = self._replaced(resource_name, configs)
        advertised = {listener.name for listener in self.static_config.effective_advertised_listeners}
        check_reconfiguration(lambda n: self.value_text(n, self.per_broker, self.cluster_default),
                              lambda n: self.value_text(n, per_broker, default), advertised)
        try:
            log_config_for(self.effective_config(per_broker, default))
        except ValueError as exc:
            raise BrokerConfigError(str(exc).splitlines()[-1].strip()) from None

    def replace(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of this broker ("<id>") or the cluster default ("")."""
        self.check(resource_name, configs)
        if self.cluster_writer is not None:
            self.cluster_writer(resource_name, dict(configs))  # every broker follows it from there
        self.per_broker, self.cluster_default = self._replaced(resource_name, configs)
        self._save()
        self._apply()
        log.info("[KafkaServer id=%d] dynamic configs of broker resource %r now %s",
                 self.broker_id, resource_name, redacted(configs))

    def adopt(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str], save: bool = True) -> bool:
        """A cluster member takes the values ZooKeeper holds (at start-up, and when a change is
        announced); invalid ones are dropped as at load. True when anything changed."""
        new = (self._valid(dict(per_broker), "broker"), self._valid(dict(cluster_default), "default cluster"))
        if new == (self.per_broker, self.cluster_default):
            return False
        self.per_broker, self.cluster_default = new
        if save:
            self._save()
        self._apply()
        log.info("[KafkaServer id=%d] dynamic broker configs from ZooKeeper: %s, cluster default: %s",
                 self.broker_id, redacted(self.per_broker), redacted(self.cluster_default))
        return True

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
        hidden = is_sensitive(name)
        layers: list[tuple[ConfigSource, Mapping[str, Any]]] = []
        if per_broker:
            layers.append((ConfigSource.DYNAMIC_BROKER_CONFIG, self.per_broker))
        layers += [(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self.cluster_default),
                   (ConfigSource.STATIC_BROKER_CONFIG, self.static_props()),
                   (ConfigSource.DEFAULT_CONFIG, self.kafka_defaults())]
        found = [ConfigSynonym(n, None if hidden else format_value(values[n]), int(source))
                 for source, values in layers for n in group if values.get(n) is not None]
        while found and found[0].name != name:
            found.pop(0)
        return found

    def _described_names(self) -> list[str]:
        """Every broker property pafka knows, every dynamic one, and the listener overrides set anywhere."""
        names = set(_FIELD_OF) | (set(DYNAMIC_CONFIGS) - _DYNAMIC_ONLY)
        for values in (self.per_broker, self.cluster_default, self.static_props()):
            names.update(n for n in values
                         if listener_base(n) is not None or n in _DYNAMIC_ONLY or is_custom_config(n))
        return sorted(names)

    def entries(self, resource_name: str, include_synonyms: bool, include_documentation: bool) -> list[ConfigEntry]:
        """All configs of this broker, or the dynamic cluster defaults for the "" resource."""
        per_broker = resource_name != ""
        names = self._described_names() if per_broker else sorted(self.cluster_default)
        entries = []
        for name in names:
            definition = dynamic_config(name)
            key = broker_config_key(name)
            chain = self.synonyms(name, per_broker)
            source = chain[0].source if chain else int(ConfigSource.DEFAULT_CONFIG)
            if not per_broker:
                value: str | None = self.cluster_default[name]
            elif name in _FIELD_OF and (definition is None or definition.applied):
                value = format_value(getattr(self.config, _FIELD_OF[name]))
            else:
                value = chain[0].value if chain else None
            sensitive = is_sensitive(name)  # a custom config too: its type is unknown (Kafka's maybeSensitive)
            doc = definition.doc if definition is not None else (key.doc or None)
            entries.append(ConfigEntry(
                name, None if sensitive else value, source,
                read_only=definition is None,
                sensitive=sensitive,
                synonyms=tuple(chain) if include_synonyms else (),
                config_type=int(key.type),
                doc=doc if include_documentation else None,
            ))
        return entries
