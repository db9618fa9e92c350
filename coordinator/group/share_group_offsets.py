"""A share group's share-partition start offsets: describe, alter (reset) and delete them.

Kafka's GroupCoordinatorService.describeShareGroupOffsets / alterShareGroupOffsets /
deleteShareGroupOffsets for one event loop. The offsets live with the share
coordinator, so every answer goes through the persister:

- describe reads each partition's summary (ReadShareGroupStateSummary); a
  partition without state has start offset -1; without topics named, the
  partitions the group initialized are described;
- alter (only on an empty group: NON_EMPTY_GROUP otherwise; an absent group is
  created empty, as Kafka's) bumps the group epoch and initializes each named
  partition's state at it with the new start offset (InitializeShareGroupState,
  as Kafka's persisterInitialize), then records the partitions as initialized;
- delete (empty groups only) deletes the state of the named topics' initialized
  partitions (DeleteShareGroupState) and forgets them in the group's records.

A group that is absent (to describe or delete), or of another type, is
GROUP_ID_NOT_FOUND; a topic the metadata does not know is
UNKNOWN_TOPIC_OR_PARTITION, with Kafka's messages.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from coordinator.common.coordinator_log import KeyValues
from coordinator.group.share_group import ShareGroup, add_partitions, remove_partitions
from coordinator.group.share_group_heartbeat import ShareGroupHeartbeat
from coordinator.group.share_group_records import ShareGroupChange
from coordinator.share.persister import RecordState, ShareGroupPartitionState
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: The start offset, leader epoch and lag Kafka answers for a partition without them.
UNINITIALIZED_START_OFFSET = -1
NO_LEADER_EPOCH = -1
UNKNOWN_LAG = -1
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
NON_EMPTY_GROUP_MESSAGE = "The group is not empty."
ZERO_TOPIC_ID = uuid.UUID(int=0)
_DONE_STATES = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


class ShareOffsetsPersister(Protocol):
    """The persister calls these requests make (coordinator/share/persister.py's Persister)."""

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> None: ...

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> ShareGroupPartitionState | None: ...

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None: ...

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                 leader_epoch: int) -> tuple[int, int, int] | None: ...


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    partition: int
    start_offset: int = UNINITIALIZED_START_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    lag: int = UNKNOWN_LAG
    error: ErrorCode = ErrorCode.NO_ERROR
    error_message: str | None = None


@dataclass(slots=True)
class ShareTopicOffsets:
    topic_name: str
    topic_id: uuid.UUID = ZERO_TOPIC_ID
    partitions: list[SharePartitionOffset] = field(default_factory=list)
    #: DeleteShareGroupOffsets answers per topic.
    error: ErrorCode = ErrorCode.NO_ERROR
    error_message: str | None = None


@dataclass(slots=True)
class ShareGroupOffsets:
    """One group's answer: a group-level error, or its topics."""

    group_id: str
    error: ErrorCode = ErrorCode.NO_ERROR
    error_message: str | None = None
    topics: list[ShareTopicOffsets] = field(default_factory=list)


#: (topic name, partition) → the partition's end offset (its high watermark), None when it cannot be had.
EndOffsets = Callable[[str, int], Awaitable[int | None]]


def _persister_error(exc: Exception) -> ErrorCode:
    code = getattr(exc, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
    return ErrorCode(code) if code in ErrorCode._value2member_map_ else ErrorCode.UNKNOWN_SERVER_ERROR


def lag_of(state: ShareGroupPartitionState | None, start_offset: int, end_offset: int | None) -> int:
    """KIP-1226's lag: the records from the start offset to the end offset that are not yet done
    (acknowledged or archived); -1 when the start or the end offset is unknown."""
    if end_offset is None or start_offset < 0:
        return UNKNOWN_LAG
    done = 0
    for batch in () if state is None else state.state_batches:
        if batch.delivery_state in _DONE_STATES:
            first, last = max(batch.first_offset, start_offset), min(batch.last_offset, end_offset - 1)
            done += max(0, last - first + 1)
    return max(0, end_offset - start_offset - done)


class ShareGroupOffsetsAdmin:
    """DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets of this coordinator."""

    def __init__(self, heartbeats: ShareGroupHeartbeat) -> None:
        self.heartbeats = heartbeats
        self.persister: ShareOffsetsPersister | None = None
        #: Where the lag's end offsets come from (wired by the broker); None: the lag is unknown (-1).
        self.end_offsets: EndOffsets | None = None

    # -- the group -------------------------------------------------------------------
    def _group(self, group_id: str) -> ShareGroup | ShareGroupOffsets:
        """The group, or the group-level answer (coordinator errors, GROUP_ID_NOT_FOUND)."""
        error = self.heartbeats.status.validate(group_id)
        if error is not None:
            return ShareGroupOffsets(group_id, error)
        group = self.heartbeats.groups.get(group_id)
        if group is None:
            message = (f"Group {group_id} is not a share group." if self.heartbeats.other_group(group_id)
                       else f"Group {group_id} not found.")
            return ShareGroupOffsets(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message)
        return group

    def _empty_group(self, group_id: str, create: bool = False) -> ShareGroup | ShareGroupOffsets:
        """The group if it has no members; with ``create``, an absent one is created empty (Kafka's
        alter does, so kafka-share-groups.sh sets the start offsets of a group before it first runs)."""
        group = self._group(group_id)
        if (create and isinstance(group, ShareGroupOffsets) and group.error == ErrorCode.GROUP_ID_NOT_FOUND
                and not self.heartbeats.other_group(group_id)):
            group = self.heartbeats.groups.setdefault(group_id, ShareGroup(group_id))
        if isinstance(group, ShareGroup) and group.members:
            return ShareGroupOffsets(group_id, ErrorCode.NON_EMPTY_GROUP, NON_EMPTY_GROUP_MESSAGE)
        return group

    def _topic_id(self, name: str) -> tuple[uuid.UUID, int] | None:
        info = self.heartbeats.topics.describe_topic(name)
        return None if info is None else (info.topic_id, info.num_partitions)

    # -- describe --------------------------------------------------------------------
    async def describe(self, group_id: str, topics: dict[str, list[int]] | None) -> ShareGroupOffsets:
        """``topics`` None: every partition the group initialized."""
        group = self._group(group_id)
        if isinstance(group, ShareGroupOffsets):
            return group
        answer = ShareGroupOffsets(group_id)
        if topics is None:
            topics = {name: sorted(parts) for name, parts in group.initialized.values()}
        for name, partitions in topics.items():
            known = self._topic_id(name)
            if known is None:
                # Kafka sets only the index and the error here: the other fields keep the schema's defaults.
                answer.topics.append(ShareTopicOffsets(name, partitions=[
                    SharePartitionOffset(p, 0, 0, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                         error_message=UNKNOWN_TOPIC_MESSAGE) for p in partitions]))
                continue
            topic = ShareTopicOffsets(name, known[0])
            for partition in partitions:
                topic.partitions.append(await self._describe_partition(group_id, name, known[0], partition))
            answer.topics.append(topic)
        return answer

    async def _describe_partition(self, group_id: str, name: str, topic_id: uuid.UUID,
                                  partition: int) -> SharePartitionOffset:
        persister = self.persister
        if persister is None:
            return SharePartitionOffset(partition)
        try:
            summary = await persister.read_state_summary(group_id, topic_id, partition, NO_LEADER_EPOCH)
            if summary is None:
                return SharePartitionOffset(partition)
            _, start_offset, leader_epoch = summary
            end_offset = None if self.end_offsets is None else await self.end_offsets(name, partition)
            state = (await persister.read_state(group_id, topic_id, partition, leader_epoch)
                     if end_offset is not None and start_offset >= 0 else None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the persister's error, with Kafka's code
            return SharePartitionOffset(partition, error=_persister_error(exc), error_message=str(exc))
        return SharePartitionOffset(partition, start_offset, leader_epoch, lag_of(state, start_offset, end_offset))

    # -- alter ------------------------------------------------------------------------
    async def alter(self, group_id: str, offsets: dict[str, dict[int, int]]) -> ShareGroupOffsets:
        """Reset the start offsets ``offsets`` (topic → partition → start offset) of an empty group."""
        group = self._empty_group(group_id, create=True)
        if isinstance(group, ShareGroupOffsets):
            return group
        answer = ShareGroupOffsets(group_id)
        planned: list[tuple[ShareTopicOffsets, str, uuid.UUID, int, int]] = []
        for name, partitions in offsets.items():
            known = self._topic_id(name)
            topic = ShareTopicOffsets(name, ZERO_TOPIC_ID if known is None else known[0])
            answer.topics.append(topic)
            for partition, start_offset in partitions.items():
                if known is None or not 0 <= partition < known[1]:
                    topic.partitions.append(SharePartitionOffset(partition, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                                 error_message=UNKNOWN_TOPIC_MESSAGE))
                else:
                    planned.append((topic, name, known[0], partition, start_offset))
        if planned or group.group_epoch == 0:  # a group just created is written even with nothing to alter
            await self._initialize(group, planned)
        return answer

    async def _initialize(self, group: ShareGroup,
                          planned: list[tuple[ShareTopicOffsets, str, uuid.UUID, int, int]]) -> None:
        """Kafka's alter then persisterInitialize: the group epoch is bumped and the partitions recorded as
        initializing (appended before going on); each partition's state is initialized at that epoch (so
        it supersedes the state the partitions' leaders hold) with the new start offset; the ones done
        are then recorded as initialized in the group as it is by then (it may have been reloaded)."""
        change = ShareGroupChange(group, [])
        group.group_epoch += 1
        state_epoch = group.group_epoch
        for _, name, topic_id, partition, _ in planned:
            add_partitions(group.initializing, topic_id, name, frozenset({partition}))
        written = await self._write(group.group_id, change.records(group))
        done: list[tuple[str, uuid.UUID, int]] = []
        for topic, name, topic_id, partition, start_offset in planned:
            error, message = (written, None) if written != ErrorCode.NO_ERROR else await self._initialize_one(
                group.group_id, topic_id, partition, state_epoch, start_offset)
            if error == ErrorCode.NO_ERROR:
                done.append((name, topic_id, partition))
            topic.partitions.append(SharePartitionOffset(partition, error=error, error_message=message))
        current = self.heartbeats.groups.get(group.group_id)
        if current is None or not planned:
            return
        change = ShareGroupChange(current, [])
        for _, _, topic_id, partition, _ in planned:
            remove_partitions(current.initializing, topic_id, frozenset({partition}))
        for name, topic_id, partition in done:
            add_partitions(current.initialized, topic_id, name, frozenset({partition}))
        self.heartbeats.records.write(group.group_id, change.records(current))

    async def _write(self, group_id: str, records: KeyValues) -> ErrorCode:
        """Append the group's records; NO_ERROR once they are, else the error a request answers."""
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()

        def appended(error: ErrorCode) -> None:
            if not future.done():
                future.set_result(error)

        self.heartbeats.records.write(group_id, records, appended)
        return await future

    async def _initialize_one(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                              start_offset: int) -> tuple[ErrorCode, str | None]:
        if self.persister is None:
            return ErrorCode.NO_ERROR, None
        try:
            await self.persister.initialize_state(group_id, topic_id, partition, state_epoch, start_offset)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the persister's error, with Kafka's code
            log.warning("[GroupId %s] Failed to alter the share state of %s-%d: %s", group_id, topic_id,
                        partition, exc)
            return _persister_error(exc), str(exc)
        return ErrorCode.NO_ERROR, None

    # -- delete -----------------------------------------------------------------------
    async def delete(self, group_id: str, topic_names: list[str]) -> ShareGroupOffsets:
        """Delete the state of the named topics' partitions the group initialized (an empty group only)."""
        group = self._empty_group(group_id)
        if isinstance(group, ShareGroupOffsets):
            return group
        answer = ShareGroupOffsets(group_id)
        for name in dict.fromkeys(topic_names):
            known = self._topic_id(name)
            if known is None:
                answer.topics.append(ShareTopicOffsets(name, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                       error_message=UNKNOWN_TOPIC_MESSAGE))
                continue
            topic = ShareTopicOffsets(name, known[0])
            topic.error, topic.error_message = await self._delete_topic(group, known[0])
            answer.topics.append(topic)
        return answer

    async def _delete_topic(self, group: ShareGroup, topic_id: uuid.UUID) -> tuple[ErrorCode, str | None]:
        partitions = sorted({p for info in (group.initialized, group.initializing)
                             for p in info.get(topic_id, ("", frozenset()))[1]})
        persister = self.persister
        try:
            for partition in partitions:
                if persister is not None:
                    await persister.delete_state(group.group_id, topic_id, partition)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the persister's error, with Kafka's code
            return _persister_error(exc), str(exc)
        current = self.heartbeats.groups.get(group.group_id)  # as it is by now (it may have been reloaded)
        if partitions and current is not None:
            change = ShareGroupChange(current, [])
            remove_partitions(current.initialized, topic_id, frozenset(partitions))
            remove_partitions(current.initializing, topic_id, frozenset(partitions))
            self.heartbeats.records.write(group.group_id, change.records(current))
        return ErrorCode.NO_ERROR, None
