"""AlterReplicaLogDirs (34): move partitions' replicas on this broker to other log dirs (KIP-113).

Each partition names its target dir (an absolute path of ``log.dirs``); the answer per
partition is NONE when the move is accepted (or the replica is already there),
LOG_DIR_NOT_FOUND for a dir that is none of ``log.dirs``, KAFKA_STORAGE_ERROR when a
log dir is offline, REPLICA_NOT_AVAILABLE for a partition of a known topic not hosted
here (the target is remembered for when it is), UNKNOWN_TOPIC_OR_PARTITION for an
unknown one. The copy runs in the background (``replication.replica_alter_log_dirs``);
DescribeLogDirs shows its progress. Needs ALTER on the cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 34
MIN_VERSION = 0  # Kafka 3.9's floor (4.0 starts at v1, KIP-896; v0 has v1's layout)
MAX_VERSION = 2

TopicPartition = tuple[str, int]


def _partition_dirs(request: AlterReplicaLogDirsRequest) -> dict[TopicPartition, str]:
    """Each partition's target (Kafka's partitionDirs: a partition named twice takes the last)."""
    return {(topic.name, index): dir.path for dir in request.dirs for topic in dir.topics
            for index in topic.partitions}


def _known(broker: BrokerServices, tp: TopicPartition) -> bool:
    topic = broker.metadata.get(tp[0])
    return topic is not None and tp[1] in topic.partitions


def _response(results: dict[TopicPartition, int]) -> AlterReplicaLogDirsResponse:
    by_topic: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for (topic, index), code in results.items():
        by_topic.setdefault(topic, []).append(AlterReplicaLogDirPartitionResult(partition_index=index,
                                                                                error_code=code))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        AlterReplicaLogDirTopicResult(topic_name=topic, partitions=partitions) for topic, partitions in by_topic.items()])


async def handle(ctx: RequestContext, broker: BrokerServices, request: AlterReplicaLogDirsRequest
                 ) -> AlterReplicaLogDirsResponse:
    partition_dirs = _partition_dirs(request)
    if not authorize_cluster(ctx, broker, AclOperation.ALTER):
        return _response(dict.fromkeys(partition_dirs, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    results = await broker.replica_manager.alter_replica_log_dirs(partition_dirs)
    for tp, code in results.items():
        if code == ErrorCode.REPLICA_NOT_AVAILABLE and not _known(broker, tp):
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return _response(results)
