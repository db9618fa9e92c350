"""OffsetForLeaderEpoch (23): where a leader epoch ends in the leader's log (KIP-101, KIP-320).

A follower asks it before fetching from a leader too old for Fetch's
``last_fetched_epoch`` (below Fetch v12), and a consumer asks it after a leader
change to check that the records it consumed are still in the log: the answer
is the largest epoch at most the one asked for, and the offset where the epoch
after it starts (the log end for the current epoch). A fetcher whose log goes
past that offset truncates there. The lookup is
``ReplicaManager.last_offset_for_leader_epoch``: only the leader answers
(NOT_LEADER_OR_FOLLOWER elsewhere), and ``current_leader_epoch`` (v2+) fences a
caller with older metadata (FENCED_LEADER_EPOCH) or newer (UNKNOWN_LEADER_EPOCH).
v0 answers no epoch; v3 adds the replica id, which Kafka reads only for
authorization.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster, authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 23
MIN_VERSION = 0
MAX_VERSION = 4
#: The response names the epoch it found from v1 on.
LEADER_EPOCH_MIN_VERSION = 1


def _described(ctx: RequestContext, broker: BrokerServices, request: OffsetForLeaderEpochRequest) -> set[str] | None:
    """Kafka's rule: a follower (CLUSTER_ACTION) may ask about every topic, a client about those it may
    DESCRIBE; None when nothing is refused."""
    if broker.authorizer is None or authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION):
        return None
    return authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in request.topics))


def handle(ctx: RequestContext, broker: BrokerServices,
           request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    with_epoch = ctx.api_version >= LEADER_EPOCH_MIN_VERSION
    described = _described(ctx, broker, request)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if described is not None and topic.topic not in described:
                partitions.append(EpochEndOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                 partition=p.partition, end_offset=-1, leader_epoch=-1))
                continue
            # Before v2 the field is absent and decodes as -1: no fencing, as Kafka does.
            error, epoch, end_offset = broker.replica_manager.last_offset_for_leader_epoch(
                (topic.topic, p.partition), p.current_leader_epoch, p.leader_epoch)
            if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                error = broker.cluster_view.unhosted_error(topic.topic, p.partition)
            partitions.append(EpochEndOffset(error_code=error, partition=p.partition, end_offset=end_offset,
                                             leader_epoch=epoch if with_epoch else -1))
        topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
