"""Consumer-group administration on pafka's client: what kafka-consumer-groups.sh needs.

Every group request goes to the group's coordinator (FindCoordinator first,
retried while the coordinator is loading or not yet available). Offsets are
committed as a "simple" consumer (generation -1, no member id), which a
broker accepts only for a group without members, as Kafka's tool requires.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from client.client import KafkaClient
from client.connection import BrokerConnection
from client.errors import KafkaApiError, api_error, check_error
from client.metadata import TopicPartition
from protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, ConsumerProtocolError, assigned_partitions
from protocol.errors import ErrorCode
from protocol.messages import delete_groups as _dg
from protocol.messages import describe_groups as _desc
from protocol.messages import find_coordinator as _fc
from protocol.messages import list_groups as _lg
from protocol.messages import offset_commit as _oc
from protocol.messages import offset_fetch as _of
from protocol.request_constants import CoordinatorType

__all__ = ["GroupAdmin", "GroupDescription", "GroupListing", "MemberDescription", "OffsetAndMetadata", "find_coordinator"]

_RETRIABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)
_RETRY_BACKOFF_S = 0.1


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    metadata: str = ""


class GroupAdmin:
    """Groups of the cluster ``client`` is connected to."""

    def __init__(self, client: KafkaClient, *, timeout: float = 30.0) -> None:
        self.client = client
        self.timeout = timeout

    # -- coordinators -----------------------------------------------------------
    def coordinator(self, group_id: str) -> BrokerConnection:
        return find_coordinator(self.client, group_id, CoordinatorType.GROUP, self.timeout)

    def _request(self, group_id: str, request: object, error_of,  # type: ignore[no-untyped-def]
                 max_version: int | None = None) -> object:
        """Send to the coordinator; retry on coordinator movement or loading."""
        deadline = time.monotonic() + self.timeout
        while True:
            conn = self.coordinator(group_id)
            version = conn.version_for(request.API_KEY, max_version=max_version)  # type: ignore[attr-defined]
            response = conn.request(request, version=version)  # type: ignore[arg-type]
            error = error_of(response)
            if error not in _RETRIABLE or time.monotonic() > deadline:
                return response
            time.sleep(_RETRY_BACKOFF_S)

    # -- listing and describing -------------------------------------------------------
    def list_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        """Groups of every broker (each lists those it coordinates)."""
        cluster = self.client.refresh_metadata([])
        wanted = list(states)
        out: list[GroupListing] = []
        for node_id in sorted(cluster.brokers):
            deadline = time.monotonic() + self.timeout
            while True:
                response = self.client.connection(node_id).request(_lg.ListGroupsRequest(states_filter=wanted))
                assert isinstance(response, _lg.ListGroupsResponse)
                # A coordinator still loading lists only the groups loaded so far: wait for the rest.
                if response.error_code not in _RETRIABLE or time.monotonic() > deadline:
                    break
                time.sleep(_RETRY_BACKOFF_S)
            check_error(response.error_code, api_name="ListGroups")
            out.extend(GroupListing(g.group_id, g.protocol_type, g.group_state) for g in response.groups)
        if wanted:  # a broker too old for the filter lists every group
            lowered = {s.lower() for s in wanted}
            out = [g for g in out if not g.state or g.state.lower() in lowered]
        return sorted(out, key=lambda g: g.group_id)

    def describe_group(self, group_id: str) -> GroupDescription:
        response = self._request(group_id, _desc.DescribeGroupsRequest(groups=[group_id]),
                                 lambda r: r.groups[0].error_code)
        assert isinstance(response, _desc.DescribeGroupsResponse)
        g = response.groups[0]
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return GroupDescription(group_id, "Dead", "", "")
        check_error(g.error_code, api_name="DescribeGroups", message=g.error_message)
        members = []
        for m in g.members:
            try:
                assignment = [TopicPartition(t, p) for t, p in assigned_partitions(bytes(m.member_assignment))] \
                    if g.protocol_type == CONSUMER_PROTOCOL_TYPE else []
            except ConsumerProtocolError:
                assignment = []
            members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                             sorted(assignment)))
        return GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members)

    # -- offsets --------------------------------------------------------------------------
    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
                      ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets (all of the group's when ``partitions`` is None); none → left out."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [_of.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        request = _of.OffsetFetchRequest(group_id=group_id, topics=topics)
        # v1-v7 name one group (v8+ batch them)
        response = self._request(group_id, request, lambda r: r.error_code, max_version=7)
        assert isinstance(response, _of.OffsetFetchResponse)
        check_error(response.error_code, api_name="OffsetFetch")
        out = {}
        for t in response.topics:
            for p in t.partitions:
                check_error(p.error_code, api_name="OffsetFetch", topic=t.name, partition=p.partition_index)
                if p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(p.committed_offset,
                                                                                      p.metadata or "")
        return out

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit as a consumer outside the group (the group must have no members)."""
        by_topic: dict[str, list[_oc.OffsetCommitRequestPartition]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                _oc.OffsetCommitRequestPartition(partition_index=tp.partition, committed_offset=offset,
                                                 committed_metadata=""))
        request = _oc.OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
            topics=[_oc.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        response = self._request(group_id, request,  # topics by name up to v9
                                 lambda r: next((p.error_code for t in r.topics for p in t.partitions), 0),
                                 max_version=9)
        assert isinstance(response, _oc.OffsetCommitResponse)
        for t in response.topics:
            for p in t.partitions:
                check_error(p.error_code, api_name="OffsetCommit", topic=t.name, partition=p.partition_index)

    # -- deletion ----------------------------------------------------------------------------
    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, KafkaApiError | None]:
        results: dict[str, KafkaApiError | None] = {}
        for group_id in group_ids:
            response = self._request(group_id, _dg.DeleteGroupsRequest(groups_names=[group_id]),
                                     lambda r: r.results[0].error_code)
            assert isinstance(response, _dg.DeleteGroupsResponse)
            code = response.results[0].error_code
            results[group_id] = api_error(code, api_name="DeleteGroups") if code else None
        return results


def find_coordinator(client: KafkaClient, key: str, key_type: int, timeout: float) -> BrokerConnection:
    """The connection to the coordinator of a group or transactional id (retried while it is not ready)."""
    deadline = time.monotonic() + timeout
    while True:
        conn = client.bootstrap_connection()
        version = conn.version_for(_fc.API_KEY)
        request = (_fc.FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
                   if version >= 4 else _fc.FindCoordinatorRequest(key=key, key_type=key_type))
        response = conn.request(request, version=version)
        assert isinstance(response, _fc.FindCoordinatorResponse)
        if response.coordinators:
            c = response.coordinators[0]
            error, node_id, message = c.error_code, c.node_id, c.error_message
        else:
            error, node_id, message = response.error_code, response.node_id, response.error_message
        if error == ErrorCode.NO_ERROR:
            return client.connection(node_id)
        if error not in _RETRIABLE or time.monotonic() > deadline:
            raise api_error(error, api_name="FindCoordinator", message=message)
        time.sleep(_RETRY_BACKOFF_S)
