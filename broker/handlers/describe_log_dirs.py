"""DescribeLogDirs (35): per log dir, the hosted partitions with their sizes.

``offset_lag`` is how far the log end is past the high watermark (0 for a lone
broker once an append returns); a replica moving between log dirs shows in its target
dir too, ``is_future_key`` set, its lag how far its copy is behind the current log; ``total_bytes``/``usable_bytes`` (v4+) come
from statvfs of the directory's volume.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from replication.replica_manager_lookups import LogDirDescription

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

log = logging.getLogger(__name__)

API_KEY = 35
MIN_VERSION = 0  # Kafka 4.0's floor is v1 (KIP-896); v0 has v1's layout
MAX_VERSION = 5


def _wanted(request: DescribeLogDirsRequest) -> dict[str, set[int]] | None:
    if request.topics is None:
        return None
    wanted: dict[str, set[int]] = defaultdict(set)
    for topic in request.topics:
        wanted[topic.topic].update(topic.partitions)
    return wanted


def _dir_result(described: LogDirDescription) -> DescribeLogDirsResult:
    by_topic: dict[str, list[DescribeLogDirsPartition]] = defaultdict(list)
    for p in described.partitions:
        by_topic[p.topic].append(DescribeLogDirsPartition(partition_index=p.partition, partition_size=p.size,
                                                          offset_lag=p.offset_lag, is_future_key=p.is_future))
    return DescribeLogDirsResult(error_code=described.error_code, log_dir=described.path,
                                 topics=[DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                                 total_bytes=described.total_bytes, usable_bytes=described.usable_bytes,
                                 is_cordoned=False)


def handle(ctx: RequestContext, broker: BrokerServices, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not authorize_cluster(ctx, broker, AclOperation.DESCRIBE):
        # v3+ carries the top-level error (KIP-784); older clients just see no log dirs
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                       results=[])
    results = [_dir_result(d) for d in broker.replica_manager.describe_log_dirs(_wanted(request))]
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR, results=results)
