"""testing.chaos.check finds each kind of anomaly it names, in a hand-made history and log; a
consumer whose librdkafka deadlocks is reported and replaced."""

from __future__ import annotations

import threading
import time
import types
from typing import ClassVar

import pytest

from testing.chaos import SEQ_SPACE, History, check, value_of


def _log(*partitions: list[int]) -> dict[int, dict[int, bytes]]:
    return {p: {offset: value_of(seq) for offset, seq in enumerate(seqs)} for p, seqs in enumerate(partitions)}


def _history(acked: dict[int, tuple[int, int]], reads: list[tuple[int, int, int]] | None = None,
             reached: dict[int, int] | None = None) -> History:
    return History(acked=acked, reads=[[(p, o, value_of(s)) for p, o, s in reads or []]],
                   reached=[reached if reached is not None else {0: 10, 1: 10}])


def test_a_clean_history_has_no_findings() -> None:
    log = _log([0, 1, 2], [SEQ_SPACE])
    history = _history({0: (0, 0), 1: (0, 1), 2: (0, 2), SEQ_SPACE: (1, 0)}, [(0, 0, 0), (0, 0, 0), (1, 0, SEQ_SPACE)])
    assert check(history, log, {0: 3, 1: 1}) == []


def test_each_anomaly_is_found() -> None:
    log = _log([0, 2, 1, 0], [7])
    history = _history({0: (0, 0), 1: (0, 2), 2: (0, 1), 3: (0, 3), 7: (1, 0)},
                       reads=[(1, 0, 9)], reached={0: 3, 1: -1})
    kinds = sorted({finding.split(":")[0] for finding in check(history, log, {0: 4, 1: 1})})
    # 0 twice (duplicate), 3 acknowledged at 0/3 where 0 is (lost), 2 before 1 at later offsets
    # (reordered), 9 read where 7 is (inconsistent-read), partition 1 never read (stuck).
    assert kinds == ["duplicate", "inconsistent-read", "lost", "reordered", "stuck"]


def test_a_stuck_consumer_is_reported_with_its_last_errors() -> None:
    history = _history({0: (0, 0)}, reached={0: -1})
    history.errors = [["_TRANSPORT: down", "UNKNOWN_LEADER_EPOCH: fenced"]]
    (finding,) = check(history, _log([0]), {0: 1})
    assert finding.startswith("stuck: consumer 0 reached 0/-1") and "UNKNOWN_LEADER_EPOCH: fenced" in finding


def test_a_producer_stopped_by_a_fatal_error_is_a_finding() -> None:
    history = _history({0: (0, 0)}, reached={0: 0})
    history.producer_errors = ["producer 1: Unable to reconstruct MessageSet"]
    assert check(history, _log([0]), {0: 1}) == ["producer-failed: producer 1: Unable to reconstruct MessageSet"]


def test_a_value_acknowledged_without_an_offset_must_be_in_its_partition_once() -> None:
    history = _history({0: (0, 0)}, reached={0: 1, 1: 0})
    history.acked_unplaced = {1: 0, 5: 1}  # 1 is at 0/1; 5 is nowhere
    findings = check(history, _log([0, 1], [7]), {0: 2, 1: 1})
    assert findings == ["lost: value 5 acknowledged (without an offset) in partition 1, the log holds it at []"]


class _SilentConsumer:
    """A librdkafka consumer whose main thread is stuck: polls return nothing, statistics never come."""

    made: ClassVar[list[_SilentConsumer]] = []

    def __init__(self, config: dict[str, object]) -> None:
        self.config = config
        self.assigned: list[tuple[int, int]] = []
        self.closed = False
        _SilentConsumer.made.append(self)

    def assign(self, partitions: list[object]) -> None:
        self.assigned = [(p.partition, p.offset) for p in partitions]  # type: ignore[attr-defined]

    def consume(self, num_messages: int, timeout: float) -> list[object]:
        time.sleep(timeout)
        return []

    def close(self) -> None:
        self.closed = True


def test_a_consumer_whose_statistics_stop_is_reported_and_replaced_after_its_last_reads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import confluent_kafka

    from testing import chaos

    monkeypatch.setattr(confluent_kafka, "Consumer", _SilentConsumer)
    monkeypatch.setattr(chaos, "DEADLOCKED_AFTER_S", 0.5)
    left: list[object] = []
    monkeypatch.setattr(chaos, "_leave_deadlocked", left.append)
    _SilentConsumer.made = []
    history = History(reads=[[]], reached=[{0: 41, 2: 7}], errors=[[]])
    stop = threading.Event()
    thread = threading.Thread(target=chaos._consume, args=(types.SimpleNamespace(bootstrap="x:1"), history, 0, stop))
    thread.start()
    time.sleep(0.9)
    stop.set()
    thread.join(5)
    first, second = _SilentConsumer.made[:2]
    assert left[0] is first and not first.closed
    assert second.assigned == [(0, 42), (1, 0), (2, 8)]  # after the last offsets read
    assert history.client_faults[0].startswith("consumer 0: librdkafka's main thread stopped")
