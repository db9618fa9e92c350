"""What the replication machinery needs of the replica manager, as protocols.

``replica_state_changes`` (LeaderAndIsr, StopReplica, ISR expiration) and the
follower fetchers work on the :class:`~replication.replica_manager.ReplicaManager`
that owns them; the replica manager imports them. These protocols name the part
of it they use, so the imports run one way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from replication.append_thread import AppendThread
from replication.delayed_fetch import FetchPurgatory
from replication.delayed_produce import ProducePurgatory
from replication.partition import Partition
from replication.partition_state import LeaderAndIsr
from replication.replication_config import ReplicationConfig
from replication.replication_quota_manager import ReplicationQuotas
from storage.log_manager import LogManager

TopicPartition = tuple[str, int]
#: Told a partition index whose leadership arrived or left.
LeadershipCallback = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """Where a leader's replicas fetch from (LeaderAndIsr's live leaders)."""

    broker_id: int
    host: str
    port: int


class FetcherControl(Protocol):
    """The fetcher manager, as LeaderAndIsr and StopReplica drive it."""

    def add_fetcher_for_partitions(self, leaders: dict[TopicPartition, BrokerEndpoint]) -> None: ...
    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None: ...
    def shutdown_idle_fetcher_threads(self) -> None: ...


class ReplicaHost(Protocol):
    broker_id: int
    log_manager: LogManager
    append_thread: AppendThread
    replication_config: ReplicationConfig
    quotas: ReplicationQuotas
    partitions: dict[TopicPartition, Partition]
    fetch_purgatory: FetchPurgatory
    produce_purgatory: ProducePurgatory
    controller_epoch: int
    state_change_lock: asyncio.Lock

    @property
    def fetcher_control(self) -> FetcherControl | None: ...
    def start_replication(self) -> None: ...
    def add_partition(self, partition: Partition) -> None: ...
    def remove_partition(self, topic: str, partition_index: int) -> Partition | None: ...
    def fire_leadership_change(self, topic: str, partition_index: int, elected: bool) -> None: ...
    def on_high_watermark_advanced(self, tp: TopicPartition) -> None: ...
    def submit_isr_change(self, partition: Partition, proposal: LeaderAndIsr | None) -> None: ...
    def replica_isr_eligible(self, replica_id: int) -> bool: ...
