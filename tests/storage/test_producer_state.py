"""ProducerStateManager: duplicates, sequence and epoch rules, transactions, snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.record_batch import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    RecordBatchHeader,
    build_batch_header,
    parse_batch_header,
)
from storage.producer_state import (
    AppendOrigin,
    CompletedTxn,
    EndTxnMarker,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    decode_snapshot,
    encode_snapshot,
    snapshot_path,
)

PID = 1000


def header(
    base_offset: int,
    *,
    pid: int = PID,
    epoch: int = 0,
    seq: int = 0,
    count: int = 1,
    ts: int = 1_000,
    transactional: bool = False,
    control: bool = False,
) -> RecordBatchHeader:
    """A real v2 batch header built by the header codec (records are not needed here)."""
    attributes = (TRANSACTIONAL_FLAG if transactional or control else 0) | (CONTROL_FLAG if control else 0)
    buf = build_batch_header(
        base_offset=base_offset, records_size=0, attributes=attributes, last_offset_delta=count - 1,
        base_timestamp=ts, max_timestamp=ts, producer_id=pid, producer_epoch=epoch,
        base_sequence=seq, records_count=count,
    )
    return parse_batch_header(buf)


def append(psm: ProducerStateManager, h: RecordBatchHeader, **kw: object) -> CompletedTxn | None:
    psm.validate_append(h, **kw)  # type: ignore[arg-type]
    return psm.update(h, marker=kw.get("marker"))  # type: ignore[arg-type]


@pytest.fixture
def psm(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, topic_partition="t-0")


def test_duplicates_of_the_last_five_batches_are_found_with_their_original_offsets(psm: ProducerStateManager) -> None:
    offset = 0
    for i in range(7):
        append(psm, header(offset, seq=i * 3, count=3))
        offset += 3 + 10  # other producers' batches in between
    # The last five batches (sequences 6..20) are remembered, the first two are not.
    for i in range(2, 7):
        dup = psm.find_duplicate_batch(header(999_999, seq=i * 3, count=3))
        assert dup is not None
        assert (dup.first_offset, dup.last_offset) == (i * 13, i * 13 + 2)
        assert (dup.first_seq, dup.last_seq) == (i * 3, i * 3 + 2)
    assert psm.find_duplicate_batch(header(0, seq=0, count=3)) is None
    assert psm.find_duplicate_batch(header(0, seq=3, count=3)) is None
    # Same sequences under another epoch or a different range: not a duplicate.
    assert psm.find_duplicate_batch(header(0, seq=18, count=3, epoch=1)) is None
    assert psm.find_duplicate_batch(header(0, seq=18, count=2)) is None
    assert psm.find_duplicate_batch(header(0, seq=18, count=3, pid=PID + 1)) is None


def test_sequence_gap_and_repeat_are_out_of_order(psm: ProducerStateManager) -> None:
    append(psm, header(0, seq=0, count=5))
    with pytest.raises(OutOfOrderSequenceError) as gap:
        psm.validate_append(header(5, seq=6))
    assert gap.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(OutOfOrderSequenceError):
        psm.validate_append(header(5, seq=4))
    psm.validate_append(header(5, seq=5))  # the next one is fine
    # Followers and recovery do not check sequences.
    psm.validate_append(header(5, seq=42), origin=AppendOrigin.REPLICATION)


def test_sequence_wraps_after_int32_max(psm: ProducerStateManager) -> None:
    append(psm, header(0, seq=0x7FFFFFFE, count=2))
    assert psm.last_entry(PID).last_seq == 0x7FFFFFFF  # type: ignore[union-attr]
    append(psm, header(2, seq=0, count=1))
    wrapped = header(3, seq=0x7FFFFFFF, count=3)  # covers MAX, 0, 1
    assert wrapped.last_sequence == 1


def test_epoch_bump_must_start_at_sequence_zero(psm: ProducerStateManager) -> None:
    append(psm, header(0, epoch=3, seq=0, count=4))
    with pytest.raises(OutOfOrderSequenceError):
        psm.validate_append(header(4, epoch=4, seq=4))
    append(psm, header(4, epoch=4, seq=0))
    entry = psm.last_entry(PID)
    assert entry is not None and entry.producer_epoch == 4
    # The old epoch's batches are forgotten: no duplicate under the new epoch.
    assert len(entry.batch_metadata) == 1
    assert psm.find_duplicate_batch(header(0, epoch=4, seq=0, count=4)) is None


def test_older_epoch_is_fenced_for_clients_but_not_for_replication(psm: ProducerStateManager) -> None:
    append(psm, header(0, epoch=5))
    with pytest.raises(InvalidProducerEpochError) as err:
        psm.validate_append(header(1, epoch=4, seq=1))
    assert err.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    psm.validate_append(header(1, epoch=4, seq=1), origin=AppendOrigin.REPLICATION)


def test_unknown_producer_accepts_any_sequence(psm: ProducerStateManager) -> None:
    # KIP-360: a producer whose state was removed (retention) may continue its sequence.
    psm.validate_append(header(0, pid=77, epoch=2, seq=123))


def test_transaction_lifecycle_and_first_unstable_offset(psm: ProducerStateManager) -> None:
    append(psm, header(0, pid=1, seq=0))  # plain idempotent data
    append(psm, header(1, pid=2, seq=0, transactional=True))
    append(psm, header(2, pid=3, seq=0, transactional=True))
    append(psm, header(3, pid=2, seq=1, transactional=True))
    assert psm.first_unstable_offset() == 1
    assert psm.last_entry(2).current_txn_first_offset == 1  # type: ignore[union-attr]
    with pytest.raises(InvalidTxnStateError):
        psm.validate_append(header(4, pid=2, seq=2))
    done = append(psm, header(4, pid=2, control=True), marker=EndTxnMarker(1, coordinator_epoch=7))
    assert done == CompletedTxn(2, 1, 4, is_aborted=False)
    # Decided but not replicated: still unstable until the HW passes the marker.
    assert psm.first_unstable_offset() == 1
    assert psm.first_undecided_offset() == 2
    psm.on_high_watermark_updated(5)
    assert psm.first_unstable_offset() == 2
    aborted = append(psm, header(5, pid=3, control=True), marker=EndTxnMarker(0, coordinator_epoch=7))
    assert aborted == CompletedTxn(3, 2, 5, is_aborted=True)
    psm.on_high_watermark_updated(6)
    assert psm.first_unstable_offset() is None
    assert psm.last_entry(2).coordinator_epoch == 7  # type: ignore[union-attr]
    # A marker from an older coordinator is fenced.
    with pytest.raises(TransactionCoordinatorFencedError):
        psm.validate_append(header(6, pid=2, control=True), marker=EndTxnMarker(1, coordinator_epoch=6))
    # A marker for an empty transaction completes nothing.
    assert append(psm, header(6, pid=1, control=True), marker=EndTxnMarker(1, 7)) is None


def test_snapshot_round_trip(tmp_path: Path, psm: ProducerStateManager) -> None:
    for i in range(6):
        append(psm, header(i * 2, pid=1, epoch=2, seq=i * 2, count=2, ts=5_000 + i))
    append(psm, header(12, pid=2, seq=0, transactional=True, ts=6_000))
    append(psm, header(13, pid=3, seq=0, ts=7_000))
    append(psm, header(14, pid=3, control=True, ts=7_001), marker=EndTxnMarker(1, coordinator_epoch=9))
    path = psm.take_snapshot()
    assert path == snapshot_path(tmp_path, 15) and path.name == "00000000000000000015.snapshot"

    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, 15) == 15
    assert fresh.map_end_offset == 15
    for pid in (1, 2, 3):
        assert fresh.last_entry(pid) == psm.last_entry(pid)
    assert fresh.first_unstable_offset() == 12
    dup = fresh.find_duplicate_batch(header(0, pid=1, epoch=2, seq=8, count=2))
    assert dup is not None and dup.first_offset == 8
    assert fresh.last_entry(3).coordinator_epoch == 9  # type: ignore[union-attr]
    # Sequence checks continue from the snapshot.
    with pytest.raises(OutOfOrderSequenceError):
        fresh.validate_append(header(15, pid=1, epoch=2, seq=13))
    fresh.validate_append(header(15, pid=1, epoch=2, seq=12))


def test_corrupt_snapshot_is_ignored_and_an_older_one_used(tmp_path: Path, psm: ProducerStateManager) -> None:
    append(psm, header(0, seq=0, count=3))
    psm.take_snapshot()  # at 3
    append(psm, header(3, seq=3, count=3))
    newest = psm.take_snapshot()  # at 6
    data = bytearray(newest.read_bytes())
    data[-3] ^= 0xFF
    newest.write_bytes(bytes(data))

    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, 6) == 3  # replay from 3
    assert not newest.exists()  # the corrupt one is deleted
    assert fresh.last_entry(PID).last_seq == 2  # type: ignore[union-attr]
    # Replaying the headers after the snapshot restores the rest.
    assert fresh.rebuild_from_headers([header(0, seq=0, count=3), header(3, seq=3, count=3)]) == 1
    assert fresh.last_entry(PID) == psm.last_entry(PID)


@pytest.mark.parametrize("damage", ["truncate", "magic", "empty", "trailing"])
def test_damaged_snapshots_are_rejected(psm: ProducerStateManager, damage: str) -> None:
    append(psm, header(0, seq=0, count=3))
    good = encode_snapshot(psm.producers.values())
    assert decode_snapshot(good)[0] == psm.last_entry(PID)
    bad = {
        "truncate": good[:-5],
        "magic": b"XXXX" + good[4:],
        "empty": b"",
        "trailing": good + b"\0",
    }[damage]
    path = psm.take_snapshot(3)
    path.write_bytes(bad)
    fresh = ProducerStateManager(path.parent)
    assert fresh.load(0, 3) == 0
    assert fresh.producers == {}


def test_rebuild_from_headers_matches_live_updates(tmp_path: Path) -> None:
    live = ProducerStateManager(tmp_path / "a")
    headers = []
    offset = 0
    for i in range(40):
        pid = 10 + i % 4
        h = header(offset, pid=pid, epoch=i // 20, seq=(i // 4) % 5 * 2 if i < 20 else (i - 20) // 4 * 2, count=2,
                   transactional=pid == 13)
        headers.append(h)
        offset += 2
        if pid == 13 and i % 8 == 7:
            marker = header(offset, pid=13, epoch=i // 20, control=True)
            headers.append(marker)
            offset += 1
    for h in headers:
        live.update(h)
    rebuilt = ProducerStateManager(tmp_path / "b")
    rebuilt.rebuild_from_headers(headers)
    assert rebuilt.producers == live.producers
    assert rebuilt.ongoing_txns == live.ongoing_txns
    assert rebuilt.map_end_offset == offset


def test_truncate_and_reload_drops_snapshots_past_the_end(tmp_path: Path, psm: ProducerStateManager) -> None:
    append(psm, header(0, seq=0, count=2))
    psm.take_snapshot()  # 2
    append(psm, header(2, seq=2, count=2))
    psm.take_snapshot()  # 4
    append(psm, header(4, seq=4, count=2))
    psm.take_snapshot()  # 6
    # The log was truncated to 3: the snapshots at 4 and 6 describe lost data.
    assert psm.truncate_and_reload(0, 3) == 2
    assert psm.snapshot_offsets() == [2]
    assert psm.last_entry(PID).last_seq == 1  # type: ignore[union-attr]
    psm.delete_snapshots_before(3)
    assert psm.snapshot_offsets() == []
    assert psm.latest_snapshot_offset() is None


def test_expired_producers_are_removed_unless_in_a_transaction(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=1_000)
    append(psm, header(0, pid=1, ts=10_000))
    append(psm, header(1, pid=2, ts=10_000, transactional=True))
    append(psm, header(2, pid=3, ts=10_900))
    assert psm.remove_expired_producers(11_000) == [1]
    assert set(psm.producers) == {2, 3}
    psm.take_snapshot()
    fresh = ProducerStateManager(tmp_path, producer_id_expiration_ms=1_000)
    fresh.load(0, 3, now_ms=12_000)
    assert set(fresh.producers) == {2}
