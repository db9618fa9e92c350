"""The share-partition state machine on a fake clock: acquisition, locks, acknowledgements, start offset."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest

from coordinator.common.scheduler import ManualScheduler
from coordinator.share.persister import PersisterStateBatch, RecordState, ShareGroupPartitionState
from coordinator.share.share_partition import (
    AbortedTransaction,
    AcknowledgementBatch,
    AcquiredRecords,
    FetchedBatch,
    ShareAcknowledgeError,
    SharePartition,
    SharePartitionConfig,
)
from protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=7)
LOCK_MS = 30_000
ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


def make(start: int = 0, batches: tuple[PersisterStateBatch, ...] = (), clock: ManualScheduler | None = None,
         **config: Any) -> tuple[SharePartition, ManualScheduler]:
    clock = clock or ManualScheduler()
    cfg = replace(SharePartitionConfig(record_lock_duration_ms=LOCK_MS), **config)
    state = ShareGroupPartitionState(state_epoch=0, start_offset=start, leader_epoch=0, state_batches=batches)
    return SharePartition("g", TOPIC, 0, clock, cfg, state), clock


def log(*ranges: tuple[int, int]) -> list[FetchedBatch]:
    return [FetchedBatch(first, last) for first, last in ranges]


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, types)


def settle(sp: SharePartition, member: str, *batches: AcknowledgementBatch) -> None:
    sp.commit(sp.acknowledge(member, batches))


def states(sp: SharePartition, first: int, last: int) -> list[tuple[RecordState, int, str | None] | None]:
    return [sp.record_state(o) for o in range(first, last + 1)]


def test_acquire_new_batches_locks_them_for_the_member() -> None:
    sp, clock = make()
    assert sp.next_fetch_offset() == 0
    got = sp.acquire("m1", log((0, 4), (5, 9)), max_records=500)
    assert got == [AcquiredRecords(0, 9, 1)]
    assert sp.end_offset == 10 and sp.start_offset == 0
    assert states(sp, 0, 0) == [(RecordState.ACQUIRED, 1, "m1")]
    assert sp.next_fetch_offset() == 10
    assert clock.pending == 1  # one lock timer for the acquisition


def test_acquire_stops_at_max_records_on_a_batch_boundary() -> None:
    sp, _ = make()
    assert sp.acquire("m1", log((0, 4), (5, 9), (10, 14)), max_records=6) == [AcquiredRecords(0, 9, 1)]
    assert sp.end_offset == 10


def test_max_record_locks_bounds_the_in_flight_records() -> None:
    sp, _ = make(max_record_locks=5)
    assert sp.acquire("m1", log((0, 2), (3, 5), (6, 8)), max_records=100) == [AcquiredRecords(0, 5, 1)]
    assert sp.acquire("m2", log((6, 8)), max_records=100) == []
    assert not sp.can_acquire()
    settle(sp, "m1", ack(0, 5, ACCEPT))
    assert sp.start_offset == 6 and sp.can_acquire()
    assert sp.acquire("m2", log((6, 8)), max_records=100) == [AcquiredRecords(6, 8, 1)]


def test_accept_acknowledges_and_advances_the_start_offset() -> None:
    sp, clock = make()
    sp.acquire("m1", log((0, 9)), max_records=100)
    settle(sp, "m1", ack(0, 3, ACCEPT))
    assert sp.start_offset == 4
    assert sp.record_state(3) is None
    settle(sp, "m1", ack(4, 9, ACCEPT))
    assert sp.start_offset == 10 and sp.in_flight_count == 0
    assert clock.pending == 0  # the emptied lock's timer is cancelled


def test_release_makes_records_available_again_with_their_delivery_count() -> None:
    sp, _ = make()
    sp.acquire("m1", log((0, 4)), max_records=100)
    settle(sp, "m1", ack(2, 3, RELEASE))
    assert states(sp, 2, 3) == [(RecordState.AVAILABLE, 1, None)] * 2
    assert sp.next_fetch_offset() == 2
    # The next read starts at offset 2; the log returns the whole batch 0-4.
    assert sp.acquire("m2", log((0, 4)), max_records=100) == [AcquiredRecords(2, 3, 2)]
    assert states(sp, 2, 3) == [(RecordState.ACQUIRED, 2, "m2")] * 2


def test_reject_archives() -> None:
    sp, _ = make()
    sp.acquire("m1", log((0, 4)), max_records=100)
    pending = sp.acknowledge("m1", [ack(0, 4, ACCEPT, REJECT, ACCEPT, REJECT, RELEASE)])
    assert states(sp, 0, 3) == [(RecordState.ACKNOWLEDGED, 1, None), (RecordState.ARCHIVED, 1, None)] * 2
    sp.commit(pending)
    assert sp.start_offset == 4
    assert states(sp, 4, 4) == [(RecordState.AVAILABLE, 1, None)]
    sp.acquire("m1", log((4, 4)), max_records=100)
    settle(sp, "m1", ack(4, 4, ACCEPT))
    assert sp.start_offset == 5


def test_lock_expiry_redelivers_with_delivery_count_plus_one() -> None:
    sp, clock = make()
    sp.acquire("m1", log((0, 4)), max_records=100)
    clock.advance(LOCK_MS - 1)
    assert states(sp, 0, 0) == [(RecordState.ACQUIRED, 1, "m1")]
    clock.advance(1)
    assert states(sp, 0, 4) == [(RecordState.AVAILABLE, 1, None)] * 5
    assert sp.acquire("m2", log((0, 4)), max_records=100) == [AcquiredRecords(0, 4, 2)]
    # The first holder's acknowledgement of what it no longer holds is refused whole.
    with pytest.raises(ShareAcknowledgeError) as err:
        sp.acknowledge("m1", [ack(0, 4, ACCEPT)])
    assert err.value.error_code == ErrorCode.INVALID_RECORD_STATE
    assert states(sp, 0, 0) == [(RecordState.ACQUIRED, 2, "m2")]


def test_delivery_count_limit_archives_at_expiry_and_release() -> None:
    sp, clock = make(delivery_count_limit=2)
    sp.acquire("m1", log((0, 1)), max_records=100)
    clock.advance(LOCK_MS)
    assert sp.acquire("m1", log((0, 1)), max_records=100) == [AcquiredRecords(0, 1, 2)]
    settle(sp, "m1", ack(1, 1, RELEASE))
    assert states(sp, 1, 1) == [(RecordState.ARCHIVED, 2, None)]
    clock.advance(LOCK_MS)
    assert sp.record_state(0) is None and sp.start_offset == 2  # both archived: the start moved past them
    assert sp.acquire("m1", log((0, 1)), max_records=100) == []


def test_acknowledgement_is_all_or_nothing() -> None:
    sp, _ = make()
    sp.acquire("m1", log((0, 4)), max_records=100)
    sp.acquire("m2", log((5, 9)), max_records=100)
    with pytest.raises(ShareAcknowledgeError) as err:
        sp.acknowledge("m1", [ack(0, 4, ACCEPT), ack(5, 5, ACCEPT)])
    assert err.value.error_code == ErrorCode.INVALID_RECORD_STATE
    assert states(sp, 0, 0) == [(RecordState.ACQUIRED, 1, "m1")]
    for bad in (ack(0, 4, ACCEPT, ACCEPT), ack(0, 0, 9), ack(3, 2, ACCEPT)):
        with pytest.raises(ShareAcknowledgeError) as err:
            sp.acknowledge("m1", [bad])
        assert err.value.error_code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ShareAcknowledgeError):
        sp.acknowledge("m1", [ack(0, 2, ACCEPT), ack(2, 3, ACCEPT)])  # overlapping
    with pytest.raises(ShareAcknowledgeError):
        sp.acknowledge("m1", [ack(10, 12, ACCEPT)])  # beyond the end


def test_gap_archives_and_may_name_offsets_already_done() -> None:
    sp, _ = make()
    sp.acquire("m1", log((0, 2), (5, 6)), max_records=100)  # 3-4 absent from the log
    assert states(sp, 3, 4) == [None, None]
    settle(sp, "m1", ack(0, 6, ACCEPT, GAP, ACCEPT, GAP, GAP, ACCEPT, ACCEPT))
    assert sp.start_offset == 7 and sp.in_flight_count == 0
    settle(sp, "m1", ack(1, 1, GAP))  # below the start: already done, nothing to do


def test_offsets_absent_from_the_log_are_archived_when_read_past() -> None:
    # Persisted state names 0-9 as delivered once; the log now (compacted) holds only 0-2 and 8-9.
    sp, _ = make(batches=(PersisterStateBatch(0, 9, RecordState.AVAILABLE, 1),))
    got = sp.acquire("m1", log((0, 2), (8, 9)), max_records=100)
    assert got == [AcquiredRecords(0, 2, 2), AcquiredRecords(8, 9, 2)]
    assert states(sp, 3, 7) == [(RecordState.ARCHIVED, 1, None)] * 5
    settle(sp, "m1", ack(0, 2, ACCEPT), ack(8, 9, ACCEPT))
    assert sp.start_offset == 10


def test_read_committed_never_delivers_aborted_records_or_markers() -> None:
    sp, _ = make()
    batches = [
        FetchedBatch(0, 1),                                                         # plain
        FetchedBatch(2, 3, producer_id=7, is_transactional=True),                   # aborted
        FetchedBatch(4, 5, producer_id=8, is_transactional=True),                   # committed
        FetchedBatch(6, 6, producer_id=7, is_transactional=True, is_control=True),  # abort marker
        FetchedBatch(7, 7, producer_id=8, is_transactional=True, is_control=True),  # commit marker
        FetchedBatch(8, 9, producer_id=7, is_transactional=True),                   # a later, committed txn
    ]
    got = sp.acquire("m1", batches, max_records=100, aborted=[AbortedTransaction(7, 2)])
    assert got == [AcquiredRecords(0, 1, 1), AcquiredRecords(4, 5, 1), AcquiredRecords(8, 9, 1)]
    assert states(sp, 2, 3) == [(RecordState.ARCHIVED, 0, None)] * 2
    settle(sp, "m1", ack(0, 1, ACCEPT), ack(4, 5, ACCEPT), ack(8, 9, ACCEPT))
    assert sp.start_offset == 10 and sp.in_flight_count == 0


def test_read_uncommitted_delivers_transactional_data_but_never_markers() -> None:
    sp, _ = make()
    batches = [FetchedBatch(0, 1, producer_id=7, is_transactional=True),
               FetchedBatch(2, 2, producer_id=7, is_transactional=True, is_control=True),
               FetchedBatch(3, 3)]
    assert sp.acquire("m1", batches, max_records=100) == [AcquiredRecords(0, 1, 1), AcquiredRecords(3, 3, 1)]
    # A consumer may still acknowledge the marker's offset as a gap.
    settle(sp, "m1", ack(0, 3, ACCEPT, ACCEPT, GAP, ACCEPT))
    assert sp.start_offset == 4


def test_rollback_returns_records_to_their_holder_or_releases_them_after_expiry() -> None:
    sp, clock = make()
    sp.acquire("m1", log((0, 4)), max_records=100)
    pending = sp.acknowledge("m1", [ack(0, 4, ACCEPT)])
    written = sp.persistent_state()
    assert (written.start_offset, written.state_batches) == (5, ())  # what the write makes durable
    assert sp.start_offset == 0  # not moved before the write is durable
    sp.rollback(pending)
    assert states(sp, 0, 4) == [(RecordState.ACQUIRED, 1, "m1")] * 5
    pending = sp.acknowledge("m1", [ack(0, 4, ACCEPT)])
    clock.advance(LOCK_MS)  # expires while the write is in flight: nothing is ACQUIRED any more
    assert states(sp, 0, 0) == [(RecordState.ACKNOWLEDGED, 1, None)]
    sp.rollback(pending)
    assert states(sp, 0, 4) == [(RecordState.AVAILABLE, 1, None)] * 5


def test_release_member_releases_what_it_holds() -> None:
    sp, clock = make()
    sp.acquire("m1", log((0, 4)), max_records=100)
    sp.acquire("m2", log((5, 9)), max_records=100)
    assert sp.release_member("m1") == 5
    assert states(sp, 0, 0) == [(RecordState.AVAILABLE, 1, None)]
    assert states(sp, 5, 5) == [(RecordState.ACQUIRED, 1, "m2")]
    assert clock.pending == 1


def test_persistent_state_writes_acquired_as_available_and_drops_the_undelivered_tail() -> None:
    sp, _ = make(start=100)
    sp.acquire("m1", log((100, 104)), max_records=100)
    sp.acquire("m2", log((105, 109)), max_records=100)
    settle(sp, "m2", ack(105, 106, ACCEPT))
    pending = sp.acknowledge("m1", [ack(100, 100, ACCEPT), ack(102, 102, REJECT)])
    state = sp.persistent_state()
    assert state.start_offset == 101  # past the pending acknowledgement's done head
    assert state.state_batches == (
        PersisterStateBatch(101, 101, RecordState.AVAILABLE, 1),
        PersisterStateBatch(102, 102, RecordState.ARCHIVED, 1),
        PersisterStateBatch(103, 104, RecordState.AVAILABLE, 1),
        PersisterStateBatch(105, 106, RecordState.ACKNOWLEDGED, 1),
        PersisterStateBatch(107, 109, RecordState.AVAILABLE, 1),
    )
    sp.commit(pending)
    assert sp.start_offset == 101


def test_loading_persisted_state_never_redelivers_acknowledged_records() -> None:
    batches = (
        PersisterStateBatch(10, 11, RecordState.ACKNOWLEDGED, 1),
        PersisterStateBatch(12, 13, RecordState.AVAILABLE, 2),
        PersisterStateBatch(14, 14, RecordState.ARCHIVED, 5),
        PersisterStateBatch(15, 15, RecordState.ACKNOWLEDGED, 1),
        PersisterStateBatch(18, 19, RecordState.ACQUIRED, 1),
    )
    sp, _ = make(start=10, batches=batches)
    assert sp.start_offset == 12 and sp.end_offset == 20
    assert sp.next_fetch_offset() == 12
    got = sp.acquire("m1", log((10, 19), (20, 21)), max_records=100)
    assert got == [AcquiredRecords(12, 13, 3), AcquiredRecords(16, 17, 1), AcquiredRecords(18, 19, 2),
                   AcquiredRecords(20, 21, 1)]
    assert sp.record_state(15) == (RecordState.ACKNOWLEDGED, 1, None)


def test_close_cancels_the_lock_timers() -> None:
    sp, clock = make()
    sp.acquire("m1", log((0, 4)), max_records=100)
    sp.close()
    assert clock.pending == 0


RENEW = 4


def test_renew_restarts_the_lock_and_keeps_the_records_acquired() -> None:
    sp, clock = make()
    sp.acquire("m1", log((0, 4)), max_records=100)
    clock.advance(20_000)
    pending = sp.acknowledge("m1", [ack(0, 2, RENEW)], allow_renew=True)
    assert not pending.changed  # nothing durable changed: no write needed
    sp.commit(pending)
    clock.advance(10_000)  # the first lock's time is up: 3-4 go, 0-2 stay
    assert states(sp, 0, 4) == [(RecordState.ACQUIRED, 1, "m1")] * 3 + [(RecordState.AVAILABLE, 1, None)] * 2
    clock.advance(LOCK_MS - 10_000)  # the renewed lock's time is up
    assert states(sp, 0, 2) == [(RecordState.AVAILABLE, 1, None)] * 3


def test_renew_needs_version_2_the_holder_and_the_group_config() -> None:
    sp, _ = make()
    sp.acquire("m1", log((0, 1)), max_records=100)
    with pytest.raises(ShareAcknowledgeError) as err:
        sp.acknowledge("m1", [ack(0, 1, RENEW)])
    assert err.value.error_code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ShareAcknowledgeError) as err:
        sp.acknowledge("m2", [ack(0, 1, RENEW)], allow_renew=True)
    assert err.value.error_code == ErrorCode.INVALID_RECORD_STATE
    off, _ = make(renew_acknowledge_enable=False)
    off.acquire("m1", log((0, 1)), max_records=100)
    with pytest.raises(ShareAcknowledgeError) as err:
        off.acknowledge("m1", [ack(0, 1, RENEW)], allow_renew=True)
    assert err.value.error_code == ErrorCode.INVALID_RECORD_STATE


def test_record_limit_mode_splits_batches() -> None:
    sp, _ = make()
    assert sp.acquire("m1", log((0, 4), (5, 9)), max_records=3, record_limit=True) == [AcquiredRecords(0, 2, 1)]
    assert sp.end_offset == 3 and sp.next_fetch_offset() == 3
    # The next read starts in the middle of the batch 0-4.
    assert sp.acquire("m2", log((0, 4), (5, 9)), max_records=4, record_limit=True) == [AcquiredRecords(3, 6, 1)]
    settle(sp, "m1", ack(0, 2, RELEASE))
    got = sp.acquire("m3", log((0, 4), (5, 9)), max_records=4, record_limit=True)
    assert got == [AcquiredRecords(0, 2, 2), AcquiredRecords(7, 7, 1)]


def test_a_failed_write_gives_records_back_to_a_lock_another_write_emptied() -> None:
    sp, clock = make()
    sp.acquire("m1", log((0, 9)), max_records=100)
    first = sp.acknowledge("m1", [ack(0, 4, ACCEPT)])
    second = sp.acknowledge("m1", [ack(5, 9, ACCEPT)])  # the lock holds nothing now
    sp.commit(first)
    sp.rollback(second)  # 5-9 are the member's again, under the same lock...
    assert states(sp, 5, 5) == [(RecordState.ACQUIRED, 1, "m1")]
    clock.advance(LOCK_MS)  # ...whose timer still runs
    assert states(sp, 5, 9) == [(RecordState.AVAILABLE, 1, None)] * 5
