"""ReplicaFetcherManager: the follower fetchers of this broker (Kafka's AbstractFetcherManager).

Each followed partition is fetched by the fetcher of (its leader broker,
fetcher id), the fetcher id being the partition's hash modulo
``num.replica.fetchers`` (Kafka's getFetcherId, with Java's String hash so the
spread is Kafka's). LeaderAndIsr moves partitions between fetchers: they are
removed from their old fetcher before their new state applies and added to the
new leader's after the follower is truncated. A fetcher left without partitions
is shut down; a leader whose address changed gets a new one.

The manager owns every fetcher task: ``close`` cancels them, ``shutdown`` also
waits for them. Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from replication.append_thread import AppendThread
from replication.hosted_partitions import HostedPartitions
from replication.replica_fetcher_thread import ReplicaFetcherThread
from replication.replication_config import ReplicationConfig
from replication.replication_quota_manager import ReplicationQuotas
from replication.state_change_requests import BrokerEndpoint

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def java_string_hash(value: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as a signed 32-bit int."""
    h = 0
    for unit in value.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's getFetcherId: abs(31 * topic.hashCode + partition) % num.replica.fetchers."""
    value = (31 * java_string_hash(tp[0]) + tp[1]) & 0xFFFFFFFF
    if value >= 1 << 31:
        value -= 1 << 32
    value = 0 if value == -(1 << 31) else abs(value)  # Kafka's Utils.abs
    return value % max(num_fetchers, 1)


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, config: ReplicationConfig, hosted: HostedPartitions,
                 append_thread: AppendThread, quotas: ReplicationQuotas,
                 broker_epoch_fn: Callable[[], int] | None = None) -> None:
        self.broker_id = broker_id
        self.config = config
        self._hosted = hosted
        self._append_thread = append_thread
        self._quotas = quotas
        self._broker_epoch_fn = broker_epoch_fn
        self.fetchers: dict[tuple[int, int], ReplicaFetcherThread] = {}
        #: Fetchers closed (idle, or their leader moved) whose tasks may still be finishing.
        self._retired: list[ReplicaFetcherThread] = []
        #: Told of each partition whose high watermark a fetch moved: consumers reading from this
        #: follower (KIP-392) wait for it in the fetch purgatory.
        self.on_high_watermark: Callable[[TopicPartition], None] | None = None

    def add_fetcher_for_partitions(self, leaders: dict[TopicPartition, BrokerEndpoint]) -> None:
        """Fetch each partition from its leader, from the follower's log end offset."""
        num = self.config.num_replica_fetchers
        grouped: dict[tuple[int, int], list[TopicPartition]] = {}
        endpoints: dict[tuple[int, int], BrokerEndpoint] = {}
        for tp, leader in leaders.items():
            key = (leader.broker_id, fetcher_id(tp, num))
            grouped.setdefault(key, []).append(tp)
            endpoints[key] = leader
        for key, tps in grouped.items():
            fetcher = self.fetchers.get(key)
            endpoint = endpoints[key]
            if fetcher is not None and fetcher.source != endpoint:
                fetcher.close()  # the leader moved to another address: start afresh
                self._retired.append(fetcher)
                moved = [tp for tp in fetcher.partitions if tp not in tps]
                tps = tps + moved
                fetcher = None
            if fetcher is None:
                epoch = self._broker_epoch_fn() if self._broker_epoch_fn is not None else -1
                fetcher = self.fetchers[key] = ReplicaFetcherThread(
                    key[1], endpoint, self.broker_id, self.config, self._hosted, self._append_thread, self._quotas, epoch)
                fetcher.on_high_watermark = self.on_high_watermark
            partitions = [p for tp in tps if (p := self._hosted.get(tp)) is not None]
            fetcher.add_partitions(partitions)
            log.info("[ReplicaFetcherManager broker=%d] Added fetcher to broker %d for partitions %s",
                     self.broker_id, endpoint.broker_id, sorted(tps))

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions (a fetcher left idle stays until
        ``shutdown_idle_fetcher_threads``: the same request may give it partitions again)."""
        wanted = list(tps)
        for fetcher in self.fetchers.values():
            fetcher.remove_partitions(wanted)

    def shutdown_idle_fetcher_threads(self) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if fetcher.idle:
                fetcher.close()
                self._retired.append(fetcher)
                del self.fetchers[key]
        self._retired = [f for f in self._retired if not f.finished]

    def fetcher_for(self, tp: TopicPartition) -> ReplicaFetcherThread | None:
        for fetcher in self.fetchers.values():
            if tp in fetcher.partitions:
                return fetcher
        return None

    def close(self) -> None:
        """Cancel every fetcher now (``shutdown`` also waits for them)."""
        for fetcher in self.fetchers.values():
            fetcher.close()

    async def shutdown(self) -> None:
        fetchers, self.fetchers = [*self.fetchers.values(), *self._retired], {}
        self._retired = []
        await asyncio.gather(*(f.shutdown() for f in fetchers), return_exceptions=True)
