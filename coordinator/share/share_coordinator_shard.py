"""One ``__share_group_state`` partition's share-partition states (Kafka's ShareCoordinatorShard), sans-IO.

Each request is checked against the state in memory and turned into the
records that describe the change (``plan_*``); the coordinator appends them,
and only once they are in the log does it ``replay`` them here, so memory only
ever holds what the log holds and a load (replaying the partition from its
start) rebuilds exactly the same state.

Writes are fenced as Kafka fences them: a state epoch older than the stored
one is FENCED_STATE_EPOCH (the share partition was re-initialized since its
writer read it), a leader epoch older than the stored one FENCED_LEADER_EPOCH
(another broker leads the topic partition now), and a write to a share
partition never initialized INVALID_REQUEST. Only an initialize sets the state
epoch and only a read records a newer leader epoch; a write changes the start
offset and the batches. It becomes a ShareUpdate, except that every
``snapshot_update_records`` updates a ShareSnapshot of the whole state is
written instead, which bounds how much a load replays per key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from coordinator.common.coordinator_log import KeyValues
from coordinator.share.persister import PersisterStateBatch, ShareGroupPartitionState
from coordinator.share.share_coordinator_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    decode_key,
    decode_value,
    share_record,
)
from coordinator.share.share_state_batches import combine_state_batches
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: Kafka's marks of "not known": a start offset not set, a leader epoch not given.
UNINITIALIZED_START_OFFSET = -1
NO_LEADER_EPOCH = -1

#: Kafka's messages for refused requests (Errors' defaults and ShareCoordinatorShard's own).
FENCED_STATE_EPOCH_MESSAGE = "The coordinator rejected the request because the state epoch did not match."
FENCED_LEADER_EPOCH_MESSAGE = "The leader epoch in the request is older than the epoch on the broker."
WRITE_UNINITIALIZED_MESSAGE = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED_MESSAGE = "Read operation on uninitialized share partition not allowed."


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """The stored state of one share partition (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[PersisterStateBatch, ...]

    def partition_state(self) -> ShareGroupPartitionState:
        return ShareGroupPartitionState(self.state_epoch, self.start_offset, self.leader_epoch, self.state_batches)


@dataclass(frozen=True, slots=True)
class ShareError:
    """A refused request: Kafka's code and message."""

    error_code: ErrorCode
    message: str


class ShareCoordinatorShard:
    def __init__(self, snapshot_update_records: int) -> None:
        #: Kafka's share.coordinator.snapshot.update.records.per.snapshot.
        self.snapshot_update_records = snapshot_update_records
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        #: Updates replayed on each key since its latest snapshot.
        self.update_counts: dict[SharePartitionKey, int] = {}
        #: The log offset of each key's latest snapshot: nothing of the key before it is needed.
        self.snapshot_offsets: dict[SharePartitionKey, int] = {}
        #: One past the offset of the last record replayed.
        self.next_offset = 0

    def redundant_offset(self) -> int:
        """Every record before this offset is obsolete (Kafka's lastRedundantOffset): each key's state
        is rebuilt from its latest snapshot on; with no key left, nothing replayed so far is needed."""
        return min(self.snapshot_offsets.values(), default=self.next_offset)

    # -- reading ------------------------------------------------------------------------
    def get(self, key: SharePartitionKey) -> ShareGroupOffset | None:
        return self.states.get(key)

    def check_leader_epoch(self, key: SharePartitionKey, leader_epoch: int) -> ShareError | None:
        stored = self.states.get(key)
        if stored is not None and leader_epoch != NO_LEADER_EPOCH and leader_epoch < stored.leader_epoch:
            return ShareError(ErrorCode.FENCED_LEADER_EPOCH, FENCED_LEADER_EPOCH_MESSAGE)
        return None

    def plan_leader_epoch(self, key: SharePartitionKey, leader_epoch: int) -> KeyValues | ShareError:
        """A read with a newer leader epoch records it (Kafka's readStateAndMaybeUpdateLeaderEpoch): an
        update with no batches, so a write of the previous leader is fenced from now on."""
        refused = self.check_leader_epoch(key, leader_epoch)
        if refused is not None:
            return refused
        stored = self.states.get(key)
        if stored is None or leader_epoch == NO_LEADER_EPOCH or leader_epoch == stored.leader_epoch:
            return []
        return [share_record(SHARE_UPDATE, key, ShareUpdateValue(stored.snapshot_epoch, leader_epoch,
                                                                 UNINITIALIZED_START_OFFSET, ()))]

    def uninitialized_read(self) -> ShareError:
        return ShareError(ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED_MESSAGE)

    # -- changes ------------------------------------------------------------------------
    def plan_write(self, key: SharePartitionKey, state: ShareGroupPartitionState, now_ms: int) -> KeyValues | ShareError:
        stored = self.states.get(key)
        if stored is None:
            return ShareError(ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED_MESSAGE)
        if state.state_epoch < stored.state_epoch:
            return ShareError(ErrorCode.FENCED_STATE_EPOCH, FENCED_STATE_EPOCH_MESSAGE)
        refused = self.check_leader_epoch(key, state.leader_epoch)
        if refused is not None:
            return refused
        update = ShareUpdateValue(stored.snapshot_epoch, stored.leader_epoch, state.start_offset, state.state_batches)
        if self.update_counts.get(key, 0) >= self.snapshot_update_records:
            merged = _updated(stored, update)
            return [share_record(SHARE_SNAPSHOT, key, ShareSnapshotValue(
                stored.snapshot_epoch + 1, merged.state_epoch, merged.leader_epoch, merged.start_offset,
                stored.create_timestamp, now_ms, merged.state_batches))]
        return [share_record(SHARE_UPDATE, key, update)]

    def plan_initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int,
                        now_ms: int) -> KeyValues | ShareError:
        """A snapshot at the new state epoch with no batches; a state already at that epoch stays as it
        is (no record), an older epoch than stored is FENCED_STATE_EPOCH."""
        stored = self.states.get(key)
        if stored is not None and state_epoch < stored.state_epoch:
            return ShareError(ErrorCode.FENCED_STATE_EPOCH, FENCED_STATE_EPOCH_MESSAGE)
        if stored is not None and state_epoch == stored.state_epoch:
            return []
        snapshot_epoch = 0 if stored is None else stored.snapshot_epoch + 1
        return [share_record(SHARE_SNAPSHOT, key, ShareSnapshotValue(
            snapshot_epoch, state_epoch, NO_LEADER_EPOCH, start_offset, now_ms, now_ms, ()))]

    def plan_cold_snapshots(self, now_ms: int, interval_ms: int) -> KeyValues:
        """A fresh snapshot of each key whose latest one was written ``interval_ms`` ago or more and is no
        longer the partition's last record (Kafka's cold partition snapshots): the key's older records
        then stop holding back the prune."""
        records: KeyValues = []
        for key, stored in self.states.items():
            is_last = self.update_counts.get(key, 0) == 0 and self.snapshot_offsets.get(key) == self.next_offset - 1
            if now_ms - stored.write_timestamp >= interval_ms and not is_last:
                records.append(share_record(SHARE_SNAPSHOT, key, ShareSnapshotValue(
                    stored.snapshot_epoch + 1, stored.state_epoch, stored.leader_epoch, stored.start_offset,
                    stored.create_timestamp, now_ms, stored.state_batches)))
        return records

    def plan_delete(self, key: SharePartitionKey) -> KeyValues:
        """Tombstones of both the snapshot and the update key; nothing for a key without state."""
        if key not in self.states:
            return []
        return [share_record(SHARE_SNAPSHOT, key, None), share_record(SHARE_UPDATE, key, None)]

    # -- replay -------------------------------------------------------------------------
    def replay(self, key_bytes: bytes, value_bytes: bytes | None, offset: int) -> None:
        """Apply one record of the partition (appended, or read back by a load) at its log offset."""
        self.next_offset = max(self.next_offset, offset + 1)
        record = decode_key(key_bytes)
        key = record.key
        if value_bytes is None:
            # Either tombstone removes the whole state: a delete writes both.
            self.states.pop(key, None)
            self.update_counts.pop(key, None)
            self.snapshot_offsets.pop(key, None)
            return
        value = decode_value(record.record_type, value_bytes)
        if isinstance(value, ShareSnapshotValue):
            self.states[key] = ShareGroupOffset(value.snapshot_epoch, value.state_epoch, value.leader_epoch,
                                                value.start_offset, value.create_timestamp, value.write_timestamp,
                                                combine_state_batches((), value.state_batches, value.start_offset))
            self.update_counts[key] = 0
            self.snapshot_offsets[key] = offset
            return
        stored = self.states.get(key)
        if stored is None:
            log.warning("ShareUpdate for %s without a snapshot: ignored", key)
            return
        self.states[key] = _updated(stored, value)
        self.update_counts[key] = self.update_counts.get(key, 0) + 1


def _updated(stored: ShareGroupOffset, update: ShareUpdateValue) -> ShareGroupOffset:
    """The stored state with an update applied: a new start offset and leader epoch where given, the
    update's batches over the stored ones."""
    start = stored.start_offset if update.start_offset == UNINITIALIZED_START_OFFSET else update.start_offset
    leader = stored.leader_epoch if update.leader_epoch == NO_LEADER_EPOCH else update.leader_epoch
    return replace(stored, leader_epoch=leader, start_offset=start,
                   state_batches=combine_state_batches(stored.state_batches, update.state_batches, start))
