"""TransactionMetadata's state machine: which transitions exist, epoch arithmetic, write-ahead completion."""

from __future__ import annotations

import pytest

from coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TV_0,
    TV_2,
    IllegalTransitionError,
    ProducerFencedError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    java_short,
)
from protocol.errors import ErrorCode

S = TransactionState
TP0, TP1 = ("t", 0), ("t", 1)

# Kafka's TransactionState.validPreviousStates, written out independently of the module.
VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def _metadata(state: TransactionState = S.EMPTY, epoch: int = 5, tv: int = TV_0, pid: int = 1000,
              partitions: set[tuple[str, int]] | None = None) -> TransactionMetadata:
    if partitions is None:
        partitions = set() if state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.DEAD) else {TP0}
    start = -1 if state == S.EMPTY else 100
    return TransactionMetadata("tid", pid, NO_PRODUCER_ID, NO_PRODUCER_ID, epoch, NO_PRODUCER_EPOCH, 60_000, state,
                               partitions, start, 100, tv)


def _step(m: TransactionMetadata, transit: TxnTransitMetadata) -> TransactionMetadata:
    """What the state manager does once the record is in the log."""
    m.complete_transition_to(transit)
    return m


def test_state_ids_and_names_are_kafkas() -> None:
    assert [(s.value, s.state_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert S.from_name("PrepareAbort") == S.PREPARE_ABORT and S.from_name("prepareabort") is None
    assert S.from_id(7) == S.PREPARE_EPOCH_FENCE and S.from_id(8) is None
    assert {s for s in S if s.is_expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_valid_previous_states_table() -> None:
    assert {s: set(s.valid_previous_states) for s in S} == VALID_PREVIOUS


def _prepare(m: TransactionMetadata, target: TransactionState) -> TxnTransitMetadata:
    """Reach ``target`` through the public prepare method that leads there."""
    if target == S.EMPTY:
        return m.prepare_increment_producer_epoch(30_000, None, 200)
    if target == S.ONGOING:
        return m.prepare_add_partitions({TP1}, 200, m.client_transaction_version)
    if target in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return m.prepare_abort_or_commit(target, m.client_transaction_version, NO_PRODUCER_ID, 200, False)
    if target == S.DEAD:
        return m.prepare_dead()
    if target == S.PREPARE_EPOCH_FENCE:
        return m.prepare_fence_producer_epoch()
    transit = m.prepare_complete(200)
    assert transit.txn_state == target
    return transit


@pytest.mark.parametrize("target", [s for s in S if s not in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)])
@pytest.mark.parametrize("current", list(S))
def test_every_prepare_is_allowed_exactly_from_its_valid_previous_states(current: TransactionState,
                                                                           target: TransactionState) -> None:
    m = _metadata(current)
    if current in VALID_PREVIOUS[target]:
        transit = _prepare(m, target)
        assert transit.txn_state == target and m.pending_state == target and m.state == current
    else:
        with pytest.raises(IllegalTransitionError):
            _prepare(m, target)
        assert m.pending_state is None


@pytest.mark.parametrize("current", list(S))
def test_prepare_complete_only_from_prepare_states(current: TransactionState) -> None:
    m = _metadata(current)
    if current in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        transit = m.prepare_complete(200)
        assert transit.txn_state == (S.COMPLETE_COMMIT if current == S.PREPARE_COMMIT else S.COMPLETE_ABORT)
        assert transit.topic_partitions == frozenset()
    else:
        with pytest.raises(IllegalTransitionError):
            m.prepare_complete(200)


def test_a_pending_transition_blocks_another_until_completed_or_dropped() -> None:
    m = _metadata(S.EMPTY)
    transit = m.prepare_add_partitions({TP0}, 200, TV_0)
    with pytest.raises(IllegalTransitionError):
        m.prepare_add_partitions({TP1}, 201, TV_0)
    m.pending_state = None  # the append failed: the state manager drops the pending state
    assert m.state == S.EMPTY and m.topic_partitions == set()
    transit = m.prepare_add_partitions({TP1}, 202, TV_0)
    _step(m, transit)
    assert m.state == S.ONGOING and m.topic_partitions == {TP1} and m.pending_state is None


def test_write_ahead_nothing_changes_before_completion() -> None:
    m = _metadata(S.EMPTY)
    before = (m.state, m.producer_epoch, set(m.topic_partitions), m.txn_start_timestamp, m.txn_last_update_timestamp)
    m.prepare_add_partitions({TP0, TP1}, 500, TV_0)
    assert (m.state, m.producer_epoch, m.topic_partitions, m.txn_start_timestamp,
            m.txn_last_update_timestamp) == before


def test_full_v1_transaction_keeps_the_epoch() -> None:
    m = _metadata(S.EMPTY, epoch=3)
    _step(m, m.prepare_add_partitions({TP0}, 200, TV_0))
    assert (m.state, m.txn_start_timestamp, m.txn_last_update_timestamp) == (S.ONGOING, 200, 200)
    _step(m, m.prepare_add_partitions({TP1}, 250, TV_0))
    assert m.topic_partitions == {TP0, TP1} and m.txn_start_timestamp == 200  # the start does not move
    _step(m, m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, NO_PRODUCER_ID, 300, False))
    assert (m.state, m.producer_epoch, m.txn_start_timestamp) == (S.PREPARE_COMMIT, 3, 200)
    m.remove_partition(TP0)  # its marker is written
    m.add_partitions({TP0})  # (restore: completion must see the prepared set)
    transit = m.prepare_complete(400)
    _step(m, transit)
    assert (m.state, m.producer_epoch, m.topic_partitions, m.txn_last_update_timestamp) == (
        S.COMPLETE_COMMIT, 3, set(), 400)
    # The next transaction starts from CompleteCommit with a new start time.
    _step(m, m.prepare_add_partitions({TP1}, 500, TV_0))
    assert m.txn_start_timestamp == 500


def test_v2_end_txn_bumps_the_epoch_and_records_the_last() -> None:
    m = _metadata(S.EMPTY, epoch=3, tv=TV_2)
    _step(m, m.prepare_add_partitions({TP0}, 200, TV_2))
    _step(m, m.prepare_abort_or_commit(S.PREPARE_ABORT, TV_2, NO_PRODUCER_ID, 300, False))
    assert (m.producer_epoch, m.last_producer_epoch, m.producer_id) == (4, 3, 1000)
    _step(m, m.prepare_complete(400))
    assert (m.state, m.producer_epoch, m.last_producer_epoch, m.producer_id) == (S.COMPLETE_ABORT, 4, 3, 1000)


def test_v2_abort_without_partitions_from_a_completed_state() -> None:
    m = _metadata(S.COMPLETE_COMMIT, epoch=3, tv=TV_2)
    _step(m, m.prepare_abort_or_commit(S.PREPARE_ABORT, TV_2, NO_PRODUCER_ID, 300, True))
    assert (m.state, m.txn_start_timestamp, m.producer_epoch) == (S.PREPARE_ABORT, 300, 4)
    # In V1 the same start-time change is refused at completion.
    m1 = _metadata(S.COMPLETE_COMMIT, epoch=3, tv=TV_0)
    with pytest.raises(IllegalTransitionError):
        m1.complete_transition_to(m1.prepare_abort_or_commit(S.PREPARE_ABORT, TV_0, NO_PRODUCER_ID, 300, True))


def test_v2_epoch_overflow_moves_to_the_next_producer_id() -> None:
    m = _metadata(S.ONGOING, epoch=SHORT_MAX - 1, tv=TV_2)
    # The coordinator saw that the bump exhausts the epoch and allocated producer id 2000.
    _step(m, m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, 2000, 300, False))
    assert (m.producer_id, m.producer_epoch, m.last_producer_epoch, m.next_producer_id) == (
        1000, SHORT_MAX, SHORT_MAX - 1, 2000)
    transit = m.prepare_complete(400)
    assert (transit.producer_id, transit.producer_epoch, transit.prev_producer_id) == (2000, 0, 1000)
    _step(m, transit)
    assert (m.producer_id, m.producer_epoch, m.last_producer_epoch, m.next_producer_id, m.prev_producer_id) == (
        2000, 0, SHORT_MAX - 1, NO_PRODUCER_ID, 1000)


def test_v2_abort_at_short_max_does_not_overflow_but_commit_cannot() -> None:
    m = _metadata(S.ONGOING, epoch=SHORT_MAX, tv=TV_2)
    assert m.prepare_abort_or_commit(S.PREPARE_ABORT, TV_2, NO_PRODUCER_ID, 300, False).producer_epoch == SHORT_MAX
    m = _metadata(S.ONGOING, epoch=SHORT_MAX, tv=TV_2)
    with pytest.raises(IllegalTransitionError):  # (short) (MAX + 1) is negative
        m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_2, NO_PRODUCER_ID, 300, False)


def test_java_short_wraps() -> None:
    assert java_short(SHORT_MAX + 1) == -32768 and java_short(-1) == -1 and java_short(5) == 5


def test_init_producer_id_on_a_new_id_starts_at_epoch_zero() -> None:
    m = _metadata(S.EMPTY, epoch=NO_PRODUCER_EPOCH)
    transit = m.prepare_increment_producer_epoch(30_000, None, 200)
    assert (transit.producer_epoch, transit.last_producer_epoch, transit.txn_timeout_ms) == (0, -1, 30_000)
    _step(m, transit)
    assert (m.producer_epoch, m.txn_timeout_ms, m.txn_last_update_timestamp) == (0, 30_000, 200)


def test_kip_360_epoch_rules() -> None:
    # A new instance (no expected epoch): bump, forget the last epoch.
    m = _metadata(S.EMPTY, epoch=5)
    _step(m, m.prepare_increment_producer_epoch(60_000, None, 200))
    assert (m.producer_epoch, m.last_producer_epoch) == (6, NO_PRODUCER_EPOCH)
    # The same producer after an error: bump, remember the epoch it had.
    _step(m, m.prepare_increment_producer_epoch(60_000, 6, 300))
    assert (m.producer_epoch, m.last_producer_epoch) == (7, 6)
    # Its retry of that call: the same answer, no bump.
    transit = m.prepare_increment_producer_epoch(60_000, 6, 400)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (7, 6)
    _step(m, transit)
    # Anything else is fenced.
    with pytest.raises(ProducerFencedError) as fenced:
        m.prepare_increment_producer_epoch(60_000, 3, 500)
    assert fenced.value.error_code == ErrorCode.PRODUCER_FENCED and m.pending_state is None


def test_epoch_exhaustion_needs_a_new_producer_id() -> None:
    m = _metadata(S.EMPTY, epoch=SHORT_MAX - 2)
    assert not m.is_producer_epoch_exhausted()
    _step(m, m.prepare_increment_producer_epoch(60_000, None, 200))
    assert m.producer_epoch == SHORT_MAX - 1 and m.is_producer_epoch_exhausted()
    with pytest.raises(IllegalTransitionError):
        m.prepare_increment_producer_epoch(60_000, None, 300)
    _step(m, m.prepare_producer_id_rotation(2000, 60_000, 300, record_last_epoch=True))
    assert (m.producer_id, m.producer_epoch, m.last_producer_epoch, m.prev_producer_id) == (
        2000, 0, SHORT_MAX - 1, 1000)
    _step(m, m.prepare_producer_id_rotation(3000, 60_000, 400, record_last_epoch=False))
    assert (m.producer_id, m.last_producer_epoch) == (3000, NO_PRODUCER_EPOCH)


def test_no_rotation_while_a_transaction_is_pending() -> None:
    for state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT):
        with pytest.raises(IllegalTransitionError):
            _metadata(state).prepare_producer_id_rotation(2000, 60_000, 300, True)


def test_fencing_bumps_once_even_if_the_fence_failed_to_reach_the_log() -> None:
    m = _metadata(S.ONGOING, epoch=5)
    assert m.prepare_fence_producer_epoch().producer_epoch == 6
    m.pending_state = None
    m.has_failed_epoch_fence = True  # the coordinator saw that append fail
    assert m.prepare_fence_producer_epoch().producer_epoch == 5
    m = _metadata(S.ONGOING, epoch=SHORT_MAX)
    assert m.prepare_fence_producer_epoch().producer_epoch == SHORT_MAX
    # A fence is never completed: the coordinator goes on to PrepareAbort with the fenced epoch.
    m = _metadata(S.ONGOING, epoch=5)
    with pytest.raises(IllegalTransitionError):
        m.complete_transition_to(m.prepare_fence_producer_epoch())


def test_complete_transition_checks_what_is_applied() -> None:
    m = _metadata(S.EMPTY)
    with pytest.raises(IllegalTransitionError):  # nothing pending
        m.complete_transition_to(m.prepare_no_transit())
    transit = m.prepare_add_partitions({TP0}, 200, TV_0)
    with pytest.raises(IllegalTransitionError):  # not the state that is pending
        m.complete_transition_to(m.prepare_no_transit())
    from dataclasses import replace
    for bad in (replace(transit, producer_epoch=9), replace(transit, producer_id=7),
                replace(transit, txn_timeout_ms=1)):
        with pytest.raises(IllegalTransitionError):
            m.complete_transition_to(bad)
    m.complete_transition_to(transit)
    # Ongoing may only add partitions.
    transit = m.prepare_add_partitions({TP1}, 300, TV_0)
    with pytest.raises(IllegalTransitionError):
        m.complete_transition_to(replace(transit, topic_partitions=frozenset({TP1})))
    m.pending_state = None
    # PrepareCommit must carry exactly the transaction's partitions.
    transit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, NO_PRODUCER_ID, 300, False)
    with pytest.raises(IllegalTransitionError):
        m.complete_transition_to(replace(transit, topic_partitions=frozenset()))
    m.pending_state = None
    # Empty (InitProducerId) must clear partitions and start time.
    e = _metadata(S.COMPLETE_ABORT)
    transit = e.prepare_increment_producer_epoch(60_000, None, 300)
    with pytest.raises(IllegalTransitionError):
        e.complete_transition_to(replace(transit, txn_start_timestamp=5))
    with pytest.raises(IllegalTransitionError):
        e.complete_transition_to(replace(transit, producer_epoch=transit.producer_epoch + 1))  # a jump of 2


def test_dead_is_never_completed() -> None:
    m = _metadata(S.COMPLETE_COMMIT)
    transit = m.prepare_dead()
    assert transit.txn_state == S.DEAD and transit.topic_partitions == frozenset()
    with pytest.raises(IllegalTransitionError):
        m.complete_transition_to(transit)
    # A never-initialized id (epoch -1) may still die.
    fresh = _metadata(S.EMPTY, epoch=NO_PRODUCER_EPOCH)
    assert fresh.prepare_dead().producer_epoch == NO_PRODUCER_EPOCH


def test_remove_partition_only_while_markers_are_written() -> None:
    m = _metadata(S.ONGOING, partitions={TP0, TP1})
    with pytest.raises(IllegalTransitionError):
        m.remove_partition(TP0)
    m = _metadata(S.PREPARE_ABORT, partitions={TP0, TP1})
    m.remove_partition(TP0)
    assert m.topic_partitions == {TP1}


def test_prev_producer_id_is_the_id_before_each_transition() -> None:
    m = _metadata(S.EMPTY, pid=1000)
    assert m.prepare_add_partitions({TP0}, 200, TV_0).prev_producer_id == 1000
