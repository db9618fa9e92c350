"""What each screen of the console shows: plain data, built by :mod:`console.cluster_reader`, rendered by
:mod:`console.pages`. Kept apart from both so that tests check the data without a browser."""

from __future__ import annotations

from dataclasses import dataclass, field

from client.metadata import TopicPartition


@dataclass(frozen=True, slots=True)
class BrokerRow:
    node_id: int
    host: str
    port: int
    rack: str | None
    is_controller: bool
    #: How many request APIs the broker answers, and the highest version of the few that tell releases apart.
    api_count: int
    api_versions: dict[str, int]
    partitions: int
    leaders: int
    #: Bytes of every replica in the broker's log directories (DescribeLogDirs); None: the broker did not say.
    log_dir_bytes: int | None


@dataclass(frozen=True, slots=True)
class ConfigRow:
    name: str
    value: str | None
    source: str
    read_only: bool
    is_sensitive: bool


@dataclass(frozen=True, slots=True)
class ClusterView:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerRow]
    #: Finalized feature levels (metadata.version, group.version...).
    features: dict[str, int]
    #: The configs of ``config_broker`` that are not defaults.
    config_broker: int
    broker_configs: list[ConfigRow]


@dataclass(frozen=True, slots=True)
class TopicRow:
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    under_replicated: int
    messages: int
    size_bytes: int | None


@dataclass(frozen=True, slots=True)
class PartitionRow:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    log_start_offset: int
    high_watermark: int
    #: The leader replica's size on disk (DescribeLogDirs); None: the leader did not say.
    size_bytes: int | None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True, slots=True)
class TopicDetail:
    name: str
    topic_id: str
    internal: bool
    partitions: list[PartitionRow]
    configs: list[ConfigRow]


@dataclass(frozen=True, slots=True)
class MessageRow:
    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: str | None
    headers: list[tuple[str, str | None]]
    #: True when the value parsed as JSON and ``value`` holds it pretty-printed.
    value_is_json: bool


@dataclass(frozen=True, slots=True)
class GroupRow:
    group_id: str
    #: "classic" or "consumer" (ListGroups v5's type); "" when the broker lists no type.
    group_type: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class GroupMemberRow:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class LagRow:
    topic: str
    partition: int
    committed_offset: int | None
    log_end_offset: int
    member_id: str | None

    @property
    def lag(self) -> int | None:
        """Kafka's lag: the log end offset less the committed offset (none committed, or no log end known
        because the partition is offline or gone: unknown)."""
        if self.committed_offset is None or self.log_end_offset < 0:
            return None
        return max(self.log_end_offset - self.committed_offset, 0)


@dataclass(frozen=True, slots=True)
class GroupDetail:
    group_id: str
    group_type: str
    state: str
    protocol: str
    members: list[GroupMemberRow]
    offsets: list[LagRow] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(row.lag or 0 for row in self.offsets)


@dataclass(frozen=True, slots=True)
class AclRow:
    resource_type: str
    resource_name: str | None
    pattern_type: str
    principal: str | None
    host: str | None
    operation: str
    permission_type: str


@dataclass(frozen=True, slots=True)
class SecurityView:
    acls: list[AclRow]
    #: Why the ACLs could not be listed (no authorizer configured...); None when they were.
    acls_error: str | None
    #: user -> its mechanisms with their iterations ("SCRAM-SHA-256 (4096)").
    scram_users: dict[str, list[str]]
    scram_error: str | None
