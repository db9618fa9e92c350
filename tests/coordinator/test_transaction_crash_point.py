"""The test-only crash point of TransactionMarkerChannelManager (used by tests/integration/
test_transaction_recovery.py): parsed from the environment, refused when malformed, off when absent."""

from __future__ import annotations

import pytest

from coordinator.transaction.transaction_marker_channel_manager import CRASH_POINT_ENV, CrashPoint


def test_the_crash_point_is_read_from_the_environment() -> None:
    assert CrashPoint.from_env({}) is None
    assert CrashPoint.from_env({CRASH_POINT_ENV: ""}) is None
    assert CrashPoint.from_env({CRASH_POINT_ENV: "before-complete:tid:with:colons"}) == \
        CrashPoint("before-complete", "tid:with:colons")


@pytest.mark.parametrize("spec", ["before-markers", "before-markers:", "sometime:tid"])
def test_a_malformed_crash_point_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match=CRASH_POINT_ENV):
        CrashPoint.from_env({CRASH_POINT_ENV: spec})
