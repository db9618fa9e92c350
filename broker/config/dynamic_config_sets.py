"""Which broker configs Kafka lets an admin change at run time, and how each is checked.

Kafka's "Updating Broker Configs" documentation gives every broker config a
dynamic update mode: read-only (restart needed), per-broker (resource
``"<id>"`` only) or cluster-wide (``"<id>"`` or the cluster default ``""``).
The dynamic ones come in sets, kept here under Kafka's names, types, defaults
and validators:

* the log defaults behind topic configs (``log.retention.ms``...), cluster-wide;
* the log cleaner's (``log.cleaner.threads``...) and the thread pools'
  (``num.io.threads``...), cluster-wide, a thread count moving by at most
  half or double at a time;
* the connection quotas (``max.connections``..., applied by ``broker.network.connection_quotas``)
  and the replication quotas (``leader.replication.throttled.rate``...), cluster-wide;
* the listener configs (``listeners``, SASL, non-keystore SSL), per broker,
  also under a listener prefix ``listener.name.<listener>.<config>``; SASL
  mechanism configs as ``listener.name.<listener>.<mechanism>.<config>``;
* the keystore and truststore configs, per broker and only under a listener
  prefix (Kafka's DynamicSecurityConfigs).

A config is ``applied`` when pafka acts on a change at once; the others are
validated, stored and described like Kafka's, and their documentation says
that pafka does not act on them yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from broker.config.broker_config import (
    DEFAULT_PROTOCOL_MAP,
    SECURITY_PROTOCOLS,
    BrokerConfig,
    Listener,
    parse_connections_per_ip_overrides,
)
from broker.config.config_def import (
    INT_MAX,
    LONG_MAX,
    ConfigKey,
    ConfigValueError,
    Validator,
    at_least,
    between,
    list_of,
    one_of,
)
from broker.config.topic_config import COMPRESSION_TYPES, MIN_SEGMENT_BYTES
from protocol.config_types import ConfigType

_T = ConfigType
NOT_APPLIED = "Accepted and stored; pafka does not apply this setting yet."


@dataclass(frozen=True, slots=True)
class DynamicConfig:
    """One dynamically updatable broker config."""

    key: ConfigKey
    default: str | None = None      #: Kafka's default, as DescribeConfigs shows it
    applied: bool = False           #: pafka acts on a change at once
    per_broker: bool = False        #: refused on the cluster-default resource
    listener: bool = False          #: may be set per listener (``listener.name.<l>.<name>``)
    listener_only: bool = False     #: may only be set per listener (keystores, truststores)

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def sensitive(self) -> bool:
        """Kafka never returns a PASSWORD config's value."""
        return self.key.type is ConfigType.PASSWORD

    @property
    def doc(self) -> str:
        return self.key.doc if self.applied else f"{self.key.doc} {NOT_APPLIED}"


def _csv_map(name: str, value: object) -> None:
    """``host:count,host:count`` with counts >= 0 (max.connections.per.ip.overrides)."""
    try:
        parse_connections_per_ip_overrides(str(value or ""))
    except ValueError as exc:
        raise ConfigValueError(name, value, str(exc)) from None


def _protocol_map(name: str, value: object) -> None:
    for item in str(value or "").split(","):
        listener, sep, protocol = item.strip().partition(":")
        if not sep or not listener or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigValueError(name, value, f"Map entry '{item.strip()}' is not of the form "
                                                "LISTENER:SECURITY_PROTOCOL with a known security protocol")


def _listeners(name: str, value: object) -> None:
    for item in str(value or "").split(","):
        if item.strip():
            try:
                Listener.parse(item)
            except ValueError as exc:
                raise ConfigValueError(name, value, str(exc)) from None


def _define(name: str, type_: ConfigType, default: str | None, doc: str, validator: Validator | None = None,
            **flags: bool) -> DynamicConfig:
    return DynamicConfig(ConfigKey(name, type_, doc, validator), default, **flags)


def _log(name: str, type_: ConfigType, default: str | None, doc: str,
         validator: Validator | None = None) -> DynamicConfig:
    return _define(name, type_, default, doc, validator, applied=True)


LOG_CONFIGS = (
    _log("log.segment.bytes", _T.INT, "1073741824", "The maximum size of a single log file.",
         at_least(MIN_SEGMENT_BYTES)),
    _log("log.roll.ms", _T.LONG, None, "The maximum time before a new log segment is rolled out (ms).", at_least(1)),
    _log("log.roll.hours", _T.INT, "168", "The maximum time before a new log segment is rolled out (hours).",
         at_least(1)),
    _log("log.index.size.max.bytes", _T.INT, "10485760", "The maximum size in bytes of the offset index.",
         at_least(4)),
    _log("log.index.interval.bytes", _T.INT, "4096", "The interval with which an entry is added to the offset index.",
         at_least(0)),
    _log("log.flush.interval.messages", _T.LONG, str(LONG_MAX), "The number of messages accumulated on a log "
         "partition before messages are flushed to disk.", at_least(1)),
    _log("log.flush.interval.ms", _T.LONG, None, "The maximum time a message in any topic is kept in memory before "
         "being flushed to disk."),
    _log("log.retention.ms", _T.LONG, None, "The number of milliseconds to keep a log file before deleting it; "
         "-1 means no time limit.", at_least(-1)),
    _log("log.retention.minutes", _T.INT, None, "The number of minutes to keep a log file before deleting it."),
    _log("log.retention.hours", _T.INT, "168", "The number of hours to keep a log file before deleting it."),
    _log("log.retention.bytes", _T.LONG, "-1", "The maximum size of the log before deleting it."),
    _log("log.segment.delete.delay.ms", _T.LONG, "60000", "The amount of time to wait before deleting a file from "
         "the filesystem.", at_least(0)),
    _log("log.cleanup.policy", _T.LIST, "delete", "The default cleanup policy for segments beyond the retention "
         "window.", list_of("compact", "delete")),
    _log("log.message.timestamp.type", _T.STRING, "CreateTime", "Whether the timestamp in the message is the "
         "create time or the log append time.", one_of("CreateTime", "LogAppendTime")),
    _log("log.cleaner.min.cleanable.ratio", _T.DOUBLE, "0.5", "The minimum ratio of dirty log to total log for a "
         "log to be eligible for cleaning.", between(0, 1)),
    _log("log.cleaner.min.compaction.lag.ms", _T.LONG, "0", "The minimum time a message will remain uncompacted "
         "in the log.", at_least(0)),
    _log("log.cleaner.delete.retention.ms", _T.LONG, "86400000", "The amount of time to retain tombstone markers "
         "for log compacted topics.", at_least(0)),
    _log("message.max.bytes", _T.INT, "1048588", "The largest record batch size allowed by Kafka (after "
         "compression).", at_least(0)),
    _log("compression.type", _T.STRING, "producer", "The final compression type for topics without their own.",
         one_of(*COMPRESSION_TYPES)),
    _log("min.insync.replicas", _T.INT, "1", "The minimum number of replicas that must acknowledge a write with "
         "acks=all.", at_least(1)),
    _log("unclean.leader.election.enable", _T.BOOLEAN, "false", "Whether replicas not in the ISR may be elected "
         "leader as a last resort."),
)

LOG_CLEANER_CONFIGS = (
    _define("log.cleaner.threads", _T.INT, "1", "The number of background threads to use for log cleaning.",
            at_least(0)),
    _define("log.cleaner.io.max.bytes.per.second", _T.DOUBLE, "1.7976931348623157E308", "The log cleaner will be "
            "throttled so that the sum of its read and write i/o will be less than this value on average."),
    _define("log.cleaner.dedupe.buffer.size", _T.LONG, "134217728", "The total memory used for log deduplication "
            "across all cleaner threads."),
    _define("log.cleaner.io.buffer.size", _T.INT, "524288", "The total memory used for log cleaner I/O buffers "
            "across all cleaner threads.", at_least(0)),
    _define("log.cleaner.io.buffer.load.factor", _T.DOUBLE, "0.9", "Log cleaner dedupe buffer load factor: the "
            "percentage full the dedupe buffer can become."),
    _define("log.cleaner.backoff.ms", _T.LONG, "15000", "The amount of time to sleep when there are no logs to "
            "clean.", at_least(0)),
)

#: Kafka's DynamicThreadPool: a change may at most halve or double the current count.
THREAD_POOL_CONFIGS = (
    _define("num.io.threads", _T.INT, "8", "The number of threads that the server uses for processing requests, "
            "which may include disk I/O.", at_least(1)),
    _define("num.replica.fetchers", _T.INT, "1", "Number of fetcher threads used to replicate records from each "
            "source broker."),
    _define("num.recovery.threads.per.data.dir", _T.INT, "2", "The number of threads per data directory to be "
            "used for log recovery at startup and flushing at shutdown.", at_least(1)),
    _define("background.threads", _T.INT, "10", "The number of threads to use for various background processing "
            "tasks.", at_least(1)),
    _define("num.network.threads", _T.INT, "3", "The number of threads that the server uses for receiving "
            "requests from the network and sending responses to the network.", at_least(1), listener=True),
)

#: Kafka's DynamicConnectionQuota and ListenerConnectionQuota: applied by broker.network.connection_quotas.
CONNECTION_QUOTA_CONFIGS = (
    _define("max.connections.per.ip", _T.INT, str(INT_MAX), "The maximum number of connections we allow from each "
            "ip address. This can be set to 0 if there are overrides configured using "
            "max.connections.per.ip.overrides property. New connections from the ip address are dropped if the "
            "limit is reached.", at_least(0), applied=True),
    _define("max.connections.per.ip.overrides", _T.STRING, "", "A comma-separated list of per-ip or hostname "
            "overrides to the default maximum number of connections. An example value is "
            "\"hostName:100,127.0.0.1:200\"", _csv_map, applied=True),
    _define("max.connections", _T.INT, str(INT_MAX), "The maximum number of connections we allow in the broker at "
            "any time. New connections are blocked if either the listener or broker limit is reached; connections "
            "on the inter-broker listener are permitted even if the broker-wide limit is reached, the least "
            "recently used connection on another listener being closed.", at_least(0), listener=True,
            applied=True),
    _define("max.connection.creation.rate", _T.INT, str(INT_MAX), "The maximum connection creation rate we allow "
            "in the broker at any time. New connections are throttled if either the listener or the broker limit "
            "is reached; the inter-broker listener only by its own listener limit.", at_least(0), listener=True,
            applied=True),
)

#: DynamicConfig.Broker: set only dynamically (no server.properties name), default Long.MAX.
#: The three rates reach the replica manager's quotas (replication.replication_quota_manager).
REPLICATION_QUOTA_CONFIGS = (
    _define("leader.replication.throttled.rate", _T.LONG, str(LONG_MAX), "The upper bound (bytes/sec) on "
            "replication traffic for leaders enumerated in leader.replication.throttled.replicas (for each "
            "topic).", at_least(0), applied=True),
    _define("follower.replication.throttled.rate", _T.LONG, str(LONG_MAX), "The upper bound (bytes/sec) on "
            "replication traffic for followers enumerated in follower.replication.throttled.replicas (for each "
            "topic).", at_least(0), applied=True),
    _define("replica.alter.log.dirs.io.max.bytes.per.second", _T.LONG, str(LONG_MAX), "The upper bound "
            "(bytes/sec) on disk IO used for moving replicas between log directories on the same broker.",
            at_least(0), applied=True),
)


def _listener(name: str, type_: ConfigType, default: str | None, doc: str,
              validator: Validator | None = None) -> DynamicConfig:
    return _define(name, type_, default, doc, validator, per_broker=True, listener=True)


#: Kafka's DynamicListenerConfig, less the cluster-level connection limits above.
LISTENER_CONFIGS = (
    _listener("listeners", _T.STRING, "PLAINTEXT://:9092", "Listener List: comma-separated list of URIs we will "
              "listen on and the listener names.", _listeners),
    _listener("listener.security.protocol.map", _T.STRING, DEFAULT_PROTOCOL_MAP, "Map between listener names and "
              "security protocols.", _protocol_map),
    _listener("principal.builder.class", _T.CLASS,
              "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
              "The fully qualified name of a class that implements the KafkaPrincipalBuilder interface."),
    _listener("ssl.protocol", _T.STRING, "TLSv1.3", "The SSL protocol used to generate the SSLContext."),
    _listener("ssl.provider", _T.STRING, None, "The name of the security provider used for SSL connections."),
    _listener("ssl.cipher.suites", _T.LIST, "", "A list of cipher suites."),
    _listener("ssl.enabled.protocols", _T.LIST, "TLSv1.2,TLSv1.3", "The list of protocols enabled for SSL "
              "connections."),
    _listener("ssl.keymanager.algorithm", _T.STRING, "SunX509", "The algorithm used by key manager factory for SSL "
              "connections."),
    _listener("ssl.trustmanager.algorithm", _T.STRING, "PKIX", "The algorithm used by trust manager factory for "
              "SSL connections."),
    _listener("ssl.endpoint.identification.algorithm", _T.STRING, "https", "The endpoint identification algorithm "
              "to validate server hostname using server certificate."),
    _listener("ssl.secure.random.implementation", _T.STRING, None, "The SecureRandom PRNG implementation to use "
              "for SSL cryptography operations."),
    _listener("ssl.client.auth", _T.STRING, "none", "Whether the broker requests client authentication: "
              "required, requested or none.", one_of("required", "requested", "none")),
    _listener("ssl.engine.factory.class", _T.CLASS, None, "The class of type "
              "org.apache.kafka.common.security.auth.SslEngineFactory to provide SSLEngine objects."),
    _listener("sasl.mechanism.inter.broker.protocol", _T.STRING, "GSSAPI", "SASL mechanism used for inter-broker "
              "communication."),
    _listener("sasl.jaas.config", _T.PASSWORD, None, "JAAS login context parameters for SASL connections in the "
              "format used by JAAS configuration files."),
    _listener("sasl.enabled.mechanisms", _T.LIST, "GSSAPI", "The list of SASL mechanisms enabled in the Kafka "
              "server."),
    _listener("sasl.kerberos.service.name", _T.STRING, None, "The Kerberos principal name that Kafka runs as."),
    _listener("sasl.kerberos.kinit.cmd", _T.STRING, "/usr/bin/kinit", "Kerberos kinit command path."),
    _listener("sasl.kerberos.ticket.renew.window.factor", _T.DOUBLE, "0.8", "Login thread will sleep until the "
              "specified window factor of time from last refresh to ticket's expiry has been reached."),
    _listener("sasl.kerberos.ticket.renew.jitter", _T.DOUBLE, "0.05", "Percentage of random jitter added to the "
              "renewal time."),
    _listener("sasl.kerberos.min.time.before.relogin", _T.LONG, "60000", "Login thread sleep time between refresh "
              "attempts."),
    _listener("sasl.kerberos.principal.to.local.rules", _T.LIST, "DEFAULT", "A list of rules for mapping from "
              "principal names to short names."),
    _listener("sasl.login.refresh.window.factor", _T.DOUBLE, "0.8", "Login refresh thread will sleep until the "
              "specified window factor relative to the credential's lifetime has been reached.", between(0.5, 1.0)),
    _listener("sasl.login.refresh.window.jitter", _T.DOUBLE, "0.05", "The maximum amount of random jitter relative "
              "to the credential's lifetime that is added to the login refresh thread's sleep time.",
              between(0.0, 0.25)),
    _listener("sasl.login.refresh.min.period.seconds", _T.SHORT, "60", "The desired minimum time for the login "
              "refresh thread to wait before refreshing a credential, in seconds.", between(0, 900)),
    _listener("sasl.login.refresh.buffer.seconds", _T.SHORT, "300", "The amount of buffer time before credential "
              "expiration to maintain when refreshing a credential, in seconds.", between(0, 3600)),
)


def _store(name: str, type_: ConfigType, default: str | None, doc: str) -> DynamicConfig:
    return _define(name, type_, default, doc, None, per_broker=True, listener=True, listener_only=True)


#: Kafka's DynamicSecurityConfigs (SslConfigs.RECONFIGURABLE_CONFIGS): per listener only.
SECURITY_CONFIGS = (
    _store("ssl.keystore.type", _T.STRING, "JKS", "The file format of the key store file."),
    _store("ssl.keystore.location", _T.STRING, None, "The location of the key store file."),
    _store("ssl.keystore.password", _T.PASSWORD, None, "The store password for the key store file."),
    _store("ssl.key.password", _T.PASSWORD, None, "The password of the private key in the key store file."),
    _store("ssl.keystore.certificate.chain", _T.PASSWORD, None, "Certificate chain in the format specified by "
           "'ssl.keystore.type'."),
    _store("ssl.keystore.key", _T.PASSWORD, None, "Private key in the format specified by 'ssl.keystore.type'."),
    _store("ssl.truststore.type", _T.STRING, "JKS", "The file format of the trust store file."),
    _store("ssl.truststore.location", _T.STRING, None, "The location of the trust store file."),
    _store("ssl.truststore.password", _T.PASSWORD, None, "The password for the trust store file."),
    _store("ssl.truststore.certificates", _T.PASSWORD, None, "Trusted certificates in the format specified by "
           "'ssl.truststore.type'."),
)

OTHER_CONFIGS = (
    _define("metric.reporters", _T.LIST, "", "A list of classes to use as metrics reporters."),
    _define("producer.id.expiration.ms", _T.INT, "86400000", "The time in ms that a topic partition leader will "
            "wait before expiring producer IDs.", at_least(1)),
    _define("transaction.partition.verification.enable", _T.BOOLEAN, "true", "Enable verification that checks that "
            "the partition has been added to the transaction before writing transactional records."),
)

#: Listener mechanism configs: ``listener.name.<listener>.<mechanism>.<config>`` (KIP-226).
MECHANISM_CONFIGS: dict[str, DynamicConfig] = {c.name: c for c in (
    _listener("sasl.jaas.config", _T.PASSWORD, None, "JAAS login context parameters for this listener and SASL "
              "mechanism."),
    _listener("sasl.login.callback.handler.class", _T.CLASS, None, "The class of a SASL login callback handler."),
    _listener("sasl.login.class", _T.CLASS, None, "The class of a Login implementation."),
    _listener("sasl.server.callback.handler.class", _T.CLASS, None, "The class of a SASL server callback handler."),
    _listener("connections.max.reauth.ms", _T.LONG, "0", "The maximum lifetime of an authenticated session before "
              "re-authentication (0: never)."),
)}

DYNAMIC_CONFIGS: dict[str, DynamicConfig] = {c.name: c for group in (
    LOG_CONFIGS, LOG_CLEANER_CONFIGS, THREAD_POOL_CONFIGS, CONNECTION_QUOTA_CONFIGS, REPLICATION_QUOTA_CONFIGS,
    LISTENER_CONFIGS, SECURITY_CONFIGS, OTHER_CONFIGS) for c in group}

THREAD_COUNT_CONFIGS = frozenset(c.name for c in THREAD_POOL_CONFIGS)
_LISTENER_PREFIX = re.compile(r"listener\.name\.([^.]*)\.(.+)")


def listener_base(name: str) -> str | None:
    """``listener.name.<l>.<config>`` -> ``<config>`` (with any mechanism prefix), else None."""
    match = _LISTENER_PREFIX.fullmatch(name)
    return match.group(2) if match else None


def dynamic_config(name: str) -> DynamicConfig | None:
    """The definition behind a name, a listener-prefixed one included; None if not dynamic."""
    found = DYNAMIC_CONFIGS.get(name)
    if found is not None:
        return found
    base = listener_base(name)
    if base is None:
        return None
    target = DYNAMIC_CONFIGS.get(base)
    if target is None:
        mechanism, _, config = base.partition(".")
        target = MECHANISM_CONFIGS.get(config) if mechanism else None
    if target is None or not target.listener:
        return None
    doc = f"Listener override of {target.name}: {target.key.doc}"
    # A listener override of a cluster-level limit stays cluster-wide (Kafka's ClusterLevelListenerConfigs).
    return replace(target, key=replace(target.key, name=name, doc=doc), listener_only=False)


def base_name(name: str) -> str:
    """The config a listener-prefixed name overrides (its first synonym after itself)."""
    base = listener_base(name)
    if base is None or dynamic_config(name) is None:
        return name
    return base if base in DYNAMIC_CONFIGS else base.partition(".")[2]


def _property_names() -> frozenset[str]:
    names: set[str] = set()
    for info in BrokerConfig.model_fields.values():
        names.add(str(info.serialization_alias))
        choices = getattr(info.validation_alias, "choices", ())  # AliasChoices: every accepted spelling
        names.update(choice for choice in choices if isinstance(choice, str))
    return frozenset(names)


#: Every property name of the broker's static configuration (server.properties), synonyms included.
STATIC_BROKER_PROPERTIES = _property_names()


def is_custom_config(name: str) -> bool:
    """A name that is no broker config at all: Kafka keeps it as a custom config (one a plugin
    may read) instead of refusing it, whereas a known config that is not dynamic is refused.
    A listener override of a known config that has no listener form is refused likewise."""
    if dynamic_config(name) is not None:
        return False
    base = listener_base(name)
    known = STATIC_BROKER_PROPERTIES | DYNAMIC_CONFIGS.keys()
    return name not in known and (base is None or base not in known)


def is_sensitive(name: str) -> bool:
    """Passwords; and, as Kafka (KafkaConfig.maybeSensitive), a custom config, whose type it cannot know."""
    found = dynamic_config(name)
    return found.sensitive if found is not None else is_custom_config(name)
