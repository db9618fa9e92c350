"""The Persister: the one interface between share partitions and their durable state.

A share partition (on the leader of a topic partition) keeps its in-flight
records in memory and hands every change that must survive a restart or a
leader change to a ``Persister``. The broker wires in an implementation that
finds the share coordinator of the key ``groupId:topicId:partition`` and calls
it locally or over the network (InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState,
ReadShareGroupStateSummary); the share coordinator appends the state to
``__share_group_state``.

The names and numbers are Kafka's (``org.apache.kafka.server.share.persister``
and ``RecordState``), so the state read back is the state Kafka would read.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Protocol


class RecordState(enum.IntEnum):
    """The delivery state of an in-flight record, with Kafka's numbers (3 is unused)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass(frozen=True)
class PersisterStateBatch:
    """A run of offsets ``first_offset..last_offset`` (inclusive) sharing one state and delivery count.

    ``delivery_state`` holds a ``RecordState`` value.
    """

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class ShareGroupPartitionState:
    """The durable state of one share partition.

    ``state_epoch`` fences writers that read an older state (an initialize
    bumps it); ``start_offset`` is the share-partition start offset (every
    offset below it is done); ``leader_epoch`` is the topic partition's leader
    epoch of the writer; ``state_batches`` are the in-flight batches at or
    above ``start_offset`` that are not simply AVAILABLE with delivery count 0.
    """

    state_epoch: int
    start_offset: int
    leader_epoch: int
    state_batches: tuple[PersisterStateBatch, ...]


class PersisterError(Exception):
    """A persister call failed with one of Kafka's error codes.

    ``error_code`` is Kafka's code (e.g. FENCED_STATE_EPOCH,
    COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    INVALID_REQUEST); ``message`` is the human-readable reason.
    """

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class Persister(Protocol):
    """The durable store of share-partition state, keyed by (group, topic id, partition).

    Every method raises ``PersisterError`` with Kafka's code when it fails.
    """

    async def initialize_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int
    ) -> None:
        """Create (or reset) the state at ``state_epoch`` with no in-flight batches.

        Durable when it returns. Raises FENCED_STATE_EPOCH when the stored
        state epoch is newer than ``state_epoch``.
        """
        ...

    async def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> ShareGroupPartitionState | None:
        """The stored state, or None when the partition has no state yet.

        ``leader_epoch`` is the caller's leader epoch of the topic partition:
        a newer one is remembered; an older one than stored raises
        FENCED_LEADER_EPOCH.
        """
        ...

    async def write_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state: ShareGroupPartitionState
    ) -> None:
        """Store ``state``: its start offset and batches replace the covered part of the stored state.

        Durable when it returns: the write is in ``__share_group_state`` and
        replicated as the topic's acks=all requires, so a restart or a
        coordinator move reads it back. Raises FENCED_STATE_EPOCH when
        ``state.state_epoch`` is older than the stored one and
        FENCED_LEADER_EPOCH when ``state.leader_epoch`` is older than stored.
        """
        ...

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """Remove the partition's state; a later read returns None. Durable when it returns."""
        ...

    async def read_state_summary(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> tuple[int, int, int] | None:
        """``(state_epoch, start_offset, leader_epoch)`` of the stored state, or None when there is none."""
        ...
