"""KIP-227 fetch session cache: epochs, ids, eviction, and what incremental responses carry."""

import uuid

import pytest

from broker.fetch_session import CachedPartition, FetchSessionCache, FetchSessionError
from protocol.errors import ErrorCode


def _cached(partition: int = 0) -> CachedPartition:
    return CachedPartition("t", uuid.uuid4(), partition, fetch_offset=0, max_bytes=1 << 20)


def test_incremental_requests_must_carry_the_next_epoch() -> None:
    cache = FetchSessionCache(10)
    session = cache.create(False, {("t", 0): _cached()})
    assert session is not None and session.session_id != 0 and session.epoch == 1
    assert cache.lookup(session.session_id, 1) is session
    assert cache.lookup(session.session_id, 2) is session
    with pytest.raises(FetchSessionError) as bad_epoch:
        cache.lookup(session.session_id, 2)
    assert bad_epoch.value.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    with pytest.raises(FetchSessionError) as unknown:
        cache.lookup(session.session_id + 1, 1)
    assert unknown.value.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_full_cache_evicts_the_least_recently_used_session() -> None:
    cache = FetchSessionCache(2)
    a = cache.create(False, {})
    b = cache.create(False, {})
    assert a and b
    cache.lookup(a.session_id, 1)  # a is now more recent than b
    c = cache.create(False, {})
    assert c is not None and len(cache) == 2
    cache.lookup(a.session_id, 2)
    with pytest.raises(FetchSessionError):
        cache.lookup(b.session_id, 1)


def test_no_slots_means_no_sessions() -> None:
    assert FetchSessionCache(0).create(False, {}) is None


def test_partition_is_resent_only_when_something_changed() -> None:
    cached = _cached()
    assert cached.needs_response(0, False, hw=10, lso=10, log_start=0)  # first answer
    assert not cached.needs_response(0, False, hw=10, lso=10, log_start=0)
    assert cached.needs_response(0, True, hw=10, lso=10, log_start=0)  # records
    assert cached.needs_response(0, False, hw=11, lso=10, log_start=0)  # high watermark moved
    assert cached.needs_response(0, False, hw=11, lso=11, log_start=0)  # last stable offset moved
    assert cached.needs_response(0, False, hw=11, lso=11, log_start=5)  # log start moved
    assert cached.needs_response(ErrorCode.OFFSET_OUT_OF_RANGE, False, hw=11, lso=11, log_start=5)
