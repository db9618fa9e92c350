"""The console's read side: each screen's data from standard Kafka requests over pafka's blocking client.

Only APIs every Kafka 3.x/4.x broker answers are used (Metadata, DescribeCluster, ApiVersions,
DescribeConfigs, DescribeLogDirs, ListOffsets, Fetch, ListGroups, DescribeGroups, ConsumerGroupDescribe,
OffsetFetch, DescribeAcls, DescribeUserScramCredentials), so the console works against Apache Kafka as
well as pafka. The client is blocking and not thread-safe: the web layer calls one reader from one
worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from client.acl_admin import Acl, AclAdmin
from client.admin import AdminClient, ConfigEntry
from client.client import KafkaClient
from client.consumer_groups import describe_consumer_group
from client.errors import KafkaApiError, KafkaClientError
from client.groups import GroupAdmin
from client.metadata import TopicMetadata, TopicPartition
from console.views import (
    AclRow,
    BrokerRow,
    ClusterView,
    ConfigRow,
    GroupDetail,
    GroupMemberRow,
    GroupRow,
    LagRow,
    MessageRow,
    PartitionRow,
    SecurityView,
    TopicDetail,
    TopicRow,
)
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.config_types import ConfigResourceType
from protocol.errors import ProtocolError
from protocol.messages import consumer_group_heartbeat as _cgh
from protocol.messages import describe_cluster as _dcl
from protocol.messages import describe_log_dirs as _dld
from protocol.messages import fetch as _fetch
from protocol.messages import list_groups as _lg
from protocol.messages import metadata as _metadata
from protocol.messages import produce as _produce
from protocol.records import Record
from protocol.request_constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

#: The APIs whose highest version the cluster screen shows: enough to tell Kafka releases apart.
_SHOWN_APIS = {"Produce": _produce.API_KEY, "Fetch": _fetch.API_KEY, "Metadata": _metadata.API_KEY,
               "ConsumerGroupHeartbeat": _cgh.API_KEY}

#: The browser fetches at most this much per page, whatever the page size asked.
_FETCH_MAX_BYTES = 4 * 1024 * 1024

_MATCH_ANY_ACL = Acl(ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)


def _config_rows(entries: Iterable[ConfigEntry], *, only_set: bool) -> list[ConfigRow]:
    return [ConfigRow(e.name, None if e.is_sensitive else e.value, e.source.name, e.read_only, e.is_sensitive)
            for e in sorted(entries, key=lambda e: e.name) if not (only_set and e.is_default)]


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def message_row(partition: int, record: Record) -> MessageRow:
    """One record as the browser shows it: UTF-8 text (invalid bytes replaced), JSON values pretty-printed."""
    value = _text(record.value)
    is_json = False
    if value is not None and value[:1] in ("{", "["):
        try:
            value = json.dumps(json.loads(value), indent=2, ensure_ascii=False)
            is_json = True
        except ValueError:
            pass
    return MessageRow(partition, record.offset, record.timestamp, _text(record.key), value,
                      [(k, _text(v)) for k, v in record.headers], is_json)


class ClusterReader:
    """Each screen's data, read from the cluster ``client`` is connected to."""

    def __init__(self, client: KafkaClient) -> None:
        self.client = client
        self.admin = AdminClient(client)
        self.groups = GroupAdmin(client, timeout=client.timeout)

    # -- cluster -------------------------------------------------------------------------------------
    def cluster(self) -> ClusterView:
        metadata = self.client.refresh_metadata(None)
        controller_id = self._controller_id(metadata.controller_id)
        leaders: dict[int, int] = {}
        replicas: dict[int, int] = {}
        for topic in metadata.topics.values():
            for p in topic.partitions.values():
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
                for node in p.replicas:
                    replicas[node] = replicas.get(node, 0) + 1
        sizes = self.log_dir_sizes()
        brokers = []
        for node_id, b in sorted(metadata.brokers.items()):
            versions = self.client.connection(node_id).broker_versions
            shown = {name: versions[key][1] for name, key in _SHOWN_APIS.items() if key in versions}
            on_disk = sizes.get(node_id)
            brokers.append(BrokerRow(node_id, b.host, b.port, b.rack, node_id == controller_id, len(versions), shown,
                                     replicas.get(node_id, 0), leaders.get(node_id, 0),
                                     None if on_disk is None else sum(on_disk.values())))
        features = {name: level for name, (_, level) in self.admin.describe_features().finalized_features.items()}
        config_broker = controller_id if controller_id in metadata.brokers else min(metadata.brokers)
        configs = self.admin.describe_configs(ConfigResourceType.BROKER, str(config_broker))
        return ClusterView(metadata.cluster_id, controller_id, brokers, features, config_broker,
                           _config_rows(configs.values(), only_set=True))

    def _controller_id(self, from_metadata: int) -> int:
        """The controller DescribeCluster names (Metadata's is the same on Kafka; a broker without
        DescribeCluster leaves Metadata's)."""
        conn = self.client.bootstrap_connection()
        if _dcl.API_KEY not in conn.broker_versions:
            return from_metadata
        response = conn.request(_dcl.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                            endpoint_type=1, include_fenced_brokers=False))
        assert isinstance(response, _dcl.DescribeClusterResponse)
        return response.controller_id if response.error_code == 0 else from_metadata

    def log_dir_sizes(self) -> dict[int, dict[TopicPartition, int]]:
        """Per broker, each replica's bytes on disk (every log directory summed); brokers that fail are left out."""
        out: dict[int, dict[TopicPartition, int]] = {}
        metadata = self.client.cluster or self.client.refresh_metadata(None)
        for node_id in sorted(metadata.brokers):
            try:
                response = self.client.connection(node_id).request(_dld.DescribeLogDirsRequest(topics=None))
            except KafkaClientError:
                continue
            assert isinstance(response, _dld.DescribeLogDirsResponse)
            if response.error_code:
                continue
            sizes: dict[TopicPartition, int] = {}
            for result in response.results:
                for t in result.topics:
                    for p in t.partitions:
                        if not p.is_future_key:
                            tp = TopicPartition(t.name, p.partition_index)
                            sizes[tp] = sizes.get(tp, 0) + p.partition_size
            out[node_id] = sizes
        return out

    # -- topics ---------------------------------------------------------------------------------------
    def _offsets(self, partitions: list[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """(log start offsets, high watermarks) of ``partitions``."""
        if not partitions:
            return {}, {}
        earliest = self.client.list_offsets(dict.fromkeys(partitions, EARLIEST_TIMESTAMP))
        latest = self.client.list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP))
        return {tp: o.offset for tp, o in earliest.items()}, {tp: o.offset for tp, o in latest.items()}

    @staticmethod
    def _online(topic: TopicMetadata) -> list[TopicPartition]:
        return [TopicPartition(topic.name, p) for p, m in sorted(topic.partitions.items()) if m.leader >= 0]

    def topics(self) -> list[TopicRow]:
        metadata = self.client.refresh_metadata(None)
        named = [t for _, t in sorted(metadata.topics.items()) if not t.error_code]
        start, end = self._offsets([tp for t in named for tp in self._online(t)])
        sizes = self.log_dir_sizes()
        rows = []
        for t in named:
            parts = t.partitions.values()
            leader_sizes = [sizes.get(p.leader, {}).get(TopicPartition(t.name, p.partition)) for p in parts]
            rows.append(TopicRow(
                t.name, t.is_internal, len(t.partitions), max((len(p.replicas) for p in parts), default=0),
                sum(1 for p in parts if len(p.isr) < len(p.replicas)),
                sum(end.get(tp, 0) - start.get(tp, 0) for tp in self._online(t)),
                None if None in leader_sizes else sum(s for s in leader_sizes if s is not None)))
        return rows

    def topic(self, name: str) -> TopicDetail:
        t = self.client.topic_metadata(name, refresh=True)
        start, end = self._offsets(self._online(t))
        sizes = self.log_dir_sizes()
        rows = []
        for p in sorted(t.partitions.values(), key=lambda p: p.partition):
            tp = TopicPartition(name, p.partition)
            rows.append(PartitionRow(p.partition, p.leader, list(p.replicas), list(p.isr), list(p.offline_replicas),
                                     start.get(tp, -1), end.get(tp, -1), sizes.get(p.leader, {}).get(tp)))
        configs = self.admin.describe_configs(ConfigResourceType.TOPIC, name)
        return TopicDetail(name, str(t.topic_id), t.is_internal, rows, _config_rows(configs.values(), only_set=False))

    # -- messages -------------------------------------------------------------------------------------
    def messages(self, topic: str, partition: int, *, offset: int | None = None, timestamp_ms: int | None = None,
                 limit: int = 50) -> list[MessageRow]:
        """Up to ``limit`` records of one partition from ``offset`` (or the first at or after ``timestamp_ms``;
        neither: the last ``limit`` records)."""
        tp = TopicPartition(topic, partition)
        start, end = self._offsets([tp])
        if timestamp_ms is not None:
            found = self.client.offset_for_timestamp(topic, partition, timestamp_ms).offset
            offset = end[tp] if found < 0 else found
        elif offset is None:
            offset = max(end[tp] - limit, start[tp])
        offset = max(offset, start[tp])
        rows: list[MessageRow] = []
        while offset < end[tp] and len(rows) < limit:
            fetched = self.client.fetch(topic, partition, offset, max_wait_ms=0, partition_max_bytes=_FETCH_MAX_BYTES)
            if fetched.next_offset <= offset:
                break
            rows.extend(message_row(partition, r) for r in fetched.records if r.offset >= offset)
            offset = fetched.next_offset
        return rows[:limit]

    # -- consumer groups ------------------------------------------------------------------------------
    def group_list(self) -> list[GroupRow]:
        """Every group of every broker, with its type where the broker lists types (ListGroups v5+)."""
        metadata = self.client.refresh_metadata([])
        rows: list[GroupRow] = []
        for node_id in sorted(metadata.brokers):
            response = self.client.connection(node_id).request(_lg.ListGroupsRequest(states_filter=[], types_filter=[]))
            assert isinstance(response, _lg.ListGroupsResponse)
            rows.extend(GroupRow(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in response.groups
                        if not response.error_code)
        return sorted(rows, key=lambda g: g.group_id)

    def group(self, group_id: str) -> GroupDetail:
        listed = next((g for g in self.group_list() if g.group_id == group_id), None)
        group_type = listed.group_type if listed is not None else ""
        if group_type not in ("", "classic", "consumer"):
            # Share and streams groups have describe APIs of their own and no committed offsets: the listing's
            # state is what the console shows of them.
            return GroupDetail(group_id, group_type, listed.state if listed is not None else "", "", [])
        if group_type == "consumer":
            described = describe_consumer_group(self.groups, group_id)
            state, protocol = described.state, described.assignor_name
            members = [GroupMemberRow(m.member_id, m.instance_id, m.client_id, m.host, list(m.assignment))
                       for m in described.members]
        else:
            classic = self.groups.describe_group(group_id)
            state, protocol = classic.state, classic.protocol
            members = [GroupMemberRow(m.member_id, m.group_instance_id, m.client_id, m.host, list(m.assignment))
                       for m in classic.members]
        return GroupDetail(group_id, group_type, state, protocol, members, self._lag(group_id, members))

    def _lag(self, group_id: str, members: list[GroupMemberRow]) -> list[LagRow]:
        committed = self.groups.fetch_offsets(group_id)
        owner = {tp: m.member_id for m in members for tp in m.assignment}
        partitions = sorted(set(committed) | set(owner))
        # A deleted topic's committed offsets stay until they expire: show them without a log end.
        metadata = self.client.refresh_metadata(sorted({tp.topic for tp in partitions}))
        online = {tp for t in metadata.topics.values() if not t.error_code for tp in self._online(t)}
        _, end = self._offsets([tp for tp in partitions if tp in online])
        return [LagRow(tp.topic, tp.partition, committed[tp].offset if tp in committed else None, end.get(tp, -1),
                       owner.get(tp)) for tp in partitions]

    # -- security -------------------------------------------------------------------------------------
    def security(self) -> SecurityView:
        acls: list[AclRow] = []
        acls_error = scram_error = None
        try:
            acls = [AclRow(a.resource_type.name, a.resource_name, a.pattern_type.name, a.principal, a.host,
                           a.operation.name, a.permission_type.name)
                    for a in AclAdmin(self.client).describe_acls(_MATCH_ANY_ACL)]
        except (KafkaApiError, ProtocolError) as e:
            acls_error = str(e)
        users: dict[str, list[str]] = {}
        try:
            described = self.admin.describe_user_scram_credentials()
            users = {user: [f"{m.mechanism_name} ({iterations})" for m, iterations in creds]
                     for user, creds in sorted(described.items())}
        except (KafkaApiError, ProtocolError) as e:
            scram_error = str(e)
        return SecurityView(acls, acls_error, users, scram_error)
