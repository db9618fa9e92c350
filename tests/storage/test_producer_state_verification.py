"""ProducerStateManager's transaction verification guards (KIP-890 part 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.producer_state import (
    SENTINEL_GUARD,
    AppendOrigin,
    EndTxnMarker,
    InvalidTxnStateError,
    ProducerStateManager,
    VerificationGuard,
)
from tests.storage.test_producer_state import PID, append, header

ABORT = EndTxnMarker(0, 0)


@pytest.fixture
def psm(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, topic_partition="t-0", producer_id_expiration_ms=1_000)


def test_a_guard_verifies_only_itself() -> None:
    guard, other = VerificationGuard(), VerificationGuard()
    assert guard.verify(guard)
    assert not guard.verify(other)
    assert not guard.verify(SENTINEL_GUARD)
    assert not SENTINEL_GUARD.verify(SENTINEL_GUARD)


def test_a_transactional_batch_starts_a_transaction_only_with_the_pending_guard(psm: ProducerStateManager) -> None:
    first = header(0, transactional=True)
    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        psm.validate_append(first, verification_guard=SENTINEL_GUARD)
    with pytest.raises(InvalidTxnStateError):
        psm.validate_append(first, verification_guard=VerificationGuard())  # not the pending one
    guard = psm.maybe_create_verification_state_entry(PID, 0, now_ms=10)
    assert psm.maybe_create_verification_state_entry(PID, 0, now_ms=11) is guard  # a retry shares it
    append(psm, first, verification_guard=guard)
    assert psm.has_ongoing_transaction(PID, 0)
    assert psm.verification_guard(PID) is SENTINEL_GUARD  # cleared by the append
    # Later batches of the open transaction need no guard.
    append(psm, header(1, seq=1, transactional=True), verification_guard=SENTINEL_GUARD)


def test_a_marker_clears_a_pending_guard_so_a_stale_verification_cannot_append(psm: ProducerStateManager) -> None:
    append(psm, header(0, transactional=True))  # a transaction open before verification was on
    psm.update(header(1, control=True), marker=ABORT)  # ... aborted
    stale = psm.maybe_create_verification_state_entry(PID, 0, now_ms=10)
    # The coordinator answered "verified" for the old transaction, but the abort marker lands first.
    psm.update(header(2, control=True), marker=ABORT)
    with pytest.raises(InvalidTxnStateError):
        psm.validate_append(header(3, seq=1, transactional=True), verification_guard=stale)
    # The ABA case: a new verification (of the producer's next transaction) does not revive the stale guard.
    fresh = psm.maybe_create_verification_state_entry(PID, 0, now_ms=20)
    assert fresh is not stale
    with pytest.raises(InvalidTxnStateError):
        psm.validate_append(header(3, seq=1, transactional=True), verification_guard=stale)
    psm.validate_append(header(3, seq=1, transactional=True), verification_guard=fresh)


def test_any_append_of_the_producer_clears_its_guard_and_others_keep_theirs(psm: ProducerStateManager) -> None:
    guard = psm.maybe_create_verification_state_entry(PID, 0, now_ms=10)
    other = psm.maybe_create_verification_state_entry(PID + 1, 0, now_ms=10)
    append(psm, header(0, seq=0))  # an idempotent (non-transactional) batch of the same producer
    assert psm.verification_guard(PID) is SENTINEL_GUARD
    assert not psm.verification_guard(PID).verify(guard)
    assert psm.verification_guard(PID + 1) is other


def test_a_transaction_of_an_older_epoch_does_not_count_as_ongoing(psm: ProducerStateManager) -> None:
    append(psm, header(0, epoch=0, transactional=True))
    assert psm.has_ongoing_transaction(PID, 0)
    assert not psm.has_ongoing_transaction(PID, 1)
    with pytest.raises(InvalidTxnStateError):
        psm.validate_append(header(1, epoch=1, transactional=True), verification_guard=SENTINEL_GUARD)


def test_no_guard_no_check_and_replicated_appends_are_not_checked(psm: ProducerStateManager) -> None:
    # Verification off (None) and a replicated batch are never refused for it.
    psm.validate_append(header(0, transactional=True))
    psm.validate_append(header(0, transactional=True), origin=AppendOrigin.REPLICATION,
                        verification_guard=SENTINEL_GUARD)
    # The coordinator's own writes carry no guard; its TxnOffsetCommit write carries one and is checked.
    psm.validate_append(header(0, transactional=True), origin=AppendOrigin.COORDINATOR)
    with pytest.raises(InvalidTxnStateError):
        psm.validate_append(header(0, transactional=True), origin=AppendOrigin.COORDINATOR,
                            verification_guard=SENTINEL_GUARD)
    # Non-transactional batches carry no transaction to verify.
    psm.validate_append(header(0), verification_guard=SENTINEL_GUARD)


def test_stale_guards_expire_and_a_reload_drops_them(psm: ProducerStateManager) -> None:
    psm.maybe_create_verification_state_entry(PID, 0, now_ms=0)
    psm.maybe_create_verification_state_entry(PID + 1, 0, now_ms=900)
    psm.remove_expired_producers(now_ms=1_000)
    assert set(psm.verification_states) == {PID + 1}
    psm.truncate_fully_and_start_at(0)
    assert psm.verification_states == {}
