"""DescribeLogDirs (35): per log dir, the hosted partitions with their sizes.

``offset_lag`` is how far the log end is past the high watermark (0 for a lone
broker once an append returns); ``total_bytes``/``usable_bytes`` (v4+) come
from statvfs of the directory's volume.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

if TYPE_CHECKING:
    from broker.kafka_server import KafkaServer
    from broker.socket_server import RequestContext

log = logging.getLogger(__name__)

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 5


def _wanted(request: DescribeLogDirsRequest) -> dict[str, set[int]] | None:
    if request.topics is None:
        return None
    wanted: dict[str, set[int]] = defaultdict(set)
    for topic in request.topics:
        wanted[topic.topic].update(topic.partitions)
    return wanted


def _dir_result(server: "KafkaServer", log_dir: Path, wanted: dict[str, set[int]] | None) -> DescribeLogDirsResult:
    by_topic: dict[str, list[DescribeLogDirsPartition]] = defaultdict(list)
    hosted = list(server.replica_manager.partitions.values())  # a snapshot: the append thread may add some
    for partition in sorted(hosted, key=lambda p: (p.topic, p.partition_index)):
        if wanted is not None and partition.partition_index not in wanted.get(partition.topic, ()):
            continue
        if partition.log.dir.parent.resolve() != log_dir.resolve():
            continue
        by_topic[partition.topic].append(DescribeLogDirsPartition(
            partition_index=partition.partition_index, partition_size=partition.log.size,
            offset_lag=max(0, partition.log_end_offset - partition.high_watermark), is_future_key=False))
    result = DescribeLogDirsResult(error_code=ErrorCode.NO_ERROR, log_dir=str(log_dir.resolve()),
                                   topics=[DescribeLogDirsTopic(name=t, partitions=p) for t, p in by_topic.items()],
                                   total_bytes=-1, usable_bytes=-1, is_cordoned=False)
    try:
        stats = os.statvfs(log_dir)
        result.total_bytes = stats.f_blocks * stats.f_frsize
        result.usable_bytes = stats.f_bavail * stats.f_frsize
    except OSError as exc:
        log.error("[KafkaServer id=%d] cannot stat log dir %s: %s", server.broker_id, log_dir, exc)
        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
    return result


def handle(ctx: "RequestContext", server: "KafkaServer", request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    wanted = _wanted(request)
    results = [_dir_result(server, Path(d), wanted) for d in server.log_manager.log_dirs]
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR, results=results)
