"""A share partition's in-flight runs: split where an operation covers part of one, one run per acquisition."""

from __future__ import annotations

from coordinator.share.in_flight_batches import AcquisitionLock, InFlightBatch, InFlightBatches
from coordinator.share.persister import RecordState
from tests.coordinator.test_share_partition import ACCEPT, RELEASE, ack, log, make, settle


def _runs(batches: InFlightBatches) -> list[tuple[int, int, RecordState, int]]:
    return [(b.first_offset, b.last_offset, b.state, b.delivery_count) for b in batches]


def test_within_splits_the_runs_at_the_range_edges_and_keeps_the_count() -> None:
    batches = InFlightBatches()
    batches.add(InFlightBatch(0, 9, RecordState.AVAILABLE, 1))
    batches.add(InFlightBatch(12, 19, RecordState.ARCHIVED, 2))
    inside = batches.within(5, 14)
    assert [(b.first_offset, b.last_offset) for b in inside] == [(5, 9), (12, 14)]
    assert _runs(batches) == [(0, 4, RecordState.AVAILABLE, 1), (5, 9, RecordState.AVAILABLE, 1),
                              (12, 14, RecordState.ARCHIVED, 2), (15, 19, RecordState.ARCHIVED, 2)]
    assert batches.record_count == 18
    assert batches.find(11) is None and batches.find(13) is inside[1]
    assert [b.first_offset for b in batches.overlapping(3, 12)] == [0, 5, 12]
    batches.remove(inside[0])
    assert batches.record_count == 13 and batches.first_at_or_after(5) is inside[1]


def test_add_extends_the_run_below_only_when_it_continues_it_under_the_same_lock() -> None:
    batches, lock = InFlightBatches(), AcquisitionLock("m1")
    batches.add(InFlightBatch(0, 4, RecordState.ACQUIRED, 1, lock))
    batches.add(InFlightBatch(5, 9, RecordState.ACQUIRED, 1, lock))
    batches.add(InFlightBatch(10, 14, RecordState.ACQUIRED, 1, AcquisitionLock("m1")))
    assert [(b.first_offset, b.last_offset) for b in batches] == [(0, 9), (10, 14)]


def test_whole_batch_acknowledgements_keep_one_run_and_partial_ones_split_it() -> None:
    sp, _ = make()
    sp.acquire("m1", log((0, 139), (140, 279), (280, 419)), max_records=500)
    assert len(list(sp._batches)) == 1  # one acquisition of three log batches: one run
    settle(sp, "m1", ack(100, 199, RELEASE), ack(200, 299, ACCEPT))
    assert _runs(sp._batches) == [(0, 99, RecordState.ACQUIRED, 1), (100, 199, RecordState.AVAILABLE, 1),
                                  (200, 299, RecordState.ACKNOWLEDGED, 1), (300, 419, RecordState.ACQUIRED, 1)]
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in sp.persistent_state().state_batches] == [
        (0, 199, RecordState.AVAILABLE), (200, 299, RecordState.ACKNOWLEDGED), (300, 419, RecordState.AVAILABLE)]
