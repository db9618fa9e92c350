"""The share-partition manager over an in-memory Persister and replica manager: fetch, acknowledge, restart."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import Any

from coordinator.common.scheduler import ManualScheduler
from coordinator.share.persister import PersisterStateBatch, RecordState, ShareGroupPartitionState
from coordinator.share.share_partition import AcknowledgementBatch, AcquiredRecords, SharePartitionConfig
from coordinator.share.share_partition_manager import (
    READ_COMMITTED,
    SHARE_READ_MAX_BYTES,
    ShareGroupSettings,
    SharePartitionManager,
    ShareTarget,
    _batches_worth_acquiring,
)
from protocol.errors import ErrorCode
from protocol.record_batch import iter_batch_headers
from storage.transaction_index import AbortedTxn
from tests.coordinator.share_partition_fakes import FakeReplicaManager, MemoryPersister, records_bytes

TOPIC_ID = uuid.UUID(int=42)
P0 = ShareTarget(TOPIC_ID, "t", 0)
P1 = ShareTarget(TOPIC_ID, "t", 1)
ACCEPT, RELEASE, REJECT = 1, 2, 3
LOCK_MS = 30_000


def earliest(isolation: int = 0, **config: Any) -> ShareGroupSettings:
    cfg = replace(SharePartitionConfig(record_lock_duration_ms=LOCK_MS), **config)
    return ShareGroupSettings(cfg, "earliest", isolation)


def make(persister: MemoryPersister | None = None, replicas: FakeReplicaManager | None = None,
         settings: ShareGroupSettings | None = None) -> tuple[SharePartitionManager, MemoryPersister,
                                                              FakeReplicaManager, ManualScheduler]:
    persister = persister or MemoryPersister()
    replicas = replicas or FakeReplicaManager()
    clock = ManualScheduler()
    chosen = settings or earliest()
    return SharePartitionManager(replicas, persister, clock, lambda group: chosen), persister, replicas, clock


async def fetch(manager: SharePartitionManager, member: str, *targets: ShareTarget, max_records: int = 500
                ) -> dict[ShareTarget, list[AcquiredRecords]]:
    got = await manager.fetch("g", member, targets or (P0,), max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                              max_records=max_records)
    for result in got.values():
        assert result.error_code == ErrorCode.NO_ERROR, result
    return {target: result.acquired for target, result in got.items()}


async def ack(manager: SharePartitionManager, member: str, first: int, last: int, kind: int,
              target: ShareTarget = P0) -> int:
    answer = await manager.acknowledge("g", member, [(target, [AcknowledgementBatch(first, last, (kind,))])])
    return answer[target][0]


def test_fetch_acquires_for_one_member_at_a_time() -> None:
    async def scenario() -> None:
        manager, _, replicas, _ = make()
        replicas.append("t", 0, 5)
        replicas.append("t", 0, 5)
        got = await manager.fetch("g", "m1", [P0], max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, max_records=3)
        assert got[P0].acquired == [AcquiredRecords(0, 4, 1)]
        offsets = [h.base_offset for _, h in iter_batch_headers(records_bytes(got[P0].records))]
        assert offsets == [0]  # the batch past the last acquired one is not sent
        assert (await fetch(manager, "m2"))[P0] == [AcquiredRecords(5, 9, 1)]
        assert (await fetch(manager, "m3"))[P0] == []
    asyncio.run(scenario())


def test_acknowledgement_is_durable_before_it_is_answered() -> None:
    async def scenario() -> None:
        manager, persister, replicas, _ = make()
        replicas.append("t", 0, 5)
        await fetch(manager, "m1")
        persister.hold = asyncio.Event()
        answer = asyncio.ensure_future(ack(manager, "m1", 0, 2, ACCEPT))
        await asyncio.sleep(0)
        assert not answer.done() and persister.writes == 0
        persister.hold.set()
        assert await answer == ErrorCode.NO_ERROR
        state = persister.states[("g", TOPIC_ID, 0)]
        assert state.start_offset == 3
        assert state.state_batches == (PersisterStateBatch(3, 4, RecordState.AVAILABLE, 1),)
        sp = manager.cached("g", TOPIC_ID, 0)
        assert sp is not None and sp.start_offset == 3
    asyncio.run(scenario())


def test_a_failed_write_answers_the_error_and_acknowledges_nothing() -> None:
    async def scenario() -> None:
        manager, persister, replicas, _ = make()
        replicas.append("t", 0, 5)
        await fetch(manager, "m1")
        persister.fail_with = ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert await ack(manager, "m1", 0, 4, ACCEPT) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert ("g", TOPIC_ID, 0) not in persister.states
        sp = manager.cached("g", TOPIC_ID, 0)
        assert sp is not None and sp.record_state(0) == (RecordState.ACQUIRED, 1, "m1")
        persister.fail_with = None
        assert await ack(manager, "m1", 0, 4, ACCEPT) == ErrorCode.NO_ERROR  # the member may try again
        assert persister.states[("g", TOPIC_ID, 0)].start_offset == 5
    asyncio.run(scenario())


def test_invalid_acknowledgements_write_nothing() -> None:
    async def scenario() -> None:
        manager, persister, replicas, _ = make()
        replicas.append("t", 0, 5)
        await fetch(manager, "m1")
        assert await ack(manager, "m2", 0, 4, ACCEPT) == ErrorCode.INVALID_RECORD_STATE
        assert persister.writes == 0
    asyncio.run(scenario())


def test_a_restart_never_redelivers_acknowledged_records() -> None:
    async def scenario() -> None:
        persister = MemoryPersister()
        manager, _, replicas, _ = make(persister)
        for _ in range(4):
            replicas.append("t", 0, 5)  # batches 0-4, 5-9, 10-14, 15-19
        await fetch(manager, "m1", max_records=10)  # 0-9
        await fetch(manager, "m2", max_records=5)  # 10-14
        assert await ack(manager, "m1", 0, 4, ACCEPT) == ErrorCode.NO_ERROR
        assert await ack(manager, "m2", 10, 12, ACCEPT) == ErrorCode.NO_ERROR
        assert await ack(manager, "m2", 13, 13, REJECT) == ErrorCode.NO_ERROR
        manager.close()  # the broker dies: 5-9 and 14 were acquired, never acknowledged
        restarted, _, _, _ = make(persister, replicas)
        got = (await fetch(restarted, "m3"))[P0]
        assert got == [AcquiredRecords(5, 9, 2), AcquiredRecords(14, 14, 2), AcquiredRecords(15, 19, 1)]
        offsets = {o for r in got for o in range(r.first_offset, r.last_offset + 1)}
        assert offsets.isdisjoint(range(5)) and offsets.isdisjoint(range(10, 14))
    asyncio.run(scenario())


def test_lock_expiry_redelivers_to_another_member() -> None:
    async def scenario() -> None:
        manager, _, replicas, clock = make()
        replicas.append("t", 0, 3)
        await fetch(manager, "m1")
        clock.advance(LOCK_MS)
        assert (await fetch(manager, "m2"))[P0] == [AcquiredRecords(0, 2, 2)]
        assert await ack(manager, "m1", 0, 2, ACCEPT) == ErrorCode.INVALID_RECORD_STATE
        assert await ack(manager, "m2", 0, 2, ACCEPT) == ErrorCode.NO_ERROR
    asyncio.run(scenario())


def test_release_and_reject_through_the_manager() -> None:
    async def scenario() -> None:
        manager, _, replicas, _ = make(settings=earliest(delivery_count_limit=2))
        replicas.append("t", 0, 2)
        await fetch(manager, "m1")
        assert await ack(manager, "m1", 0, 1, RELEASE) == ErrorCode.NO_ERROR
        assert (await fetch(manager, "m2"))[P0] == [AcquiredRecords(0, 1, 2)]
        assert await ack(manager, "m2", 0, 1, RELEASE) == ErrorCode.NO_ERROR  # at the limit: archived
        assert (await fetch(manager, "m1"))[P0] == []
        sp = manager.cached("g", TOPIC_ID, 0)
        assert sp is not None and sp.start_offset == 2
    asyncio.run(scenario())


def test_auto_offset_reset_latest_starts_at_the_high_watermark() -> None:
    async def scenario() -> None:
        manager, _, replicas, _ = make(settings=ShareGroupSettings())
        replicas.append("t", 0, 5)
        assert (await fetch(manager, "m1"))[P0] == []
        replicas.append("t", 0, 2)
        assert (await fetch(manager, "m1"))[P0] == [AcquiredRecords(5, 6, 1)]
    asyncio.run(scenario())


def test_persisted_start_offset_wins_over_auto_offset_reset() -> None:
    async def scenario() -> None:
        persister = MemoryPersister()
        persister.states[("g", TOPIC_ID, 0)] = ShareGroupPartitionState(1, 3, 0, ())
        manager, _, replicas, _ = make(persister, settings=ShareGroupSettings())
        replicas.append("t", 0, 5)
        assert (await fetch(manager, "m1"))[P0] == [AcquiredRecords(3, 4, 1)]
    asyncio.run(scenario())


def test_read_committed_never_acquires_aborted_records() -> None:
    async def scenario() -> None:
        manager, _, replicas, _ = make(settings=earliest(READ_COMMITTED))
        replicas.append("t", 0, 2)  # 0-1
        replicas.append("t", 0, 2, producer_id=9, transactional=True)  # 2-3, aborted
        replicas.append("t", 0, 1, producer_id=9, transactional=True, control=True)  # 4, abort marker
        replicas.append("t", 0, 2)  # 5-6
        replicas.aborted[("t", 0)] = [AbortedTxn(9, 2, 4, 4)]
        got = (await fetch(manager, "m1"))[P0]
        assert got == [AcquiredRecords(0, 1, 1), AcquiredRecords(5, 6, 1)]
        assert await ack(manager, "m1", 0, 1, ACCEPT) == ErrorCode.NO_ERROR
        assert await ack(manager, "m1", 5, 6, ACCEPT) == ErrorCode.NO_ERROR
        sp = manager.cached("g", TOPIC_ID, 0)
        assert sp is not None and sp.start_offset == 7
    asyncio.run(scenario())


def test_errors_and_leadership() -> None:
    async def scenario() -> None:
        manager, persister, replicas, _ = make()
        replicas.append("t", 0, 3)
        got = await manager.fetch("g", "m1", [P0, P1], max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                  max_records=10)
        assert got[P1].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert got[P0].acquired == [AcquiredRecords(0, 2, 1)]
        replicas.partitions[("t", 0)].leader_epoch = 1  # a new leader epoch: state is read again
        persister.states[("g", TOPIC_ID, 0)] = ShareGroupPartitionState(0, 1, 0, ())
        assert (await fetch(manager, "m2"))[P0] == [AcquiredRecords(1, 2, 1)]
        replicas.partitions[("t", 0)].is_leader = False
        got = await manager.fetch("g", "m1", [P0], max_wait_ms=0, min_bytes=1, max_bytes=1, max_records=1)
        assert got[P0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await ack(manager, "m2", 1, 2, ACCEPT) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    asyncio.run(scenario())


def test_retention_moves_the_start_offset() -> None:
    async def scenario() -> None:
        manager, _, replicas, _ = make()
        replicas.append("t", 0, 3)
        replicas.append("t", 0, 3)
        await fetch(manager, "m1", max_records=1)  # 0-2 acquired
        replicas.partitions[("t", 0)].log_start_offset = 3
        replicas.logs[("t", 0)].pop(0)
        sp = manager.cached("g", TOPIC_ID, 0)
        assert sp is not None
        await ack(manager, "m1", 0, 2, RELEASE)
        assert (await fetch(manager, "m2"))[P0] == []  # out of range: the start moves to the log start
        assert sp.start_offset == 3
        assert (await fetch(manager, "m2"))[P0] == [AcquiredRecords(3, 5, 1)]
    asyncio.run(scenario())


def test_release_gives_back_what_a_member_holds() -> None:
    async def scenario() -> None:
        manager, _, replicas, _ = make()
        replicas.append("t", 0, 3)
        await fetch(manager, "m1")
        assert manager.release("g", "m1", [(TOPIC_ID, 0), (TOPIC_ID, 1)]) == 3
        assert (await fetch(manager, "m2"))[P0] == [AcquiredRecords(0, 2, 2)]
    asyncio.run(scenario())


def test_max_records_is_shared_across_partitions() -> None:
    async def scenario() -> None:
        manager, _, replicas, _ = make()
        replicas.append("t", 0, 4)
        replicas.append("t", 1, 4)
        got = await fetch(manager, "m1", P0, P1, max_records=4)
        assert got == {P0: [AcquiredRecords(0, 3, 1)], P1: []}
    asyncio.run(scenario())


def test_a_fetch_at_the_record_lock_limit_waits_for_records_to_be_freed() -> None:
    async def scenario() -> None:
        manager, _, replicas, _ = make(settings=earliest(max_record_locks=3))
        replicas.append("t", 0, 3)
        replicas.append("t", 0, 3)
        await fetch(manager, "m1")  # 0-2: the partition is at its limit
        waiting = asyncio.ensure_future(manager.fetch("g", "m2", [P0], max_wait_ms=5_000, min_bytes=1,
                                                      max_bytes=1 << 20, max_records=10))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        assert await ack(manager, "m1", 0, 2, ACCEPT) == ErrorCode.NO_ERROR
        got = await asyncio.wait_for(waiting, 1)
        assert got[P0].acquired == [AcquiredRecords(3, 5, 1)]
        timed_out = await manager.fetch("g", "m3", [P0], max_wait_ms=20, min_bytes=1, max_bytes=1 << 20,
                                        max_records=10)
        assert timed_out[P0].acquired == [] and timed_out[P0].error_code == ErrorCode.NO_ERROR
    asyncio.run(scenario())


def test_state_initialized_without_a_start_offset_starts_where_auto_offset_reset_says() -> None:
    async def scenario() -> None:
        persister = MemoryPersister()
        await persister.initialize_state("g", TOPIC_ID, 0, 3, -1)
        manager, _, replicas, _ = make(persister)
        replicas.append("t", 0, 2)
        assert (await fetch(manager, "m1"))[P0] == [AcquiredRecords(0, 1, 1)]
        assert await ack(manager, "m1", 0, 1, ACCEPT) == ErrorCode.NO_ERROR
        state = persister.states[("g", TOPIC_ID, 0)]
        assert (state.state_epoch, state.start_offset) == (3, 2)  # written at the initialized state epoch
    asyncio.run(scenario())


def test_a_fenced_write_drops_the_share_partition_so_it_is_read_again() -> None:
    async def scenario() -> None:
        persister = MemoryPersister()
        manager, _, replicas, _ = make(persister)
        replicas.append("t", 0, 2)
        await fetch(manager, "m1")
        await persister.initialize_state("g", TOPIC_ID, 0, 5, 1)  # the group's state was reset meanwhile
        assert await ack(manager, "m1", 0, 1, ACCEPT) == ErrorCode.FENCED_STATE_EPOCH
        assert manager.cached("g", TOPIC_ID, 0) is None
        assert (await fetch(manager, "m2"))[P0] == [AcquiredRecords(1, 1, 1)]
    asyncio.run(scenario())


def test_concurrent_first_uses_read_the_state_once_and_share_a_failure() -> None:
    async def scenario() -> None:
        manager, persister, replicas, _ = make()
        replicas.append("t", 0, 2)
        first, second = await asyncio.gather(manager.share_partition("g", P0), manager.share_partition("g", P0))
        assert first is second and persister.reads == 1
        replicas.append("t", 1, 2)
        persister.read_fails_with = ErrorCode.COORDINATOR_NOT_AVAILABLE
        got = await asyncio.gather(*(manager.fetch("g", m, [P1], max_wait_ms=0, min_bytes=1, max_bytes=1,
                                                   max_records=1) for m in ("a", "b")))
        assert [g[P1].error_code for g in got] == [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2
        assert persister.reads == 2  # one read for both, and not cached: the next use reads again
        persister.read_fails_with = None
        assert (await fetch(manager, "a", P1))[P1] == [AcquiredRecords(0, 1, 1)]
    asyncio.run(scenario())


def test_acknowledgements_made_during_a_write_share_the_next_one() -> None:
    async def scenario() -> None:
        manager, persister, replicas, _ = make()
        for _ in range(3):
            replicas.append("t", 0, 2)
        for member in ("m1", "m2", "m3"):
            await fetch(manager, member, max_records=2)  # m1: 0-1, m2: 2-3, m3: 4-5
        persister.hold = asyncio.Event()
        answers = [asyncio.ensure_future(ack(manager, m, 2 * i, 2 * i + 1, ACCEPT))
                   for i, m in enumerate(("m1", "m2", "m3"))]
        await asyncio.sleep(0.01)
        assert not any(a.done() for a in answers)
        persister.hold.set()
        assert await asyncio.gather(*answers) == [ErrorCode.NO_ERROR] * 3
        assert persister.writes == 2  # m1's, then one for m2's and m3's together
        assert persister.states[("g", TOPIC_ID, 0)].start_offset == 6
    asyncio.run(scenario())


def test_a_failed_shared_write_answers_every_acknowledgement_in_it() -> None:
    async def scenario() -> None:
        manager, persister, replicas, _ = make()
        for _ in range(3):
            replicas.append("t", 0, 2)
        for member in ("m1", "m2", "m3"):
            await fetch(manager, member, max_records=2)
        persister.hold = asyncio.Event()
        first = asyncio.ensure_future(ack(manager, "m1", 0, 1, ACCEPT))  # its write is held
        await asyncio.sleep(0.01)
        later = [asyncio.ensure_future(ack(manager, "m2", 2, 3, ACCEPT)),
                 asyncio.ensure_future(ack(manager, "m3", 4, 5, REJECT))]
        await asyncio.sleep(0.01)
        persister.fail_with = ErrorCode.COORDINATOR_NOT_AVAILABLE
        persister.hold.set()
        assert await first == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert await asyncio.gather(*later) == [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2
        assert persister.write_attempts == 2  # m1's, then one for m2's and m3's together
        sp = manager.cached("g", TOPIC_ID, 0)
        assert sp is not None and sp.start_offset == 0
        assert [sp.record_state(o) for o in (0, 2, 4)] == [
            (RecordState.ACQUIRED, 1, m) for m in ("m1", "m2", "m3")]
        assert ("g", TOPIC_ID, 0) not in persister.states
    asyncio.run(scenario())


def test_lock_expiry_is_written_so_delivery_counts_and_the_limit_survive_a_restart() -> None:
    async def scenario() -> None:
        manager, persister, replicas, clock = make(settings=earliest(delivery_count_limit=2))
        replicas.append("t", 0, 2)
        replicas.append("t", 0, 2)
        await fetch(manager, "m1")  # 0-3, delivery 1
        clock.advance(LOCK_MS)
        await asyncio.sleep(0.01)
        state = persister.states[("g", TOPIC_ID, 0)]
        assert state.state_batches == (PersisterStateBatch(0, 3, RecordState.AVAILABLE, 1),)
        assert (await fetch(manager, "m1", max_records=2))[P0] == [AcquiredRecords(0, 1, 2)]
        clock.advance(LOCK_MS)  # the limit: 0-1 archived
        await asyncio.sleep(0.01)
        state = persister.states[("g", TOPIC_ID, 0)]
        assert state.start_offset == 2
        manager.close()
        restarted, _, _, _ = make(persister, replicas, earliest(delivery_count_limit=2))
        assert (await fetch(restarted, "m2"))[P0] == [AcquiredRecords(2, 3, 2)]
    asyncio.run(scenario())


def test_persister_errors_reach_consumers_as_kafka_maps_them() -> None:
    async def scenario() -> None:
        manager, persister, replicas, _ = make()
        replicas.append("t", 0, 2)
        persister.read_fails_with = ErrorCode.FENCED_LEADER_EPOCH
        got = await manager.fetch("g", "m1", [P0], max_wait_ms=0, min_bytes=1, max_bytes=1, max_records=1)
        assert got[P0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        persister.read_fails_with = None
        await fetch(manager, "m1")
        persister.fail_with = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert await ack(manager, "m1", 0, 1, ACCEPT) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        persister.fail_with = ErrorCode.FENCED_LEADER_EPOCH  # a newer leader wrote: this one is stale
        assert await ack(manager, "m1", 0, 1, ACCEPT) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert manager.cached("g", TOPIC_ID, 0) is None
    asyncio.run(scenario())


def test_auto_offset_reset_by_duration_starts_at_the_first_record_that_recent() -> None:
    async def scenario() -> None:
        clock_now = ManualScheduler().now_ms()
        for reset, expected in (("by_duration:PT1H", 3), ("by_duration:P1DT2H", 0), ("by_duration:PT1S", 6)):
            settings = ShareGroupSettings(SharePartitionConfig(), reset)
            manager, _, replicas, _ = make(settings=settings)
            replicas.append("t", 0, 3, timestamp=clock_now - 2 * 3_600_000)  # 0-2: two hours old
            replicas.append("t", 0, 3, timestamp=clock_now - 60_000)  # 3-5: a minute old
            sp = await manager.share_partition("g", P0)
            assert sp.start_offset == expected, reset
    asyncio.run(scenario())


def test_a_fetch_parses_only_the_batches_it_can_acquire() -> None:
    """Whole batches until the record budget is reached: a log far longer than one fetch acquires is not
    walked to its end on every fetch (the cost grew with the records behind the fetch offset)."""
    replicas = FakeReplicaManager()
    for _ in range(200):
        replicas.append("t", 0, 10)
    data = b"".join(batch for _, _, batch in replicas.logs[("t", 0)])
    headers = iter_batch_headers(data)
    batches, ends = _batches_worth_acquiring(headers, 0, 25)
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 9), (10, 19), (20, 29)]
    sizes = [len(batch) for _, _, batch in replicas.logs[("t", 0)][:3]]
    assert ends == [sum(sizes[:n]) for n in (1, 2, 3)]
    assert next(headers)[1].base_offset == 40  # the walk read one header past the budget and stopped
    # Records already in flight (before the end offset) do not use the budget: they may be AVAILABLE again.
    assert len(_batches_worth_acquiring(iter_batch_headers(data), 50, 25)[0]) == 8
    assert len(_batches_worth_acquiring(iter_batch_headers(data), 0, 10_000)[0]) == 200


def test_a_fetch_reads_a_bounded_number_of_bytes() -> None:
    class Recording(FakeReplicaManager):
        asked: list[int]

        def fetch_messages(self, params: Any, partitions: Any) -> Any:
            self.asked = [wanted.max_bytes for wanted in partitions]
            return super().fetch_messages(params, partitions)

    async def scenario() -> None:
        replicas = Recording()
        replicas.append("t", 0, 100)
        manager, _, _, _ = make(replicas=replicas)
        got = await manager.fetch("g", "m", (P0,), max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, max_records=500)
        assert [(r.first_offset, r.last_offset) for r in got[P0].acquired] == [(0, 99)]
        assert replicas.asked == [SHARE_READ_MAX_BYTES]
    asyncio.run(scenario())
