"""The share-group history checker over consumers' logs: a sound history passes, and each broken guarantee
(accepted twice, delivered after acceptance, a lock broken, a delivery count that does not grow, a record
lost) is caught; a last line cut short by a killed consumer is left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testing.share_history import ACCEPT, REJECT, RELEASE, HistoryError, check_logs

LOCK_MS = 1_000


def _write(path: Path, *events: list[object], torn: bool = False) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + ('["acquired", "a", 0' if torn else ""))
    return path


def _check(tmp_path: Path, a: list[list[object]], b: list[list[object]], slack_ms: int = 0) -> None:
    paths = [_write(tmp_path / "a.jsonl", *a, torn=True), _write(tmp_path / "b.jsonl", *b)]
    history = check_logs(paths, LOCK_MS, 2, slack_ms)
    history.check_complete({(0, 0), (0, 1)})


def test_a_sound_history_with_a_killed_holder_passes(tmp_path: Path) -> None:
    a = [["acquired", "a", 0, 0, 1, 0], ["acquired", "a", 0, 1, 1, 0]]  # then killed
    b = [["acquired", "b", 0, 0, 2, 1_000], ["acquired", "b", 0, 1, 2, 1_000],
         ["acknowledged", "b", 0, 0, ACCEPT, 1_100], ["acknowledged", "b", 0, 1, REJECT, 1_100]]
    _check(tmp_path, a, b)


@pytest.mark.parametrize(("a", "b", "broken"), [
    ([["acquired", "a", 0, 0, 1, 0], ["acknowledged", "a", 0, 0, ACCEPT, 10]],
     [["acquired", "b", 0, 0, 2, 2_000], ["acknowledged", "b", 0, 0, ACCEPT, 2_010]], "after it was acknowledged"),
    ([["acquired", "a", 0, 0, 1, 0]], [["acquired", "b", 0, 0, 2, 500]], "lock holds"),
    ([["acquired", "a", 0, 0, 1, 0], ["acknowledged", "a", 0, 0, RELEASE, 10]],
     [["acquired", "b", 0, 0, 1, 20]], "did not grow"),
    ([["acquired", "a", 0, 0, 1, 0], ["acknowledged", "a", 0, 0, ACCEPT, 10]], [], "never acknowledged"),
])
def test_broken_histories_are_caught(tmp_path: Path, a: list[list[object]], b: list[list[object]],
                                     broken: str) -> None:
    with pytest.raises(HistoryError, match=broken):
        _check(tmp_path, a, b)


def test_the_slack_allows_a_fetch_ahead_of_the_poll(tmp_path: Path) -> None:
    a = [["acquired", "a", 0, 0, 1, 0], ["acquired", "a", 0, 1, 1, 0]]
    b = [["acquired", "b", 0, 0, 2, 800], ["acquired", "b", 0, 1, 2, 800],
         ["acknowledged", "b", 0, 0, ACCEPT, 900], ["acknowledged", "b", 0, 1, ACCEPT, 900]]
    with pytest.raises(HistoryError, match="lock holds"):
        _check(tmp_path, a, b)
    _check(tmp_path, a, b, slack_ms=300)


def test_a_member_that_left_holds_nothing(tmp_path: Path) -> None:
    a = [["acquired", "a", 0, 0, 1, 0], ["acquired", "a", 0, 1, 1, 0], ["left", "a", 100]]
    b = [["acquired", "b", 0, 0, 2, 200], ["acquired", "b", 0, 1, 2, 200],
         ["acknowledged", "b", 0, 0, ACCEPT, 300], ["acknowledged", "b", 0, 1, ACCEPT, 300]]
    _check(tmp_path, a, b)
