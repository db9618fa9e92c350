"""The replica manager's lookups for the admin and offset APIs: ListOffsets,
OffsetsForLeaderEpoch, DeleteRecords, DescribeProducers and DescribeLogDirs.

A collaborator of :class:`~replication.replica_manager.ReplicaManager`: each
answers for one partition, or one log dir, from the partitions it hosts, with
Kafka's error code when one is not hosted or not led here. DeleteRecords runs on the append thread (it may delete segments and
writes the log-start-offset checkpoint); the rest read only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from protocol.errors import ErrorCode
from replication.append_thread import AppendThread
from replication.hosted_partitions import HostedPartitions
from replication.partition import Partition
from storage.errors import OffsetOutOfRangeError
from storage.log_manager import LogManager
from storage.producer_state_entry import ProducerStateEntry

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    error_code: int
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass(slots=True)
class LogDirPartition:
    topic: str
    partition: int
    size: int
    offset_lag: int
    #: A future replica: the copy of a replica moving into this dir (offset_lag: how far behind it is).
    is_future: bool = False


@dataclass(slots=True)
class LogDirDescription:
    path: str
    error_code: int = ErrorCode.NO_ERROR
    total_bytes: int = -1
    usable_bytes: int = -1
    partitions: list[LogDirPartition] = field(default_factory=list)


class PartitionLookups:
    def __init__(self, broker_id: int, hosted: HostedPartitions, log_manager: LogManager,
                 append_thread: AppendThread) -> None:
        self.broker_id = broker_id
        self._hosted = hosted
        self._log_manager = log_manager
        self._append_thread = append_thread

    def last_offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int,
                                     leader_epoch: int) -> tuple[int, int, int]:
        """OffsetsForLeaderEpoch at the leader: (error, epoch, end offset), see
        ``Partition.last_offset_for_leader_epoch``. UNKNOWN_TOPIC_OR_PARTITION when not hosted."""
        partition = self._hosted.get(tp)
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
        return partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)

    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int, isolation_level: int | None,
                                   current_leader_epoch: int, fetch_only_from_leader: bool = True) -> ListOffsetsResult:
        """ListOffsets for one partition (Kafka's fetchOffsetForTimestamp): ``isolation_level`` is
        None for a follower or a debugging client (see up to the log end); only a debugging
        client may ask a follower (``fetch_only_from_leader`` False)."""
        partition = self._hosted.get(tp)
        if partition is None:
            return ListOffsetsResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        fenced = partition.leader_epoch_error(current_leader_epoch)
        if fenced is not None:
            return ListOffsetsResult(fenced)
        if fetch_only_from_leader and not partition.is_leader:
            return ListOffsetsResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        found = partition.fetch_offset_for_timestamp(timestamp, isolation_level)
        if found is None:
            return ListOffsetsResult(ErrorCode.OFFSET_NOT_AVAILABLE)
        return ListOffsetsResult(ErrorCode.NO_ERROR, *found)

    def legacy_fetch_offsets_for_timestamp(self, tp: TopicPartition, timestamp: int, max_num_offsets: int,
                                           from_consumer: bool, fetch_only_from_leader: bool = True,
                                           ) -> tuple[int, list[int]]:
        """ListOffsets v0: (error, offsets before ``timestamp``, descending, at most ``max_num_offsets``)."""
        partition = self._hosted.get(tp)
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
        if fetch_only_from_leader and not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, []
        return ErrorCode.NO_ERROR, partition.legacy_fetch_offsets_for_timestamp(timestamp, max_num_offsets,
                                                                                from_consumer)

    def delete_records(self, offsets: Sequence[tuple[TopicPartition, int]]) -> Awaitable[list[tuple[int, int]]]:
        """DeleteRecords: move each log start offset up; (error, low watermark) per entry, in order.

        -1 means the high watermark. Runs on the append thread (it may delete
        segments and writes the log-start-offset checkpoint).
        """
        return self._append_thread.run(self._delete_records_blocking, offsets)

    def _delete_records_blocking(self, offsets: Sequence[tuple[TopicPartition, int]]) -> list[tuple[int, int]]:
        results = [self._delete_records_of(tp, offset) for tp, offset in offsets]
        if any(code == ErrorCode.NO_ERROR for code, _ in results):
            self._log_manager.checkpoint_log_start_offsets()
        return results

    def _delete_records_of(self, tp: TopicPartition, offset: int) -> tuple[int, int]:
        partition = self._hosted.get(tp)
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
        if not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        log_ = partition.log
        if not log_.config.delete:
            return ErrorCode.POLICY_VIOLATION, -1
        if offset == -1:
            offset = partition.high_watermark
        if offset < 0 or offset > partition.high_watermark:
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
        try:
            return ErrorCode.NO_ERROR, log_.delete_records(offset)
        except OffsetOutOfRangeError:
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
        except OSError as exc:
            log.error("[ReplicaManager broker=%d] DeleteRecords on %s-%d failed: %s", self.broker_id, *tp, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR, -1

    def active_producer_state(self, tp: TopicPartition) -> tuple[int, dict[int, ProducerStateEntry]]:
        """DescribeProducers: (error, the partition's active producers by id)."""
        partition = self._hosted.get(tp)
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, {}
        state = partition.log.producer_state
        return ErrorCode.NO_ERROR, dict(state.active_producers) if state is not None else {}

    def describe_log_dirs(self, wanted: dict[str, set[int]] | None) -> list[LogDirDescription]:
        """DescribeLogDirs: each log dir with the partitions (all, or ``wanted``) it holds."""
        hosted = sorted(self._hosted.by_tp.values(), key=lambda p: (p.topic, p.partition_index))
        described = []
        for log_dir in self._log_manager.log_dirs:
            path = Path(log_dir).resolve()
            description = LogDirDescription(str(path))
            if self._log_manager.failure_channel.has_offline_log_dir(Path(log_dir)):
                # Kafka's answer for an offline directory: the error, and nothing about its partitions.
                description.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                described.append(description)
                continue
            for partition in _in_dir(hosted, path, wanted):
                description.partitions.append(LogDirPartition(
                    partition.topic, partition.partition_index, partition.log.size,
                    max(0, partition.log_end_offset - partition.high_watermark)))
            description.partitions += self._future_replicas_in(path, wanted)
            try:
                stats = os.statvfs(path)
                description.total_bytes = stats.f_blocks * stats.f_frsize
                description.usable_bytes = stats.f_bavail * stats.f_frsize
            except OSError as exc:
                log.error("[ReplicaManager broker=%d] cannot stat log dir %s: %s", self.broker_id, path, exc)
                description.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            described.append(description)
        return described


    def _future_replicas_in(self, path: Path, wanted: dict[str, set[int]] | None) -> list[LogDirPartition]:
        """The replicas moving into ``path``: their future logs, lag to the current log's end
        (Kafka's getLogEndOffsetLag for a future log; -1 with no current replica here)."""
        found = []
        for (topic, index), future in sorted(self._log_manager.future_logs.items()):
            if (wanted is not None and index not in wanted.get(topic, ())) or future.dir.parent.resolve() != path:
                continue
            partition = self._hosted.get((topic, index))
            lag = -1 if partition is None else partition.log_end_offset - future.log_end_offset
            found.append(LogDirPartition(topic, index, future.size, lag, is_future=True))
        return found


def _in_dir(hosted: Iterable[Partition], path: Path, wanted: dict[str, set[int]] | None) -> Iterable[Partition]:
    for partition in hosted:
        if wanted is not None and partition.partition_index not in wanted.get(partition.topic, ()):
            continue
        if partition.log.dir.parent.resolve() == path:
            yield partition
