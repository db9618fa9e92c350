"""Share group offsets on a fake clock: describe (start offsets, lag), alter and delete through the persister."""

from __future__ import annotations

import asyncio
import uuid

from coordinator.group.share_group_offsets import (
    NON_EMPTY_GROUP_MESSAGE,
    UNKNOWN_TOPIC_MESSAGE,
    EndOffsets,
    ShareGroupOffsets,
    ShareGroupOffsetsAdmin,
    SharePartitionOffset,
    lag_of,
)
from coordinator.share.persister import PersisterStateBatch, RecordState, ShareGroupPartitionState
from protocol.errors import ErrorCode
from tests.coordinator.test_share_group_heartbeat import OTHER, TOPIC, Harness

Key = tuple[str, uuid.UUID, int]


class MemoryPersister:
    """An in-memory stand-in for the Persister (a test double of coordinator/share/persister.py)."""

    def __init__(self) -> None:
        self.states: dict[Key, ShareGroupPartitionState] = {}
        self.deleted: list[Key] = []

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> None:
        self.states[(group_id, topic_id, partition)] = ShareGroupPartitionState(state_epoch, start_offset, -1, ())

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> ShareGroupPartitionState | None:
        return self.states.get((group_id, topic_id, partition))

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          state: ShareGroupPartitionState) -> None:
        self.states[(group_id, topic_id, partition)] = state

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        self.states.pop((group_id, topic_id, partition), None)
        self.deleted.append((group_id, topic_id, partition))

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                                 leader_epoch: int) -> tuple[int, int, int] | None:
        state = self.states.get((group_id, topic_id, partition))
        return None if state is None else (state.state_epoch, state.start_offset, state.leader_epoch)


def _harness() -> tuple[Harness, MemoryPersister]:
    h = Harness()
    persister = MemoryPersister()
    h.coordinator.share_groups.persister = persister
    h.coordinator.share_offsets.persister = persister
    return h, persister


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def _end_offsets(ends: dict[tuple[str, int], int]) -> EndOffsets:
    async def end_offset(topic: str, partition: int) -> int | None:
        return ends.get((topic, partition))

    return end_offset


async def _describe(offsets: ShareGroupOffsetsAdmin, group_id: str, topics: dict[str, list[int]] | None,
                    ends: dict[tuple[str, int], int]) -> ShareGroupOffsets:
    offsets.end_offsets = _end_offsets(ends)
    return await offsets.describe(group_id, topics)


def test_lag_counts_the_records_not_yet_done_from_the_start_offset() -> None:
    state = ShareGroupPartitionState(1, 5, 0, (
        PersisterStateBatch(7, 9, RecordState.ACKNOWLEDGED, 1),
        PersisterStateBatch(10, 11, RecordState.ACQUIRED, 1),
        PersisterStateBatch(12, 12, RecordState.ARCHIVED, 5)))
    assert lag_of(state, 5, 20) == 20 - 5 - 4
    assert lag_of(None, 5, 20) == 15
    assert lag_of(state, -1, 20) == -1 and lag_of(state, 5, None) == -1


def test_describe_shows_the_start_offsets_of_the_initialized_partitions() -> None:
    async def run() -> None:
        h, persister = _harness()
        a = h.join("a", ("t",))
        await _settle()
        offsets = h.coordinator.share_offsets
        answer = await _describe(offsets, "g", None, {})
        assert answer.error == ErrorCode.NO_ERROR
        assert [(t.topic_name, t.topic_id, t.partitions) for t in answer.topics] == [
            ("t", TOPIC, [SharePartitionOffset(0)])]  # initialized at -1: no start offset yet
        persister.states[("g", TOPIC, 0)] = ShareGroupPartitionState(
            1, 5, 3, (PersisterStateBatch(5, 6, RecordState.ACKNOWLEDGED, 1),))
        answer = await _describe(offsets, "g", {"t": [0], "missing": [0, 1]}, {("t", 0): 10})
        assert answer.topics[0].partitions == [SharePartitionOffset(0, 5, 3, 3)]
        assert [(p.partition, p.error, p.error_message) for p in answer.topics[1].partitions] == [
            (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE),
            (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE)]
        # A partition the group never initialized: no start offset, no error.
        answer = await _describe(offsets, "g", {"u": [2]}, {})
        assert answer.topics[0].partitions == [SharePartitionOffset(2)]
        missing = await _describe(offsets, "nope", None, {})
        assert (missing.error, missing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")
        assert a.error == ErrorCode.NO_ERROR
        h.coordinator.shutdown_timers()

    asyncio.run(run())


def test_alter_resets_the_start_offset_of_an_empty_group_only() -> None:
    async def run() -> None:
        h, persister = _harness()
        a = h.join("a", ("t",))
        await _settle()
        offsets = h.coordinator.share_offsets
        busy = await offsets.alter("g", {"t": {0: 4}})
        assert (busy.error, busy.error_message) == (ErrorCode.NON_EMPTY_GROUP, NON_EMPTY_GROUP_MESSAGE)
        h.heartbeat("a", a.member_epoch)
        h.heartbeat("a", -1)
        group = h.coordinator.share_groups.groups["g"]
        epoch = group.group_epoch
        answer = await offsets.alter("g", {"t": {0: 4, 3: 1}, "u": {1: 7}, "missing": {0: 0}})
        assert answer.error == ErrorCode.NO_ERROR
        errors = {(t.topic_name, p.partition): p.error for t in answer.topics for p in t.partitions}
        assert errors == {("t", 0): ErrorCode.NO_ERROR, ("t", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                          ("u", 1): ErrorCode.NO_ERROR, ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # A new state epoch (the bumped group epoch) so the leaders' older state is fenced.
        assert group.group_epoch == epoch + 1
        assert persister.states[("g", TOPIC, 0)] == ShareGroupPartitionState(epoch + 1, 4, -1, ())
        assert persister.states[("g", OTHER, 1)].start_offset == 7
        assert group.is_initialized(OTHER, 1) and not group.is_initialized(OTHER, 0)
        described = await _describe(offsets, "g", None, {("t", 0): 10})
        assert {(t.topic_name, p.partition): (p.start_offset, p.lag) for t in described.topics
                for p in t.partitions} == {("t", 0): (4, 6), ("u", 1): (7, -1)}
        h.coordinator.shutdown_timers()

    asyncio.run(run())


def test_delete_offsets_deletes_the_state_of_an_empty_groups_topics() -> None:
    async def run() -> None:
        h, persister = _harness()
        a = h.join("a", ("t", "u"))
        await _settle()
        offsets = h.coordinator.share_offsets
        assert (await offsets.delete("g", ["u"])).error == ErrorCode.NON_EMPTY_GROUP
        h.heartbeat("a", a.member_epoch)
        h.heartbeat("a", -1)
        answer = await offsets.delete("g", ["u", "missing"])
        assert answer.error == ErrorCode.NO_ERROR
        assert [(t.topic_name, t.topic_id, t.error) for t in answer.topics] == [
            ("u", OTHER, ErrorCode.NO_ERROR),
            ("missing", uuid.UUID(int=0), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        assert sorted(p for _, topic, p in persister.deleted if topic == OTHER) == list(range(6))
        group = h.coordinator.share_groups.groups["g"]
        assert OTHER not in group.initialized and group.is_initialized(TOPIC, 0)
        assert ("g", TOPIC, 0) in persister.states
        h.coordinator.shutdown_timers()

    asyncio.run(run())


def test_the_offsets_changes_survive_a_reload_of_the_group() -> None:
    async def run() -> None:
        h, _ = _harness()
        a = h.join("a", ("t", "u"))
        await _settle()
        h.heartbeat("a", a.member_epoch)
        h.heartbeat("a", -1)
        await h.coordinator.share_offsets.delete("g", ["u"])
        await h.coordinator.share_offsets.alter("g", {"t": {0: 3}})
        group = h.coordinator.share_groups.groups["g"]
        reloaded = Harness(h.log)
        again = reloaded.coordinator.share_groups.groups["g"]
        assert again.initialized == group.initialized and again.group_epoch == group.group_epoch
        h.coordinator.shutdown_timers()
        reloaded.coordinator.shutdown_timers()

    asyncio.run(run())


def test_alter_creates_an_absent_group_that_a_member_then_reads_from() -> None:
    async def run() -> None:
        h, persister = _harness()
        answer = await h.coordinator.share_offsets.alter("fresh", {"t": {0: 6}})
        assert answer.error == ErrorCode.NO_ERROR
        group = h.coordinator.share_groups.groups["fresh"]
        assert (group.group_epoch, group.members, group.is_initialized(TOPIC, 0)) == (1, {}, True)
        assert persister.states[("fresh", TOPIC, 0)] == ShareGroupPartitionState(1, 6, -1, ())
        # Nothing to alter still creates it, durably: it comes back after a reload.
        assert (await h.coordinator.share_offsets.alter("bare", {"missing": {0: 1}})).error == ErrorCode.NO_ERROR
        reloaded = Harness(h.log)
        assert set(reloaded.coordinator.share_groups.groups) == {"fresh", "bare"}
        # A member joining keeps the start offset set before it: the partition is not initialized again.
        joined = h.heartbeat("m", 0, ("t",), group_id="fresh")
        await _settle()
        assert joined.assignment == {TOPIC: frozenset({0})}
        assert persister.states[("fresh", TOPIC, 0)].start_offset == 6
        h.coordinator.shutdown_timers()
        reloaded.coordinator.shutdown_timers()

    asyncio.run(run())


def test_a_group_of_another_type_is_not_found() -> None:
    async def run() -> None:
        h, _ = _harness()
        h.coordinator.share_groups.other_group = lambda group_id: group_id == "classic"
        answer = await _describe(h.coordinator.share_offsets, "classic", None, {})
        assert (answer.error, answer.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                        "Group classic is not a share group.")
        altered = await h.coordinator.share_offsets.alter("classic", {"t": {0: 1}})
        assert altered.error == ErrorCode.GROUP_ID_NOT_FOUND and "classic" not in h.coordinator.share_groups.groups
        assert (await h.coordinator.share_offsets.delete("nope", ["t"])).error == ErrorCode.GROUP_ID_NOT_FOUND
        h.coordinator.shutdown_timers()

    asyncio.run(run())
