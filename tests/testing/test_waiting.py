"""testing.waiting: the polling helper every multi-process test waits with."""

from __future__ import annotations

import pytest

from testing.waiting import wait_until


def test_returns_the_first_truthy_value() -> None:
    answers = iter([None, [], 0, ["ready"]])
    assert wait_until(lambda: next(answers), 5, "an answer", interval=0) == ["ready"]


def test_times_out_naming_what_it_waited_for_then_the_details() -> None:
    reads: list[str] = []

    def details() -> str:
        reads.append("read")
        return "broker logs"

    with pytest.raises(TimeoutError) as raised:
        wait_until(list, 0.05, "the leader", interval=0.01, details=details)
    assert str(raised.value) == "the leader: not within 0.05s (last: [])\nbroker logs"
    assert reads == ["read"]  # read once, at the timeout only
