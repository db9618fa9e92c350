"""LeaderEpochFileCache: which leader epoch started at which offset, and its checkpoint.

The ``leader-epoch-checkpoint`` file in each partition directory holds Kafka's
format: version ``0``, the entry count, then ``epoch startOffset`` lines. It is
rewritten atomically whenever the cache changes, as Kafka does, because
followers truncate by it (OffsetsForLeaderEpoch) after a leader change.

An epoch assigned by an append is not written at once: writing (and fsyncing)
the file on the append path cost every new partition's first produce a file
creation and a disk sync on the broker's event loop (1,000 new partitions: 15 s
instead of 1.6 s for 100,000 records). The log writes it durably (``sync``)
before it moves its recovery point past the epoch's start, and a recovery
re-assigns epochs from the batches past the recovery point, so nothing an
unclean stop leaves unflushed depends on the file.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

from storage.checkpoints import LeaderEpochCheckpointFile

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILENAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    def __init__(self, partition_dir: Path | str) -> None:
        self.checkpoint = LeaderEpochCheckpointFile(Path(partition_dir) / LEADER_EPOCH_CHECKPOINT_FILENAME)
        self._entries: list[EpochEntry] = [EpochEntry(*e) for e in self.checkpoint.read()]
        self._unsynced = False

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op if already known)."""
        if epoch < 0:
            return
        if self._entries and self._entries[-1].epoch == epoch and self._entries[-1].start_offset <= start_offset:
            return
        # A new entry supersedes any with a later-or-equal epoch or start offset.
        kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        kept.append(EpochEntry(epoch, start_offset))
        if kept != self._entries:
            if len(kept) != len(self._entries) + 1:
                log.info("Leader epoch cache %s: %s replaced by %s", self.checkpoint.path, self._entries, kept)
            self._entries = kept
            self._unsynced = True

    def sync(self) -> None:
        """Write the checkpoint (durably) if an assignment changed the cache since."""
        if self._unsynced:
            self.flush()

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the leader that wrote ``offset``."""
        found = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch, as Kafka's ``endOffsetFor``: the largest
        epoch at most ``requested_epoch`` this log knows, and the offset where the next epoch
        starts (the log end for the latest epoch). UNDEFINED for an undefined request or an
        empty cache."""
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == entries[-1].epoch:
            # A consumer checking its position after a rebalance may ask for the current epoch.
            return requested_epoch, log_end_offset
        higher = next((e for e in entries if e.epoch > requested_epoch), None)
        if higher is None:
            # Above every known epoch: the latest cached epoch is the largest, so this is unexpected.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for entry in entries:
            if entry.epoch > requested_epoch:
                break
            floor = entry
        if floor is None:
            # Older than every epoch left (the rest was deleted): replicate from the first one's start.
            return requested_epoch, higher.start_offset
        return floor.epoch, higher.start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated there)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if kept != self._entries:
            self._entries = kept
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the entry covering it starts there."""
        covering = [e for e in self._entries if e.start_offset <= start_offset]
        if not covering:
            return
        kept = [EpochEntry(covering[-1].epoch, start_offset)] + [e for e in self._entries if e.start_offset > start_offset]
        if kept != self._entries:
            self._entries = kept
            self.flush()

    def clear_and_flush(self) -> None:
        self._entries = []
        self.flush()

    def flush(self) -> None:
        self.checkpoint.write(self._entries)
        self._unsynced = False
