"""Create topics for a test or a benchmark, on pafka or on the peer broker.

Through pafka's own client (``client``), which every environment has; the wait afterwards
is what makes the next produce safe on any broker: a topic counts as there once Metadata
lists every partition with a leader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from client import AdminClient, KafkaClient, NewTopic, TopicMetadata
from pytest_pafka.waiting import wait_until

TIMEOUT_S = 30.0


def create_topics(bootstrap: str, names: Sequence[str], partitions: int,
                  configs: Mapping[str, str] | None = None, *, timeout_s: float = TIMEOUT_S) -> None:
    """Create ``names`` (replication factor 1), each with ``partitions`` and ``configs``;
    return once every partition has a leader. Any error, or no leader in time, raises."""
    with KafkaClient(bootstrap, timeout=timeout_s) as client:
        admin = AdminClient(client, timeout_ms=int(timeout_s * 1000))
        admin.create_topics([NewTopic(name, partitions, 1, dict(configs or {})) for name in names])

        def unled() -> list[str]:
            cluster = client.refresh_metadata(list(names))
            return [name for name in names if not _led(cluster.topics.get(name), partitions)]

        wait_until(unled, timeout_s, "no leader for every partition", until=lambda waiting: not waiting)


def create_topic(bootstrap: str, name: str, partitions: int, configs: Mapping[str, str] | None = None,
                 *, timeout_s: float = TIMEOUT_S) -> None:
    """One topic: see :func:`create_topics`."""
    create_topics(bootstrap, [name], partitions, configs, timeout_s=timeout_s)


def _led(topic: TopicMetadata | None, partitions: int) -> bool:
    """True when Metadata lists ``partitions`` partitions of ``topic``, each with a leader."""
    if topic is None or topic.error_code:
        return False
    return len(topic.partitions) == partitions and all(p.leader >= 0 for p in topic.partitions.values())
