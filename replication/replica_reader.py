"""The read path: Kafka's ReplicaManager.fetchMessages and readFromLog, as a collaborator of
:class:`~replication.replica_manager.ReplicaManager`.

One read of every partition a fetch names (leader-epoch fencing, diverging epochs
for followers, the byte budget, the leader replication throttle), the long poll
in the fetch purgatory that reads again only what an append touched, and
``read_log`` for coordinators loading their partitions. A follower's fetch is
handed on (``on_follower_fetch``: the ISR manager) to move the leader's view of
it. Reads take no lock and never block: they hand out file ranges. Event loop,
except ``read_log`` (any thread).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable, Sequence

from protocol.errors import ErrorCode
from replication.broker_topic_stats import BrokerTopicStats
from replication.delayed_fetch import FetchPurgatory, ParkedFetch
from replication.fetch_params import FetchParams, FetchPartition
from replication.hosted_partitions import HostedPartitions
from replication.partition import NO_LEADER, LogReadResult, Partition, read_error
from replication.replica_selector import RackAwareReplicaSelector, ReplicaView
from replication.replication_quota_manager import ReplicationQuotas, should_leader_throttle
from storage.errors import KafkaStorageError, OffsetOutOfRangeError
from storage.log import now_ms
from storage.log_segment import FetchDataInfo, LogOffsetMetadata

TopicPartition = tuple[str, int]
#: Told of a follower's fetch once it is read: (its params, the partitions it named, their results).
FollowerFetchCallback = Callable[[FetchParams, Sequence[FetchPartition], list[LogReadResult]], None]


class ReplicaReader:
    def __init__(self, broker_id: int, hosted: HostedPartitions, fetch_purgatory: FetchPurgatory,
                 quotas: ReplicationQuotas, on_follower_fetch: FollowerFetchCallback,
                 topic_stats: BrokerTopicStats | None = None) -> None:
        self.broker_id = broker_id
        #: BytesOut and FailedFetchRequests, counted once per answer (a long poll's final read).
        self.topic_stats = topic_stats if topic_stats is not None else BrokerTopicStats()
        self._hosted = hosted
        self._fetch_purgatory = fetch_purgatory
        self._quotas = quotas
        self._on_follower_fetch = on_follower_fetch
        #: ``replica.selector.class``'s selector; None: consumers always read from the leader.
        self.replica_selector: RackAwareReplicaSelector | None = None

    def fetch_messages(self, params: FetchParams, partitions: Sequence[FetchPartition]
                       ) -> list[LogReadResult] | Awaitable[list[LogReadResult]]:
        """Read every partition; one result per partition, in order.

        Answers at once when the first read finds ``min_bytes``, an error, or the
        wait is zero; else returns an awaitable that long-polls in the fetch
        purgatory until an append to one of the partitions or ``max_wait_ms``.
        """
        deadline = time.monotonic() + max(params.max_wait_ms, 0) / 1000
        results, total, any_error = self._read_from_log(params, partitions)
        throttling = params.is_from_follower and bool(self._quotas.leader.throttled_topics)
        if params.is_from_follower:
            self._on_follower_fetch(params, partitions, results)
        if total >= params.min_bytes or any_error or deadline <= time.monotonic() or not partitions:
            if throttling:
                self._record_leader_quota(partitions, results)
            self._count(params, partitions, results)
            return results
        # Parked in this step, with no await since the read: an append before the answering task
        # runs is recorded, and the read stands (Kafka's tryComplete, then watch).
        keys = [(p.topic, p.partition) for p in partitions]
        parked = self._fetch_purgatory.park(keys, deadline - time.monotonic(), to_log_end=params.is_from_follower)
        if throttling:
            return self._delayed_throttled_fetch(params, partitions, deadline, keys, parked, (results, total))
        return self._delayed_fetch(params, partitions, deadline, keys, parked, (results, total))

    async def _delayed_throttled_fetch(self, params: FetchParams, partitions: Sequence[FetchPartition],
                                       deadline: float, keys: list[TopicPartition], parked: ParkedFetch,
                                       first_read: tuple[list[LogReadResult], int]) -> list[LogReadResult]:
        results = await self._delayed_fetch(params, partitions, deadline, keys, parked, first_read)
        self._record_leader_quota(partitions, results)
        return results

    def _count(self, params: FetchParams, partitions: Sequence[FetchPartition], results: list[LogReadResult]) -> None:
        """Kafka's BrokerTopicMetrics of a fetch: a consumer's bytes per topic, a follower's as replication."""
        stats = self.topic_stats
        if params.is_from_follower:
            stats.replication_bytes_out += sum(r.info.size for r in results if r.info is not None)
            return
        topics = stats.topics
        for wanted, result in zip(partitions, results, strict=True):
            counters = topics.get(wanted.topic) or stats.of(wanted.topic)
            counters.total_fetch_requests += 1
            if result.info is not None:
                counters.bytes_out += result.info.size
            elif result.error_code:
                counters.failed_fetch_requests += 1

    def _record_leader_quota(self, partitions: Sequence[FetchPartition], results: list[LogReadResult]) -> None:
        """Kafka's sizeOfThrottledPartitions: what a follower's answer carries of throttled partitions
        counts against the leader quota, in sync or not, once the answer is final (a long poll
        reads again, and only what is sent was replicated)."""
        quota = self._quotas.leader
        size = 0
        for wanted, result in zip(partitions, results, strict=True):
            if result.info is not None and quota.is_throttled((wanted.topic, wanted.partition)):
                size += result.info.size
        quota.record(size)

    async def _delayed_fetch(self, params: FetchParams, partitions: Sequence[FetchPartition], deadline: float,
                             keys: list[TopicPartition], parked: ParkedFetch,
                             first_read: tuple[list[LogReadResult], int]) -> list[LogReadResult]:
        """Wait in the purgatory until an append to one of the partitions, or the deadline.

        ``first_read`` (results, bytes found) found less than ``min_bytes`` and no error, and
        ``parked`` is its registration, made with no await between them: a notify cannot fall
        in a gap and leave the fetch sleeping out its wait. Each later wait registers the same way.
        """
        results, total = first_read
        while True:
            notified = await parked.wait()
            if not notified:
                results = self._read_from_log(params, partitions)[0]
                self._count(params, partitions, results)
                return results
            if total:
                results, total, any_error = self._read_from_log(params, partitions)
            else:
                total, any_error = self._read_again(params, partitions, keys, notified, results)
            remaining = deadline - time.monotonic()
            if total >= params.min_bytes or any_error or remaining <= 0:
                self._count(params, partitions, results)
                return results
            parked = self._fetch_purgatory.park(keys, remaining, to_log_end=params.is_from_follower)

    def _read_again(self, params: FetchParams, partitions: Sequence[FetchPartition], keys: list[TopicPartition],
                    notified: list[Hashable], results: list[LogReadResult]) -> tuple[int, bool]:
        """Read only the partitions an append (or a high watermark move) touched since the last
        read found nothing anywhere; the others' results stand. With nothing found before, the
        byte budget is untouched, so these reads answer what a read of every partition would,
        and a follower parked on dozens of idle partitions wakes to read one."""
        touched = set(notified)
        indexes = [i for i, key in enumerate(keys) if key in touched]
        fresh, total, any_error = self._read_from_log(params, [partitions[i] for i in indexes])
        for i, result in zip(indexes, fresh, strict=True):
            results[i] = result
        return total, any_error

    def _read_from_log(self, params: FetchParams, partitions: Sequence[FetchPartition]
                       ) -> tuple[list[LogReadResult], int, bool]:
        """Read every partition once: (results, total bytes, any error)."""
        results: list[LogReadResult] = []
        total, any_error = 0, False
        max_bytes = params.max_bytes
        fetch_only_committed = not params.is_from_follower
        isolation = params.isolation_level
        min_one_message = not params.hard_max_bytes_limit  # for the first partition that finds data
        hosted = self._hosted.by_tp
        broker_id = self.broker_id
        only_leader = params.fetch_only_from_leader
        # KIP-392: a consumer with a rack may be sent to a replica in it, when a selector is configured.
        client_rack = params.client_rack if self.replica_selector is not None and not only_leader else None
        # The leader quota's throttled topics; empty (falsy) unless a reassignment throttles some.
        throttled = self._quotas.leader.throttled_topics if params.is_from_follower else None
        for wanted in partitions:
            partition = hosted.get((wanted.topic, wanted.partition))
            if partition is None:
                results.append(read_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
                any_error = True
                continue
            fenced = partition.leader_epoch_error(wanted.current_leader_epoch)
            if fenced is None and partition.leader_id != broker_id and (
                    only_leader or partition.leader_id == NO_LEADER):
                fenced = ErrorCode.NOT_LEADER_OR_FOLLOWER
            if fenced is not None:
                results.append(read_error(fenced, partition))
                any_error = True
                continue
            if client_rack and partition.leader_id == broker_id:
                preferred = self._preferred_read_replica(partition, client_rack, wanted.fetch_offset)
                if preferred is not None:  # answered at once, with no records: read there instead
                    results.append(_redirected(partition, wanted.fetch_offset, preferred))
                    any_error = True
                    continue
            if wanted.last_fetched_epoch >= 0:
                diverging = partition.diverging_epoch(wanted.fetch_offset, wanted.last_fetched_epoch)
                if diverging is not None:  # answered at once, with no records (KIP-320)
                    results.append(partition.diverged_read(wanted.fetch_offset, diverging))
                    any_error = True
                    continue
            limit = min(wanted.max_bytes, max(max_bytes - total, 0))
            try:
                result = partition.read_records(wanted.fetch_offset, limit, isolation,
                                                min_one_message=min_one_message and total == 0,
                                                fetch_only_committed=fetch_only_committed)
            except OffsetOutOfRangeError:
                results.append(read_error(ErrorCode.OFFSET_OUT_OF_RANGE, partition))
                any_error = True
                continue
            except KafkaStorageError:  # its log directory is offline
                results.append(read_error(ErrorCode.KAFKA_STORAGE_ERROR, partition))
                any_error = True
                continue
            if throttled and wanted.topic in throttled and should_leader_throttle(
                    self._quotas.leader, (wanted.topic, wanted.partition), partition.isr, params.replica_id):
                result = _without_records(result)  # Kafka's "simply return an empty set"
            total += result.info.size  # type: ignore[union-attr]  # a successful read has info
            results.append(result)
        return results, total, any_error

    def _preferred_read_replica(self, partition: Partition, client_rack: str, fetch_offset: int) -> int | None:
        """Kafka's findPreferredReadReplica: the selector's choice among the leader and the in-sync
        followers whose logs hold ``fetch_offset``; None when it is the leader."""
        selector = self.replica_selector
        assert selector is not None
        rack_of = selector.rack_of
        now = now_ms()
        in_sync = partition.isr
        followers = [
            ReplicaView(replica.broker_id, rack_of(replica.broker_id), replica.log_end_offset,
                        now - replica.last_caught_up_time_ms)
            for replica in partition.remote_replicas.values()
            if replica.broker_id in in_sync and replica.log_start_offset <= fetch_offset <= replica.log_end_offset]
        leader = ReplicaView(self.broker_id, rack_of(self.broker_id), partition.log_end_offset, 0)
        chosen = selector.select(client_rack, leader, followers)
        if chosen is leader or chosen.rack is None:  # the leader, or a broker with no endpoint
            return None
        return chosen.broker_id

    def read_log(self, tp: TopicPartition, fetch_offset: int, max_bytes: int) -> LogReadResult:
        """Read whole batches up to the log end (a coordinator loading its partition; blocking-safe)."""
        partition = self._hosted.get(tp)
        if partition is None:
            return read_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        try:
            return partition.read_records(fetch_offset, max_bytes, 0, min_one_message=True,
                                          fetch_only_committed=False)
        except OffsetOutOfRangeError:
            return read_error(ErrorCode.OFFSET_OUT_OF_RANGE, partition)
        except KafkaStorageError:
            return read_error(ErrorCode.KAFKA_STORAGE_ERROR, partition)


def _redirected(partition: Partition, fetch_offset: int, preferred: int) -> LogReadResult:
    """A consumer's read answered with the replica to read from instead: the leader's offsets, no records."""
    return LogReadResult(ErrorCode.NO_ERROR, FetchDataInfo(LogOffsetMetadata(fetch_offset), None),
                         partition.high_watermark, partition.last_stable_offset, partition.log_start_offset,
                         partition.log_end_offset, preferred_read_replica=preferred)


def _without_records(result: LogReadResult) -> LogReadResult:
    """A throttled read: the partition's offsets as read, no records (the follower asks again)."""
    assert result.info is not None
    return result._replace(info=FetchDataInfo(result.info.fetch_offset_metadata, None))
