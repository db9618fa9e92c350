"""Aborted transactions: the .txnindex file, the LSO, READ_COMMITTED reads, rebuild after a crash."""

from __future__ import annotations

from click.testing import CliRunner

from protocol.control_records import build_end_txn_marker_batch
from protocol.record_batch import iter_batch_headers
from storage.log import FetchIsolation, Log
from storage.log_append import AppendOrigin
from storage.log_config import LogConfig
from storage.transaction_index import AbortedTxn, TransactionIndex
from tests.storage.helpers import make_batch
from tools.cli import main

NOW = 1_700_000_000_000
CONFIG = LogConfig.model_validate({"segment.bytes": 700})


def test_index_file_format_and_search(tmp_path) -> None:
    path = tmp_path / "00000000000000000010.txnindex"
    index = TransactionIndex(path, 10)
    index.append(AbortedTxn(7, 3, 12, 13))
    index.append(AbortedTxn(8, 11, 20, 21))
    assert len(path.read_bytes()) == 2 * 34 and path.read_bytes()[:2] == b"\x00\x00"
    again = TransactionIndex(path, 10)
    assert again.entries == [AbortedTxn(7, 3, 12, 13), AbortedTxn(8, 11, 20, 21)]
    assert again.collect_aborted_txns(13, 25) == ([AbortedTxn(8, 11, 20, 21)], False)
    assert again.collect_aborted_txns(13, 15) == ([AbortedTxn(8, 11, 20, 21)], True)
    assert again.collect_aborted_txns(0, 5) == ([AbortedTxn(7, 3, 12, 13)], True)  # LSO 13 >= 5
    again.truncate_to(20)
    assert again.entries == [AbortedTxn(7, 3, 12, 13)]
    again.reset()
    assert not path.exists()


def _txn(log: Log, pid: int, seq: int, count: int = 2) -> int:
    batch = make_batch(count, timestamp=NOW, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
    return log.append_as_leader(batch, 0, now=NOW).first_offset


def _marker(log: Log, pid: int, commit: bool) -> int:
    batch = build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=1, timestamp=NOW)
    return log.append_as_leader(batch, 0, origin=AppendOrigin.COORDINATOR, now=NOW).first_offset


def _scenario(log: Log) -> dict[str, int]:
    at = {"a1": _txn(log, 1, 0), "b1": _txn(log, 2, 0)}
    for _ in range(8):  # spread over several segments
        log.append_as_leader(make_batch(1, value_size=100, timestamp=NOW), 0, now=NOW)
    at["a2"] = _txn(log, 1, 2)
    at["abort1"] = _marker(log, 1, commit=False)
    at["commit2"] = _marker(log, 2, commit=True)
    at["c1"] = _txn(log, 3, 0)  # still open
    return at


def test_aborts_are_indexed_and_read_committed_stops_at_the_lso(checked_tmp_path) -> None:
    log = Log.open(checked_tmp_path / "t-0", CONFIG, producer_state=True)
    at = _scenario(log)
    assert len(log.segments) > 2
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == at["c1"]  # the open transaction of producer 3
    marker_segment = log.segments.floor_segment(at["abort1"])
    # Producer 2's transaction was still open when producer 1 aborted: the LSO then was b1.
    assert marker_segment.txn_index.entries == [AbortedTxn(1, at["a1"], at["abort1"], at["b1"])]
    info = log.read(0, 10**6, isolation=FetchIsolation.TXN_COMMITTED)
    assert info.aborted_transactions == [AbortedTxn(1, at["a1"], at["abort1"], at["b1"])]
    offsets = [h.base_offset for _, h in iter_batch_headers(info.records.read_bytes())]
    assert offsets[0] == 0 and all(o < at["c1"] for o in offsets)
    # Reading past the abort marker only: no aborted transaction overlaps.
    tail = log.read(at["commit2"], 10**6, isolation=FetchIsolation.TXN_COMMITTED)
    assert tail.aborted_transactions == []
    # READ_UNCOMMITTED reads to the HW and carries no aborted list.
    assert log.read(at["c1"], 10**6, isolation=FetchIsolation.HIGH_WATERMARK).aborted_transactions is None
    log.close()
    out = CliRunner().invoke(main, ["dump-log", "--files", str(marker_segment.txn_index.path)]).output
    assert f"producerId: 1 firstOffset: {at['a1']} lastOffset: {at['abort1']} lastStableOffset: {at['b1']}" in out


def test_txn_indexes_are_rebuilt_after_a_crash(checked_tmp_path) -> None:
    dir = checked_tmp_path / "t-0"
    log = Log.open(dir, CONFIG, producer_state=True)
    at = _scenario(log)
    expected = {s.base_offset: s.txn_index.entries for s in log.segments}
    log.close_without_flush()
    for path in dir.glob("*.txnindex"):
        path.unlink()
    for path in dir.glob("*.snapshot"):
        path.unlink()
    recovered = Log.open(dir, CONFIG, recovery_point=0, producer_state=True)
    assert {s.base_offset: s.txn_index.entries for s in recovered.segments} == expected
    recovered.update_high_watermark(recovered.log_end_offset)
    assert recovered.last_stable_offset == at["c1"]
    recovered.close()
