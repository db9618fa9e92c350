"""Kafka 3.9's ZooKeeper layout: every znode path pafka uses and its JSON, as Kafka writes it.

Pure: bytes in, objects out (no kazoo, no I/O). The JSON is compact (no spaces),
UTF-8, with the keys, value types and versions of Kafka 3.9's ZooKeeper mode
(``kafka.zk.ZkData``), so operators' tools that read ZooKeeper keep working:
some numbers are strings on purpose (``timestamp``, ``block_start``, the
cluster id's ``version``), exactly as Kafka writes them. Key order follows what
a Kafka broker produces where it is deterministic; readers never depend on it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

#: No leader (LeaderAndIsr.NoLeader).
LEADER_NONE = -1
#: /controller_epoch's first value and that znode's version when first created (KafkaController).
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0
#: A conditional write's "any version" (ZkVersion.MatchAnyVersion).
MATCH_ANY_VERSION = -1
#: LeaderRecoveryState: RECOVERED (0) is never written; RECOVERING (1) after an unclean election.
LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1
#: Uuid.ZERO_UUID: a topic registered without an id (before Kafka 2.8).
ZERO_UUID = uuid.UUID(int=0)

# --- paths ---------------------------------------------------------------------------------------
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CONFIG_PATH = "/config"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
TOPICS_PATH = "/brokers/topics"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONSUMERS_PATH = "/consumers"
#: ACLs (Kafka's ZkAclStore): literal patterns under /kafka-acl/<ResourceType>/<name>, prefixed ones
#: under /kafka-acl-extended/prefixed/<ResourceType>/<name>, each store with its change notifications.
LITERAL_ACL_PATH = "/kafka-acl"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
PREFIXED_ACL_PATH = "/kafka-acl-extended/prefixed"
PREFIXED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"

#: Config entity types with a /config/<type> znode (ConfigType.ALL).
CONFIG_TYPE_TOPIC = "topics"
CONFIG_TYPE_CLIENT = "clients"
CONFIG_TYPE_USER = "users"
CONFIG_TYPE_BROKER = "brokers"
CONFIG_TYPE_IP = "ips"
#: Groups' dynamic configs (resource type GROUP): /config/groups/<sanitized group id>.
CONFIG_TYPE_GROUP = "groups"
#: Client-metrics subscriptions (resource type CLIENT_METRICS): /config/client-metrics/<sanitized name>.
CONFIG_TYPE_CLIENT_METRICS = "client-metrics"
CONFIG_TYPES = (CONFIG_TYPE_TOPIC, CONFIG_TYPE_CLIENT, CONFIG_TYPE_USER, CONFIG_TYPE_BROKER, CONFIG_TYPE_IP)
#: The entity name of cluster-wide defaults (/config/brokers/<default>).
DEFAULT_ENTITY = "<default>"

#: The persistent paths a Kafka broker makes sure exist at start-up (ZkData.PersistentZkPaths).
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(f"{CONFIG_PATH}/{entity_type}" for entity_type in CONFIG_TYPES),
)


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{partition}"


def topic_partition_state_path(topic: str, partition: int) -> str:
    return f"{topic_partition_path(topic, partition)}/state"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


# --- JSON helpers --------------------------------------------------------------------------------


class ZkDataError(ValueError):
    """A znode's content is not what Kafka writes there."""


def _dump(value: Mapping[str, Any]) -> bytes:
    # Jackson's compact form: no spaces, UTF-8 text (not \\u escapes).
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load(data: bytes | None, what: str) -> dict[str, Any]:
    if not data:
        raise ZkDataError(f"empty {what} znode")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ZkDataError(f"failed to parse the {what} json {data!r}") from e
    if not isinstance(value, dict):
        raise ZkDataError(f"the {what} json is not an object: {data!r}")
    return value


def _int(value: object, what: str) -> int:
    # Kafka writes some numbers as JSON strings ("timestamp", "block_start"): accept both forms.
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ZkDataError(f"{what}: not an integer: {value!r}")
    try:
        return int(value)
    except ValueError as e:
        raise ZkDataError(f"{what}: not an integer: {value!r}") from e


def _int_list(value: object, what: str) -> list[int]:
    if not isinstance(value, list):
        raise ZkDataError(f"{what}: not a list: {value!r}")
    return [_int(v, what) for v in value]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def uuid_to_kafka(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding (22 characters)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_kafka(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as e:
        raise ZkDataError(f"not a Kafka topic id: {text!r}") from e
    if len(raw) != 16:
        raise ZkDataError(f"not a Kafka topic id (16 bytes): {text!r}")
    return uuid.UUID(bytes=raw)


# --- /controller and /controller_epoch -----------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int | None = None, kraft_controller_epoch: int = -1) -> bytes:
    """/controller: version 2 with the KRaft migration's epoch (-1: a ZooKeeper controller)."""
    return _dump({
        "version": 2,
        "brokerid": broker_id,
        "timestamp": str(now_ms() if timestamp_ms is None else timestamp_ms),
        "kraftControllerEpoch": kraft_controller_epoch,
    })


def decode_controller(data: bytes) -> int:
    """The controller's broker id."""
    return _int(_load(data, "controller").get("brokerid"), "controller brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    """/controller_epoch holds the epoch as plain decimal text, not JSON."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ZkDataError(f"not a controller epoch: {data!r}") from e


# --- /brokers/ids/N ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EndPoint:
    host: str
    port: int
    listener_name: str
    security_protocol: str

    @property
    def connection_string(self) -> str:
        """``LISTENER://host:port`` (an IPv6 host in brackets), as in the broker's ``endpoints``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclasses.dataclass(frozen=True)
class BrokerInfo:
    id: int
    endpoints: list[EndPoint]
    rack: str | None
    #: The broker epoch: the czxid of its /brokers/ids/N znode (-1 until registered).
    epoch: int = -1

    def endpoint(self, listener_name: str) -> EndPoint | None:
        for endpoint in self.endpoints:
            if endpoint.listener_name == listener_name:
                return endpoint
        return None


#: The registration JSON version a Kafka 3.9 broker writes (IBP >= 2.7: with "features").
BROKER_INFO_VERSION = 5

_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def parse_endpoint(connection_string: str, protocol_map: Mapping[str, str] | None) -> EndPoint:
    """One ``endpoints`` entry; without a listener map the listener name is the security protocol."""
    match = _ENDPOINT.match(connection_string)
    if match is None:
        raise ZkDataError(f"unable to parse {connection_string!r} to a broker endpoint")
    listener, host, port = match.group(1), match.group(2), int(match.group(3))
    if protocol_map is None:
        protocol = listener.upper()
    elif listener in protocol_map:
        protocol = protocol_map[listener]
    else:
        raise ZkDataError(f"no security protocol defined for listener {listener}")
    return EndPoint(host, port, listener, protocol)


def encode_broker_info(info: BrokerInfo, timestamp_ms: int | None = None, jmx_port: int = -1) -> bytes:
    """/brokers/ids/N, version 5: top-level host/port of the first PLAINTEXT endpoint (null/-1 without one)."""
    plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
    value: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {e.listener_name: e.security_protocol for e in info.endpoints},
        "endpoints": [e.connection_string for e in info.endpoints],
    }
    if info.rack is not None:
        value["rack"] = info.rack
    value.update({
        "jmx_port": jmx_port,
        "port": plaintext.port if plaintext is not None else -1,
        "host": plaintext.host if plaintext is not None else None,
        "version": BROKER_INFO_VERSION,
        "timestamp": str(now_ms() if timestamp_ms is None else timestamp_ms),
    })
    return _dump(value)


def decode_broker_info(broker_id: int, data: bytes, epoch: int = -1) -> BrokerInfo:
    """A broker registration of any version Kafka wrote (1: host/port only; 2+: endpoints)."""
    value = _load(data, f"broker {broker_id} registration")
    version = _int(value.get("version"), "broker registration version")
    if version < 1:
        raise ZkDataError(f"unsupported version of broker registration: {data!r}")
    if version == 1:
        if not isinstance(value.get("host"), str):
            raise ZkDataError(f"broker registration without a host: {data!r}")
        endpoints = [EndPoint(value["host"], _int(value.get("port"), "port"), "PLAINTEXT", "PLAINTEXT")]
    else:
        raw_map = value.get("listener_security_protocol_map")
        if raw_map is not None and not isinstance(raw_map, dict):
            raise ZkDataError(f"listener_security_protocol_map is not an object: {data!r}")
        listeners = value.get("endpoints")
        if not isinstance(listeners, list):
            raise ZkDataError(f"broker registration without endpoints: {data!r}")
        protocol_map = {str(k): str(v) for k, v in raw_map.items()} if raw_map is not None else None
        endpoints = [parse_endpoint(str(listener), protocol_map) for listener in listeners]
    rack = value.get("rack")
    return BrokerInfo(broker_id, endpoints, str(rack) if rack is not None else None, epoch)


# --- /brokers/topics/T ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TopicAssignment:
    topic_id: uuid.UUID
    #: partition -> replicas (the preferred leader first)
    partitions: dict[int, list[int]]
    #: partition -> replicas being added / removed by a reassignment (only partitions that have some)
    adding: dict[int, list[int]] = dataclasses.field(default_factory=dict)
    removing: dict[int, list[int]] = dataclasses.field(default_factory=dict)


#: The topic znode's JSON version in Kafka 3.x (with topic_id).
TOPIC_ASSIGNMENT_VERSION = 3


def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    def by_partition(replicas: Mapping[int, list[int]], non_empty: bool = False) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted(replicas.items()) if r or not non_empty}

    value: dict[str, Any] = {"partitions": by_partition(assignment.partitions)}
    if assignment.topic_id != ZERO_UUID:
        value["topic_id"] = uuid_to_kafka(assignment.topic_id)
    value["adding_replicas"] = by_partition(assignment.adding, non_empty=True)
    value["removing_replicas"] = by_partition(assignment.removing, non_empty=True)
    value["version"] = TOPIC_ASSIGNMENT_VERSION
    return _dump(value)


def decode_topic_assignment(data: bytes | None) -> TopicAssignment:
    """A topic znode of any version (no topic_id before version 3: ZERO_UUID)."""
    if not data:
        return TopicAssignment(ZERO_UUID, {}, {}, {})
    value = _load(data, "topic assignment")

    def by_partition(key: str) -> dict[int, list[int]]:
        raw = value.get(key) or {}
        if not isinstance(raw, dict):
            raise ZkDataError(f"{key} is not an object: {data!r}")
        return {_int(p, key): _int_list(r, key) for p, r in raw.items()}

    topic_id = value.get("topic_id")
    return TopicAssignment(
        uuid_from_kafka(str(topic_id)) if topic_id is not None else ZERO_UUID,
        by_partition("partitions"),
        {p: r for p, r in by_partition("adding_replicas").items() if r},
        {p: r for p, r in by_partition("removing_replicas").items() if r},
    )


# --- /brokers/topics/T/partitions/P/state ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: list[int]
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    #: The state znode's version (Kafka's partition epoch in ZooKeeper mode).
    partition_epoch: int = 0

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        return dataclasses.replace(self, partition_epoch=partition_epoch)

    def new_leader_and_isr(self, leader: int, isr: list[int]) -> LeaderAndIsr:
        """A leader change: the leader epoch goes up by one (Kafka's LeaderAndIsr.newLeaderAndIsr)."""
        return dataclasses.replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=list(isr))


@dataclasses.dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    """Version 1; ``leader_recovery_state`` only while a partition recovers from an unclean election."""
    lai = state.leader_and_isr
    value: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": lai.leader,
        "version": 1,
        "leader_epoch": lai.leader_epoch,
        "isr": list(lai.isr),
    }
    if lai.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
        value["leader_recovery_state"] = lai.leader_recovery_state
    return _dump(value)


def decode_partition_state(data: bytes, zk_version: int) -> LeaderIsrAndControllerEpoch:
    """The partition epoch comes from the znode's version, not from the JSON."""
    value = _load(data, "partition state")
    lai = LeaderAndIsr(
        leader=_int(value.get("leader"), "leader"),
        leader_epoch=_int(value.get("leader_epoch"), "leader_epoch"),
        isr=_int_list(value.get("isr"), "isr"),
        leader_recovery_state=_int(value.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED), "leader_recovery_state"),
        partition_epoch=zk_version,
    )
    return LeaderIsrAndControllerEpoch(lai, _int(value.get("controller_epoch"), "controller_epoch"))


# --- /config/<type>/<name> and /config/changes -----------------------------------------------------


def encode_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(config)})


def decode_config(data: bytes | None) -> dict[str, str]:
    """An entity's config overrides; an absent or empty znode means none."""
    if not data:
        return {}
    config = _load(data, "config").get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ZkDataError(f"config is not an object: {data!r}")
    return {str(k): str(v) for k, v in config.items()}


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user (principal) name as a znode name, URL-encoded as Java's
    URLEncoder does, with '*' as %2A and a space as %20."""
    return urllib.parse.quote(name, safe="*").replace("*", "%2A").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def config_entity_change_path(entity_type: str, entity_name: str) -> str:
    """The sanitized entity path a change notification names: ``topics/T``, ``brokers/<default>``."""
    return f"{entity_type}/{entity_name}"


def encode_config_change_notification(entity_path: str) -> bytes:
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change_notification(data: bytes) -> str:
    """The entity path (version 2); version 1's entity_type/entity_name pair as ``type/name``."""
    value = _load(data, "config change notification")
    if "entity_path" in value:
        return str(value["entity_path"])
    if "entity_type" in value and "entity_name" in value:
        return f"{value['entity_type']}/{value['entity_name']}"
    raise ZkDataError(f"config change notification without an entity: {data!r}")


# --- /isr_change_notification and /log_dir_event_notification ------------------------------------


def encode_isr_change_notification(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change_notification(data: bytes) -> set[tuple[str, int]]:
    raw = _load(data, "isr change notification").get("partitions")
    if not isinstance(raw, list):
        raise ZkDataError(f"isr change notification without partitions: {data!r}")
    return {_topic_partition(p, data) for p in raw}


def _topic_partition(entry: object, data: bytes) -> tuple[str, int]:
    if not isinstance(entry, dict) or "topic" not in entry or "partition" not in entry:
        raise ZkDataError(f"not a topic partition: {entry!r} in {data!r}")
    return str(entry["topic"]), _int(entry["partition"], "partition")


def encode_log_dir_event(broker_id: int) -> bytes:
    """A log directory failure (event 1) on a broker."""
    return _dump({"version": 1, "broker": broker_id, "event": 1})


def decode_log_dir_event(data: bytes) -> int:
    return _int(_load(data, "log dir event").get("broker"), "broker")


# --- /admin/preferred_replica_election --------------------------------------------------------------


def encode_preferred_replica_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_preferred_replica_election(data: bytes) -> set[tuple[str, int]]:
    return decode_isr_change_notification(data)


# --- /cluster/id ----------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    """Note the string "1": Kafka writes this version as text."""
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    cluster_id = _load(data, "cluster id").get("id")
    if not isinstance(cluster_id, str):
        raise ZkDataError(f"failed to parse the cluster id json {data!r}")
    return cluster_id


# --- /latest_producer_id_block --------------------------------------------------------------------

#: Producer ids a broker claims at a time (ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
PRODUCER_ID_BLOCK_SIZE = 1000
_LONG_MAX = (1 << 63) - 1


@dataclasses.dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    first_producer_id: int
    last_producer_id: int  # inclusive

    @property
    def size(self) -> int:
        return self.last_producer_id - self.first_producer_id + 1

    def next_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """The block after this one, claimed by ``broker_id``."""
        if self.last_producer_id > _LONG_MAX - size:
            raise ZkDataError(f"exhausted all producer ids: the last block ends at {self.last_producer_id}")
        return ProducerIdBlock(broker_id, self.last_producer_id + 1, self.last_producer_id + size)


def first_producer_id_block(broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
    return ProducerIdBlock(broker_id, 0, size - 1)


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    """The ids are strings in Kafka's JSON (a long would lose precision in some readers)."""
    return _dump({
        "version": 1,
        "broker": block.broker_id,
        "block_start": str(block.first_producer_id),
        "block_end": str(block.last_producer_id),
    })


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    value = _load(data, "producer id block")
    return ProducerIdBlock(
        _int(value.get("broker"), "broker"),
        _int(value.get("block_start"), "block_start"),
        _int(value.get("block_end"), "block_end"),
    )
