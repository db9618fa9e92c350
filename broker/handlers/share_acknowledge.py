"""ShareAcknowledge (79): a share consumer acknowledges records it acquired (KIP-932).

Served only when ``group.coordinator.rebalance.protocols`` lists ``share``
(``REBALANCE_PROTOCOL``). The request names the member's share session epoch
(never 0: an acknowledgement does not open a session; -1 closes it after the
acknowledgements, giving back what the member still holds). Each partition's
acknowledgements are durable (written through the Persister) before the
answer. READ on the group and on each topic is needed, as in Kafka. Version 2
adds RENEW acknowledgements (KIP-1222: the records stay acquired under a new
lock) and the lock duration in the answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from broker.security.auth_helper import authorize_group, authorized_names
from coordinator.share.share_partition import AcknowledgementBatch
from coordinator.share.share_partition_manager import SharePartitionManager, ShareTarget
from coordinator.share.share_session_cache import ShareSessionError
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.share_acknowledge import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.metadata_view import BrokerNode
    from broker.request_context import RequestContext

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2
REBALANCE_PROTOCOL = "share"

TopicIdPartition = tuple[uuid.UUID, int]
Acknowledgements = list[tuple[ShareTarget, list[AcknowledgementBatch]]]
#: (error code, message) of a partition.
Outcome = tuple[int, str | None]


class _WireBatch(Protocol):
    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def acknowledge_types(self) -> list[int]: ...


def to_batches(wire: Sequence[_WireBatch]) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in wire]


def resolve(ctx: RequestContext, broker: BrokerServices, wanted: Sequence[tuple[uuid.UUID, int]]
            ) -> tuple[dict[TopicIdPartition, ShareTarget], dict[TopicIdPartition, Outcome]]:
    """The named partitions with their topic names, and those refused: an unknown topic id
    (UNKNOWN_TOPIC_ID) or a topic the principal may not READ (TOPIC_AUTHORIZATION_FAILED)."""
    names: dict[uuid.UUID, str] = {}
    for topic_id, _ in wanted:
        meta = broker.metadata.by_id(topic_id)
        if meta is not None:
            names[topic_id] = meta.name
    readable = authorized_names(ctx, broker, AclOperation.READ, ResourceType.TOPIC, set(names.values()))
    targets: dict[TopicIdPartition, ShareTarget] = {}
    refused: dict[TopicIdPartition, Outcome] = {}
    for topic_id, partition in wanted:
        name = names.get(topic_id)
        if name is None:
            refused[(topic_id, partition)] = (ErrorCode.UNKNOWN_TOPIC_ID, None)
        elif name not in readable:
            refused[(topic_id, partition)] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
        else:
            targets[(topic_id, partition)] = ShareTarget(topic_id, name, partition)
    return targets, refused


async def acknowledge(manager: SharePartitionManager, group_id: str, member_id: str,
                      targets: dict[TopicIdPartition, ShareTarget],
                      batches: dict[TopicIdPartition, list[AcknowledgementBatch]],
                      allow_renew: bool) -> dict[TopicIdPartition, Outcome]:
    acks: Acknowledgements = [(targets[key], batches[key]) for key in batches if key in targets]
    if not acks:
        return {}
    done = await manager.acknowledge(group_id, member_id, acks, allow_renew)
    return {(target.topic_id, target.partition): outcome for target, outcome in done.items()}


def leader_of(broker: BrokerServices, target: ShareTarget | None) -> LeaderIdAndEpoch:
    partition = None if target is None else broker.replica_manager.get_partition(target.topic, target.partition)
    if partition is None:
        return LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    return LeaderIdAndEpoch(leader_id=partition.leader_id, leader_epoch=partition.leader_epoch)


def current_leader(ctx: RequestContext, broker: BrokerServices, target: ShareTarget
                   ) -> tuple[int, int, BrokerNode | None]:
    """(leader id, leader epoch, its endpoint on the request's listener) as the cluster's metadata knows
    them: what a partition answered NOT_LEADER_OR_FOLLOWER tells the client (KIP-951), so it moves on
    without a metadata round trip."""
    view = broker.cluster_view
    for state in view.partition_states(target.topic):
        if state.partition_index == target.partition:
            return state.leader_id, state.leader_epoch, view.leader_node(state.leader_id, ctx.listener_name)
    return -1, -1, None


def _error(code: ErrorCode, message: str | None = None) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(error_code=code, error_message=message)


async def handle(ctx: RequestContext, broker: BrokerServices, request: ShareAcknowledgeRequest
                 ) -> ShareAcknowledgeResponse:
    share = broker.share
    if share is None:
        return _error(ErrorCode.UNSUPPORTED_VERSION, "share groups are not enabled")
    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return _error(ErrorCode.INVALID_REQUEST, "a share acknowledgement names its group and member")
    if not authorize_group(ctx, broker, AclOperation.READ, group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        session = share.sessions.for_acknowledge(group_id, member_id, request.share_session_epoch)
    except ShareSessionError as exc:
        return _error(exc.error_code, exc.message)
    batches = {(t.topic_id, p.partition_index): to_batches(p.acknowledgement_batches)
               for t in request.topics for p in t.partitions}
    targets, refused = resolve(ctx, broker, list(batches))
    allow_renew = ctx.api_version >= 2
    outcomes = {**refused, **await acknowledge(share.manager, group_id, member_id, targets, batches, allow_renew)}
    if session.is_final:
        share.manager.release(group_id, member_id, session.released)
    responses: dict[uuid.UUID, ShareAcknowledgeTopicResponse] = {}
    endpoints: dict[int, NodeEndpoint] = {}
    for (topic_id, partition), (code, message) in outcomes.items():
        target = targets.get((topic_id, partition))
        leader = leader_of(broker, target)
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and target is not None:
            leader_id, leader_epoch, node = current_leader(ctx, broker, target)
            leader = LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
            if node is not None:
                endpoints[node.node_id] = NodeEndpoint(node_id=node.node_id, host=node.host, port=node.port,
                                                       rack=node.rack)
        topic = responses.setdefault(topic_id, ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=[]))
        topic.partitions.append(PartitionData(partition_index=partition, error_code=code, error_message=message,
                                              current_leader=leader))
    lock_ms = share.settings(group_id).partition.record_lock_duration_ms
    return ShareAcknowledgeResponse(acquisition_lock_timeout_ms=lock_ms, responses=list(responses.values()),
                                    node_endpoints=list(endpoints.values()))
