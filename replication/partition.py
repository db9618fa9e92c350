"""Partition: a log plus its replication state (leader epoch, ISR, high watermark).

This is Kafka's ``kafka.cluster.Partition`` reduced to what a broker needs
today: the leader's side. With a single broker the ISR is the leader alone, so
an append is committed (the high watermark moves) as soon as it is in the log;
``acks=all`` then means exactly what it means in Kafka with one in-sync replica.
The follower side (fetchers, ISR shrink/expand) builds on the same object.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from storage.log import FetchIsolation, Log
from storage.log_append import AppendOrigin, LogAppendInfo
from storage.log_segment import FetchDataInfo

log = logging.getLogger(__name__)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class LogReadResult:
    """What a fetch of one partition found, with the offsets the response reports."""

    info: FetchDataInfo
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int


class Partition:
    __slots__ = (
        'topic', 'partition_index', 'topic_id', 'log', 'broker_id', 'replicas', 'isr', 'leader_epoch',
        'leader_id', 'partition_epoch', '__weakref__',
    )

    def __init__(
        self,
        topic: str,
        partition_index: int,
        topic_id: uuid.UUID,
        log: Log,
        broker_id: int,
        replicas: list[int],
        leader_epoch: int = 0,
    ) -> None:
        self.topic = topic
        self.partition_index = partition_index
        self.topic_id = topic_id
        self.log = log
        self.broker_id = broker_id
        self.replicas = list(replicas)
        self.isr = [broker_id]
        self.leader_id = broker_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = 0

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition_index}, epoch={self.leader_epoch})"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the HW, or the first offset of the oldest open transaction below it."""
        return self.log.last_stable_offset

    def append_records_to_leader(self, records: bytearray | memoryview, origin: AppendOrigin,
                                 now: int | None = None, roll_checked: bool = False) -> LogAppendInfo:
        """Append as leader and advance the HW (the ISR is this broker alone).

        Blocking (may fsync on roll or under flush.messages): the broker calls it
        from its append thread, never on the event loop.
        """
        info = self.log.append_as_leader(records, self.leader_epoch, origin, now, roll_checked)
        self.maybe_increment_high_watermark()
        return info

    def maybe_increment_high_watermark(self) -> None:
        isr = self.isr
        if len(isr) == 1 and isr[0] == self.broker_id:
            self.log.update_high_watermark(self.log.log_end_offset)

    def read_records(self, fetch_offset: int, max_bytes: int, isolation_level: int,
                     min_one_message: bool, fetch_only_committed: bool = True) -> LogReadResult:
        """Read for a consumer (up to the HW or LSO) or a follower (up to the log end).

        Offsets are sampled before the read so the response never reports a high
        watermark below the data it carries.
        """
        hw = self.log.high_watermark
        lso = self.log.last_stable_offset
        log_start = self.log.log_start_offset
        leo = self.log.log_end_offset
        if not fetch_only_committed:
            isolation = FetchIsolation.LOG_END
        elif isolation_level == READ_COMMITTED:
            isolation = FetchIsolation.TXN_COMMITTED  # also collects the aborted transactions
        else:
            isolation = FetchIsolation.HIGH_WATERMARK
        info = self.log.read(fetch_offset, max_bytes, min_one_message=min_one_message, isolation=isolation)
        return LogReadResult(info, hw, lso, log_start, leo)
