"""The history checker (testing/txn_history.py) on hand-made histories: it passes good ones and names each
anomaly of bad ones, so the randomized workload's check (test_txn_workload.py) can fail."""

from __future__ import annotations

import threading

import pytest

from testing.txn_history import History, Outcome, Reader, check


def _history(*txns: tuple[str, list[tuple[bytes, int]], Outcome | None]) -> History:
    history = History()
    for producer, sends, outcome in txns:
        txn = history.begin(producer)
        for value, partition in sends:
            history.send(txn, value, partition)
        if outcome is not None:
            history.end(txn, outcome)
    return history


def _reader(history: History, reads: list[tuple[int, int, bytes]], complete: bool = True,
            name: str | None = None) -> Reader:
    reader = history.reader(name or f"reader-{len(history.readers)}")
    for partition, offset, value in reads:
        reader.read(partition, offset, value)
    reader.complete = complete
    return reader


def _kinds(history: History) -> list[str]:
    return sorted(a.kind for a in check(history))


def _standard() -> History:
    """p1: a committed transaction over two partitions, then an aborted one; p2: one of unknown outcome."""
    return _history(("p1", [(b"a1", 0), (b"a2", 1), (b"a3", 0)], Outcome.COMMITTED),
                    ("p1", [(b"b1", 0), (b"b2", 1)], Outcome.ABORTED),
                    ("p2", [(b"c1", 1), (b"c2", 2)], Outcome.UNKNOWN))


GOOD_READS = [(0, 0, b"a1"), (1, 0, b"a2"), (0, 1, b"a3")]


def test_a_good_history_passes() -> None:
    history = _standard()
    _reader(history, GOOD_READS)
    assert check(history) == []
    assert history.summary() == {"committed": 1, "aborted": 1, "unknown": 1, "values": 7, "read by reader-0": 3}


def test_the_unknown_transaction_visible_wholly_passes() -> None:
    history = _standard()
    # Offsets need not be dense (markers and aborted records take some); partitions interleave freely.
    _reader(history, [(0, 0, b"a1"), (1, 0, b"a2"), (1, 4, b"c1"), (0, 1, b"a3"), (2, 0, b"c2")])
    _reader(history, [(2, 0, b"c2"), (1, 0, b"a2"), (1, 4, b"c1"), (0, 0, b"a1"), (0, 1, b"a3")])
    assert check(history) == []


def test_an_aborted_read() -> None:
    history = _standard()
    _reader(history, [*GOOD_READS, (0, 3, b"b1"), (1, 3, b"b2")])
    assert _kinds(history) == ["aborted-read", "aborted-read"]


def test_a_lost_committed_write() -> None:
    history = _standard()
    _reader(history, [(0, 0, b"a1"), (0, 1, b"a3")])
    # Lost, and torn: the transaction's other partition was seen.
    assert _kinds(history) == ["lost-write", "torn"]


def test_an_incomplete_reader_cannot_lose_writes() -> None:
    history = _standard()
    _reader(history, [(0, 0, b"a1")], complete=False)
    assert check(history) == []


def test_a_duplicate() -> None:
    history = _standard()
    _reader(history, [*GOOD_READS, (0, 5, b"a1")])
    # Read again later: also out of its producer's order.
    assert _kinds(history) == ["duplicate", "reordered"]


def test_a_torn_transaction_of_unknown_outcome() -> None:
    history = _standard()
    _reader(history, [*GOOD_READS, (1, 2, b"c1")])
    assert _kinds(history) == ["torn"]


def test_a_transaction_never_ended_counts_as_unknown() -> None:
    history = _history(("p1", [(b"x1", 0), (b"x2", 1)], None))
    _reader(history, [(0, 0, b"x1"), (1, 0, b"x2")])
    assert check(history) == []
    _reader(history, [(0, 0, b"x1")])
    assert _kinds(history) == ["torn"]


def test_offsets_must_increase_per_partition() -> None:
    history = _standard()
    _reader(history, [(0, 1, b"a1"), (1, 0, b"a2"), (0, 0, b"a3")])
    assert _kinds(history) == ["nonmonotonic-offset"]


def test_a_producers_values_are_read_in_the_order_sent() -> None:
    history = _standard()
    _reader(history, [(0, 0, b"a3"), (1, 0, b"a2"), (0, 1, b"a1")])
    assert _kinds(history) == ["reordered"]


def test_readers_agree_on_offsets_and_outcomes() -> None:
    history = _standard()
    _reader(history, [*GOOD_READS, (1, 4, b"c1"), (2, 0, b"c2")])
    _reader(history, [(0, 0, b"a1"), (1, 0, b"a2"), (0, 2, b"a3")])
    assert _kinds(history) == ["inconsistent-outcome"]
    history = _standard()
    _reader(history, GOOD_READS)
    _reader(history, [(0, 0, b"a1"), (1, 0, b"a2"), (0, 2, b"a3")], complete=False)
    _reader(history, [(0, 1, b"a1")], complete=False)
    assert _kinds(history) == ["inconsistent-offset"]


def test_values_never_sent_or_read_elsewhere() -> None:
    history = _standard()
    _reader(history, [*GOOD_READS, (3, 0, b"zz")])
    _reader(history, [(0, 0, b"a1"), (0, 1, b"a2"), (0, 2, b"a3")], complete=False)
    assert _kinds(history) == ["inconsistent-offset", "unknown-value", "wrong-partition"]


def test_recording_refuses_a_reused_value_or_a_second_end() -> None:
    history = _standard()
    txn = history.begin("p3")
    with pytest.raises(ValueError, match="sent twice"):
        history.send(txn, b"a1", 0)
    history.end(txn, Outcome.ABORTED)
    with pytest.raises(ValueError, match="ended twice"):
        history.end(txn, Outcome.COMMITTED)


def test_recording_from_threads() -> None:
    history = History()

    def produce(name: str) -> None:
        for n in range(50):
            txn = history.begin(name)
            for i in range(3):
                history.send(txn, f"{name}-{n}-{i}".encode(), i)
            history.end(txn, Outcome.COMMITTED)

    threads = [threading.Thread(target=produce, args=(f"p{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len({t.txn_id for t in history.txns}) == 200
    assert history.summary()["values"] == 600


def _offsets_history() -> History:
    """Group g: offset 1 committed, 2 aborted, 3 unknown; group h: offset 1 committed."""
    history = History()
    for producer, offset, outcome, value in (("p1", 1, Outcome.COMMITTED, b"x1"), ("p1", 2, Outcome.ABORTED, b"x2"),
                                             ("p1", 3, Outcome.UNKNOWN, b"x3"), ("p2", 1, Outcome.COMMITTED, b"y1")):
        txn = history.begin(producer)
        history.send(txn, value, 0)
        history.send_offsets(txn, "g" if producer == "p1" else "h", offset)
        history.end(txn, outcome)
    return history


def test_group_offsets_follow_the_visible_transactions() -> None:
    invisible = _offsets_history()
    _reader(invisible, [(0, 0, b"x1"), (0, 2, b"y1")])
    assert check(invisible, {"g": 1, "h": 1}) == []
    visible = _offsets_history()
    _reader(visible, [(0, 0, b"x1"), (0, 2, b"x3"), (0, 3, b"y1")])
    assert check(visible, {"g": 3, "h": 1}) == []


def test_group_offsets_apart_from_their_records() -> None:
    history = _offsets_history()
    _reader(history, [(0, 0, b"x1"), (0, 2, b"y1")])
    assert [a.kind for a in check(history, {"g": 2, "h": 1})] == ["offsets-of-invisible"]
    assert [a.kind for a in check(history, {"g": 3, "h": 1})] == ["offsets-of-invisible"]
    assert [a.kind for a in check(history, {"g": 1, "h": -1})] == ["offsets-lost"]
    assert [a.kind for a in check(history, {"g": 7, "h": 1})] == ["offsets-unknown"]
    seen = _offsets_history()
    _reader(seen, [(0, 0, b"x1"), (0, 2, b"x3"), (0, 3, b"y1")])
    assert [a.kind for a in check(seen, {"g": 1, "h": 1})] == ["offsets-lost"]
