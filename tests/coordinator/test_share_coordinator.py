"""The share coordinator on a fake clock over an in-memory log: epochs, fencing, snapshots, reloads."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import pytest

from coordinator.common.scheduler import ManualScheduler
from coordinator.share.persister import PersisterError, PersisterStateBatch, RecordState, ShareGroupPartitionState
from coordinator.share.share_coordinator import ShareCoordinator, ShareCoordinatorConfig
from coordinator.share.share_coordinator_records import SHARE_SNAPSHOT, SHARE_UPDATE, SharePartitionKey, decode_key
from coordinator.share.share_state_batches import combine_state_batches
from protocol.errors import ErrorCode
from pytest_pafka.waiting import wait_until_async
from tests.coordinator.fakes import MemoryCoordinatorLog

TOPIC = uuid.uuid4()
AVAILABLE, ACKED, ARCHIVED = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED


def batch(first: int, last: int, state: int, count: int = 1) -> PersisterStateBatch:
    return PersisterStateBatch(first, last, state, count)


def make(log: MemoryCoordinatorLog | None = None, per_snapshot: int = 3) -> tuple[ShareCoordinator, MemoryCoordinatorLog]:
    log = log or MemoryCoordinatorLog(num_partitions=5)
    coordinator = ShareCoordinator(0, log, ManualScheduler(), ShareCoordinatorConfig(snapshot_update_records=per_snapshot))
    for partition in range(log.num_partitions):
        coordinator.load_partition(partition)
    return coordinator, log


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


def types_written(coordinator: ShareCoordinator, log: MemoryCoordinatorLog, group: str, partition: int) -> list[int]:
    key = SharePartitionKey(group, TOPIC, partition)
    records = log.records.get(coordinator.partition_for(key), [])
    return [decode_key(k).record_type for _, k, _ in records if decode_key(k).key == key]


def test_initialize_then_read_gives_the_epoch_and_start_offset() -> None:
    async def scenario() -> None:
        coordinator, _ = make()
        assert await coordinator.read_state("g", TOPIC, 0, -1) is None
        await coordinator.initialize_state("g", TOPIC, 0, 1, 42)
        assert await coordinator.read_state("g", TOPIC, 0, -1) == ShareGroupPartitionState(1, 42, -1, ())
        assert await coordinator.read_state_summary("g", TOPIC, 0, -1) == (1, 42, -1)
    run(scenario)


def test_writes_overlay_batches_and_prune_below_the_start_offset() -> None:
    async def scenario() -> None:
        coordinator, _ = make()
        await coordinator.initialize_state("g", TOPIC, 0, 1, 0)
        await coordinator.write_state("g", TOPIC, 0, ShareGroupPartitionState(1, 0, 5, (batch(0, 9, ACKED),)))
        await coordinator.write_state("g", TOPIC, 0, ShareGroupPartitionState(
            1, 5, 5, (batch(8, 12, AVAILABLE, 2), batch(13, 13, ARCHIVED, 5))))
        state = await coordinator.read_state("g", TOPIC, 0, 5)
        assert state == ShareGroupPartitionState(1, 5, 5, (batch(5, 7, ACKED), batch(8, 12, AVAILABLE, 2),
                                                           batch(13, 13, ARCHIVED, 5)))
    run(scenario)


def test_an_older_state_epoch_is_fenced_and_changes_nothing() -> None:
    async def scenario() -> None:
        coordinator, log = make()
        await coordinator.initialize_state("g", TOPIC, 0, 2, 0)
        written = sum(len(r) for r in log.records.values())
        with pytest.raises(PersisterError) as fenced:
            await coordinator.write_state("g", TOPIC, 0, ShareGroupPartitionState(1, 3, 0, (batch(0, 2, ACKED),)))
        assert fenced.value.error_code == ErrorCode.FENCED_STATE_EPOCH
        with pytest.raises(PersisterError) as older_init:
            await coordinator.initialize_state("g", TOPIC, 0, 1, 7)
        assert older_init.value.error_code == ErrorCode.FENCED_STATE_EPOCH
        assert sum(len(r) for r in log.records.values()) == written
        assert await coordinator.read_state("g", TOPIC, 0, -1) == ShareGroupPartitionState(2, 0, -1, ())
    run(scenario)


def test_initialize_at_the_same_epoch_keeps_the_state_and_a_newer_epoch_resets_it() -> None:
    async def scenario() -> None:
        coordinator, _ = make()
        await coordinator.initialize_state("g", TOPIC, 0, 1, 0)
        await coordinator.write_state("g", TOPIC, 0, ShareGroupPartitionState(1, 4, 3, (batch(4, 6, ACKED),)))
        await coordinator.initialize_state("g", TOPIC, 0, 1, 100)
        # A write sets neither epoch: only an initialize sets the state epoch, only a read the leader epoch.
        assert await coordinator.read_state("g", TOPIC, 0, -1) == ShareGroupPartitionState(1, 4, -1, (batch(4, 6, ACKED),))
        await coordinator.write_state("g", TOPIC, 0, ShareGroupPartitionState(5, 4, 3, ()))
        assert await coordinator.read_state_summary("g", TOPIC, 0, -1) == (1, 4, -1)
        await coordinator.initialize_state("g", TOPIC, 0, 2, 100)
        assert await coordinator.read_state("g", TOPIC, 0, -1) == ShareGroupPartitionState(2, 100, -1, ())
    run(scenario)


def test_a_newer_leader_epoch_read_fences_the_previous_leaders_writes() -> None:
    async def scenario() -> None:
        coordinator, _ = make()
        await coordinator.initialize_state("g", TOPIC, 0, 1, 0)
        await coordinator.write_state("g", TOPIC, 0, ShareGroupPartitionState(1, 0, 3, (batch(0, 1, ACKED),)))
        state = await coordinator.read_state("g", TOPIC, 0, 4)
        assert state is not None and state.leader_epoch == 4
        with pytest.raises(PersisterError) as fenced:
            await coordinator.write_state("g", TOPIC, 0, ShareGroupPartitionState(1, 0, 3, (batch(2, 2, ACKED),)))
        assert fenced.value.error_code == ErrorCode.FENCED_LEADER_EPOCH
        with pytest.raises(PersisterError) as stale_read:
            await coordinator.read_state("g", TOPIC, 0, 3)
        assert stale_read.value.error_code == ErrorCode.FENCED_LEADER_EPOCH
    run(scenario)


def test_a_snapshot_every_n_updates_and_a_reload_gives_the_same_state() -> None:
    async def scenario() -> None:
        coordinator, log = make(per_snapshot=3)
        await coordinator.initialize_state("g", TOPIC, 1, 1, 0)
        for i in range(8):
            await coordinator.write_state("g", TOPIC, 1, ShareGroupPartitionState(
                1, i, 7, (batch(i, i, ACKED), batch(i + 1, i + 3, AVAILABLE, i + 1))))
        S, U = SHARE_SNAPSHOT, SHARE_UPDATE
        assert types_written(coordinator, log, "g", 1) == [S, U, U, U, S, U, U, U, S]
        before = await coordinator.read_state("g", TOPIC, 1, -1)
        reloaded, _ = make(log)
        assert await reloaded.read_state("g", TOPIC, 1, -1) == before
        assert before == ShareGroupPartitionState(1, 7, -1, (batch(7, 7, ACKED), batch(8, 10, AVAILABLE, 8)))
    run(scenario)


def test_delete_writes_tombstones_and_a_reload_has_no_state() -> None:
    async def scenario() -> None:
        coordinator, log = make()
        await coordinator.initialize_state("g", TOPIC, 2, 1, 0)
        await coordinator.write_state("g", TOPIC, 2, ShareGroupPartitionState(1, 0, 1, (batch(0, 0, ACKED),)))
        await coordinator.initialize_state("h", TOPIC, 2, 1, 9)
        await coordinator.delete_state("g", TOPIC, 2)
        assert await coordinator.read_state("g", TOPIC, 2, -1) is None
        reloaded, _ = make(log)
        assert await reloaded.read_state("g", TOPIC, 2, -1) is None
        assert await reloaded.read_state_summary("h", TOPIC, 2, -1) == (1, 9, -1)
    run(scenario)


def test_a_share_partition_never_initialized_is_neither_read_nor_written() -> None:
    async def scenario() -> None:
        coordinator, log = make()
        assert await coordinator.read_state("g", TOPIC, 0, 3) is None
        with pytest.raises(PersisterError) as refused:
            await coordinator.write_state("g", TOPIC, 0, ShareGroupPartitionState(1, 0, 3, (batch(0, 1, ACKED),)))
        assert refused.value.error_code == ErrorCode.INVALID_REQUEST
        assert refused.value.message == "Write operation on uninitialized share partition not allowed."
        assert not any(log.records.values())
    run(scenario)


def test_a_failed_append_answers_kafkas_error_and_changes_nothing() -> None:
    async def scenario() -> None:
        coordinator, log = make()
        await coordinator.initialize_state("g", TOPIC, 0, 1, 0)
        log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        with pytest.raises(PersisterError) as failed:
            await coordinator.write_state("g", TOPIC, 0, ShareGroupPartitionState(1, 5, 0, ()))
        assert failed.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert await coordinator.read_state_summary("g", TOPIC, 0, -1) == (1, 0, -1)
    run(scenario)


def test_loading_and_other_leaders_partitions_are_refused() -> None:
    async def scenario() -> None:
        log = MemoryCoordinatorLog(num_partitions=1)
        first = ShareCoordinator(0, log, ManualScheduler(), ShareCoordinatorConfig())
        first.on_election(0)  # empty: served at once
        await first.initialize_state("g", TOPIC, 0, 1, 0)
        second = ShareCoordinator(1, log, ManualScheduler(), ShareCoordinatorConfig())
        second.on_election(0)  # a log to read: loading until the read is replayed
        with pytest.raises(PersisterError) as loading:
            await second.read_state("g", TOPIC, 0, -1)
        assert loading.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await wait_until_async(lambda: not second.loading, 5, "the partition loaded")
        assert await second.read_state_summary("g", TOPIC, 0, -1) == (1, 0, -1)
        second.on_resignation(0)
        with pytest.raises(PersisterError) as moved:
            await second.read_state("g", TOPIC, 0, -1)
        assert moved.value.error_code == ErrorCode.NOT_COORDINATOR
        await second.shutdown()
    run(scenario)


def test_combining_batches_merges_neighbours_with_the_same_state() -> None:
    combined = combine_state_batches([batch(0, 4, ACKED), batch(5, 9, AVAILABLE, 2)],
                                     [batch(5, 9, ACKED), batch(20, 19, ACKED)], 2)
    assert combined == (batch(2, 9, ACKED),)


def test_records_before_every_keys_latest_snapshot_are_pruned_and_a_reload_of_the_rest_is_the_same() -> None:
    async def scenario() -> None:
        log = MemoryCoordinatorLog(num_partitions=1)
        clock = ManualScheduler()
        deleted: list[tuple[int, int]] = []

        async def delete_records(partition: int, before: int) -> ErrorCode:
            deleted.append((partition, before))
            return ErrorCode.NO_ERROR

        config = ShareCoordinatorConfig(snapshot_update_records=2, prune_interval_ms=1_000)
        coordinator = ShareCoordinator(0, log, clock, config, delete_records)
        coordinator.startup([0])
        await coordinator.initialize_state("a", TOPIC, 0, 1, 0)  # snapshot at 0
        for i in range(4):  # updates at 1 and 2, a snapshot at 3, an update at 4
            await coordinator.write_state("a", TOPIC, 0, ShareGroupPartitionState(1, i, 0, (batch(i, i + 1, ACKED),)))
        await coordinator.initialize_state("b", TOPIC, 0, 1, 50)  # snapshot at 5
        clock.advance(1_000)
        await wait_until_async(lambda: deleted, 5, "a prune")
        assert deleted == [(0, 3)]
        kept = MemoryCoordinatorLog(num_partitions=1)
        kept.records[0] = [r for r in log.records[0] if r[0] >= 3]
        reloaded, _ = make(kept)
        for group in ("a", "b"):
            assert (await reloaded.read_state(group, TOPIC, 0, -1)) == (await coordinator.read_state(group, TOPIC, 0, -1))
        await coordinator.delete_state("a", TOPIC, 0)
        await coordinator.delete_state("b", TOPIC, 0)
        clock.advance(1_000)
        await wait_until_async(lambda: len(deleted) == 2, 5, "a second prune")
        assert deleted[1] == (0, len(log.records[0]))  # no state left: everything goes
        await coordinator.shutdown()
        assert clock.pending == 0
    run(scenario)


def test_cold_keys_are_snapshotted_again_so_the_prune_moves_past_their_old_records() -> None:
    async def scenario() -> None:
        log = MemoryCoordinatorLog(num_partitions=1)
        clock = ManualScheduler()
        deleted: list[int] = []

        async def delete_records(partition: int, before: int) -> ErrorCode:
            deleted.append(before)
            return ErrorCode.NO_ERROR

        config = ShareCoordinatorConfig(snapshot_update_records=100, prune_interval_ms=2_000,
                                        cold_snapshot_interval_ms=1_000)
        coordinator = ShareCoordinator(0, log, clock, config, delete_records)
        coordinator.startup([0])
        await coordinator.initialize_state("idle", TOPIC, 0, 1, 0)  # snapshot at 0
        await coordinator.initialize_state("busy", TOPIC, 0, 1, 0)  # snapshot at 1
        for i in range(3):  # updates at 2, 3, 4
            await coordinator.write_state("busy", TOPIC, 0, ShareGroupPartitionState(1, i, 0, (batch(i, i, ACKED),)))
        before = {g: await coordinator.read_state(g, TOPIC, 0, -1) for g in ("idle", "busy")}
        clock.advance(1_000)
        await wait_until_async(lambda: len(log.records[0]) == 7, 5, "two cold snapshots")
        assert [decode_key(k).record_type for _, k, _ in log.records[0][5:]] == [SHARE_SNAPSHOT, SHARE_SNAPSHOT]
        clock.advance(1_000)
        await wait_until_async(lambda: deleted, 5, "a prune")
        assert deleted == [5]
        kept = MemoryCoordinatorLog(num_partitions=1)
        kept.records[0] = [r for r in log.records[0] if r[0] >= 5]
        reloaded, _ = make(kept)
        assert {g: await reloaded.read_state(g, TOPIC, 0, -1) for g in ("idle", "busy")} == before
        await coordinator.shutdown()
    run(scenario)
