"""How far partition reassignments have copied: the bytes the adding replicas hold against their leaders'.

Each broker is asked for its replicas' sizes with DescribeLogDirs (as Kafka's admin client's
``describeReplicaLogDirs`` does); a replica being added holds, once caught up, as much as its
partition's leader. A broker that cannot be asked (down, say) counts as holding nothing yet.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from client import KafkaClient, KafkaClientError
from client.admin import OngoingReassignment
from protocol.errors import ErrorCode
from protocol.messages.describe_log_dirs import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)

TopicPartition = tuple[str, int]


def _sizes_on(client: KafkaClient, broker_id: int, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """The size of each of these partitions' replicas on ``broker_id`` (current, not future, log dirs)."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for name, partition in partitions:
        by_topic[name].append(partition)
    request = DescribeLogDirsRequest(topics=[DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
    try:
        response = client.connection(broker_id).request(request)
    except (KafkaClientError, OSError):
        return {}
    assert isinstance(response, DescribeLogDirsResponse)
    sizes: dict[TopicPartition, int] = {}
    for result in response.results:
        if result.error_code != ErrorCode.NO_ERROR:
            continue
        for topic in result.topics:
            for replica in topic.partitions:
                if not replica.is_future_key:
                    sizes[(topic.name, replica.partition_index)] = replica.partition_size
    return sizes


def copied_bytes(client: KafkaClient, ongoing: Mapping[TopicPartition, OngoingReassignment]) -> tuple[int, int]:
    """(bytes the adding replicas hold, bytes they will hold once caught up) over ``ongoing``'s partitions."""
    brokers = {b for reassignment in ongoing.values() for b in reassignment.replicas}
    sizes = {b: _sizes_on(client, b, ongoing) for b in sorted(brokers)}
    client.refresh_metadata(sorted({topic for topic, _ in ongoing}))
    copied = wanted = 0
    for (topic, partition), reassignment in ongoing.items():
        leader = client.partition_metadata(topic, partition).leader
        target = sizes.get(leader, {}).get((topic, partition), 0)
        for broker_id in reassignment.adding:
            wanted += target
            copied += min(sizes[broker_id].get((topic, partition), 0), target)
    return copied, wanted
