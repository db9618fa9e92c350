"""Share session epochs (KIP-932): 0 opens, -1 closes, otherwise the next epoch; the errors of each misuse."""

from __future__ import annotations

import uuid

import pytest

from coordinator.share.share_session_cache import ShareSessionCache, ShareSessionError, next_epoch
from protocol.errors import ErrorCode

T = uuid.UUID(int=1)
A, B, C = (T, 0), (T, 1), (T, 2)


def test_epoch_zero_opens_and_each_request_names_the_next_epoch() -> None:
    cache = ShareSessionCache()
    ctx = cache.for_fetch("g", "m", 0, [A, B], [])
    assert ctx.partitions == (A, B) and not ctx.is_final
    ctx = cache.for_fetch("g", "m", 1, [C], [A])
    assert ctx.partitions == (B, C) and ctx.released == (A,)
    assert cache.for_acknowledge("g", "m", 2).partitions == (B, C)
    assert cache.for_fetch("g", "m", 3, [], []).partitions == (B, C)
    session = cache.get("g", "m")
    assert session is not None and session.epoch == 4


def test_epoch_minus_one_closes_and_releases_everything() -> None:
    cache = ShareSessionCache()
    cache.for_fetch("g", "m", 0, [A, B], [])
    ctx = cache.for_fetch("g", "m", -1, [], [])
    assert ctx.is_final and ctx.released == (A, B) and cache.get("g", "m") is None
    cache.for_fetch("g", "m", 0, [A], [])
    ctx = cache.for_acknowledge("g", "m", -1)
    assert ctx.is_final and ctx.released == (A,) and len(cache) == 0


def test_reopening_replaces_the_session_and_releases_what_it_no_longer_names() -> None:
    cache = ShareSessionCache()
    cache.for_fetch("g", "m", 0, [A, B], [])
    ctx = cache.for_fetch("g", "m", 0, [B], [])
    assert ctx.partitions == (B,) and ctx.released == (A,)


@pytest.mark.parametrize(("epoch", "code"), [(5, ErrorCode.SHARE_SESSION_NOT_FOUND),
                                             (-1, ErrorCode.SHARE_SESSION_NOT_FOUND)])
def test_no_session(epoch: int, code: ErrorCode) -> None:
    cache = ShareSessionCache()
    with pytest.raises(ShareSessionError) as err:
        cache.for_fetch("g", "m", epoch, [A], [])
    assert err.value.error_code == code
    with pytest.raises(ShareSessionError) as err:
        cache.for_acknowledge("g", "m", epoch)
    assert err.value.error_code == code


def test_wrong_epochs() -> None:
    cache = ShareSessionCache()
    cache.for_fetch("g", "m", 0, [A], [])
    for epoch in (2, 7):
        with pytest.raises(ShareSessionError) as err:
            cache.for_fetch("g", "m", epoch, [], [])
        assert err.value.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    with pytest.raises(ShareSessionError) as err:
        cache.for_acknowledge("g", "m", 0)  # an acknowledgement never opens a session
    assert err.value.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.for_fetch("g", "m", 1, [], []).partitions == (A,)  # the failures moved nothing


def test_next_epoch_wraps_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(2**31 - 1) == 1


def test_remove_member() -> None:
    cache = ShareSessionCache()
    cache.for_fetch("g", "m", 0, [A, B], [])
    assert cache.remove_member("g", "m") == (A, B) and cache.remove_member("g", "m") == ()
