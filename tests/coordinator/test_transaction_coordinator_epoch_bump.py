"""EndTxn under transaction version 2 (KIP-890 part 2): an epoch bump per transaction, over fakes.

Kafka's table of TV2 answers for a transactional id that has no transaction
ongoing ("retry" is the epoch before the last bump, "current" the epoch now):

    state           abort retry | abort current | commit retry | commit current
    Empty           FENCED      | bump          | FENCED       | INVALID_TXN_STATE
    CompleteAbort   ok          | bump          | INVALID      | INVALID_TXN_STATE
    CompleteCommit  INVALID     | bump          | ok           | INVALID_TXN_STATE
"""

from __future__ import annotations

from coordinator.transaction.transaction_metadata import SHORT_MAX, TV_2, TransactionState
from coordinator.transaction.transaction_state_manager import TransactionResult
from protocol.errors import ErrorCode
from tests.coordinator.test_transaction_coordinator import TID, TP0, TP1, Harness, begin, run, settle

S = TransactionState
COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT


def test_commit_bumps_the_epoch_and_the_markers_carry_it() -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        ended = await h.coordinator.handle_end_transaction_with_epoch_bump(TID, pid, epoch, COMMIT)
        assert (ended.error, ended.producer_id, ended.producer_epoch) == (ErrorCode.NO_ERROR, pid, epoch + 1)
        await settle()
        assert {(m.producer_epoch, tuple(m.partitions)) for _, m in h.sender.sent} == {(epoch + 1, (TP0, TP1))}
        m = h.metadata()
        assert (m.state, m.producer_epoch, m.last_producer_epoch, m.client_transaction_version) == \
            (S.COMPLETE_COMMIT, epoch + 1, epoch, TV_2)
        assert h.states_written() == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
        # The next transaction runs at the bumped epoch; the old one is fenced.
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, pid, epoch, {TP0}) == \
            ErrorCode.PRODUCER_FENCED
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, pid, epoch + 1, {TP0}) == \
            ErrorCode.NO_ERROR
    run(scenario)


def test_retries_and_ends_with_nothing_ongoing() -> None:
    async def scenario(h: Harness) -> None:
        pid, e0 = await begin(h)
        end = h.coordinator.handle_end_transaction_with_epoch_bump
        h.sender.hold = True
        assert (await end(TID, pid, e0, COMMIT)).producer_epoch == e0 + 1
        # While the markers are written, a retry waits; the epoch it used is no longer current.
        assert (await end(TID, pid, e0, COMMIT)).error == ErrorCode.CONCURRENT_TRANSACTIONS
        assert (await end(TID, pid, e0 + 1, COMMIT)).error == ErrorCode.PRODUCER_FENCED
        await settle()
        h.sender.release()
        await settle()
        # CompleteCommit: commit retry ok, abort retry INVALID_TXN_STATE, commit current INVALID_TXN_STATE.
        retried = await end(TID, pid, e0, COMMIT)
        assert (retried.error, retried.producer_id, retried.producer_epoch) == (ErrorCode.NO_ERROR, pid, e0 + 1)
        assert (await end(TID, pid, e0, ABORT)).error == ErrorCode.INVALID_TXN_STATE
        assert (await end(TID, pid, e0 + 1, COMMIT)).error == ErrorCode.INVALID_TXN_STATE
        assert (await end(TID, pid, e0 - 1 if e0 else 9, COMMIT)).error == ErrorCode.PRODUCER_FENCED
        assert (await end(TID, pid + 1, e0 + 1, COMMIT)).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # Abort current with nothing ongoing: a bump, and no marker to write.
        sent = len(h.sender.sent)
        aborted = await end(TID, pid, e0 + 1, ABORT)
        assert (aborted.error, aborted.producer_epoch) == (ErrorCode.NO_ERROR, e0 + 2)
        await settle()
        assert len(h.sender.sent) == sent and h.metadata().state == S.COMPLETE_ABORT
        # CompleteAbort: abort retry ok, commit retry INVALID_TXN_STATE.
        assert (await end(TID, pid, e0 + 1, ABORT)).producer_epoch == e0 + 2
        assert (await end(TID, pid, e0 + 1, COMMIT)).error == ErrorCode.INVALID_TXN_STATE
        assert (await end(TID, pid, e0 + 2, COMMIT)).error == ErrorCode.INVALID_TXN_STATE
    run(scenario)


def test_empty_id_abort_bumps_and_commit_is_invalid() -> None:
    async def scenario(h: Harness) -> None:
        init = await h.coordinator.handle_init_producer_id(TID, 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        end = h.coordinator.handle_end_transaction_with_epoch_bump
        assert (await end(TID, pid, epoch, COMMIT)).error == ErrorCode.INVALID_TXN_STATE
        assert (await end("", pid, epoch, ABORT)).error == ErrorCode.INVALID_REQUEST
        assert (await end("unknown", pid, epoch, ABORT)).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        h.metadata().producer_epoch = epoch + 1  # as if bumped: the epoch before it is a retry's
        assert (await end(TID, pid, epoch, ABORT)).error == ErrorCode.PRODUCER_FENCED
        bumped = await end(TID, pid, epoch + 1, ABORT)
        assert (bumped.error, bumped.producer_epoch) == (ErrorCode.NO_ERROR, epoch + 2)
    run(scenario)


def test_an_exhausted_epoch_moves_the_producer_to_a_new_id() -> None:
    async def scenario(h: Harness) -> None:
        pid, _ = await begin(h)
        h.metadata().producer_epoch = SHORT_MAX - 1  # the last epoch a client may use
        end = h.coordinator.handle_end_transaction_with_epoch_bump
        ended = await end(TID, pid, SHORT_MAX - 1, COMMIT)
        assert ended.error == ErrorCode.NO_ERROR
        assert ended.producer_id not in (pid, -1) and ended.producer_epoch == 0
        await settle()
        # The markers were written with the last epoch of the old id; the next transaction uses the new id.
        assert {(mk.producer_id, mk.producer_epoch) for _, mk in h.sender.sent} == {(pid, SHORT_MAX)}
        m = h.metadata()
        assert (m.state, m.producer_id, m.producer_epoch, m.prev_producer_id) == \
            (S.COMPLETE_COMMIT, ended.producer_id, 0, pid)
        # A retry from before the rotation (old id, last epoch) is answered with the new id.
        retried = await end(TID, pid, SHORT_MAX - 1, COMMIT)
        assert (retried.error, retried.producer_id, retried.producer_epoch) == \
            (ErrorCode.NO_ERROR, ended.producer_id, 0)
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, ended.producer_id, 0, {TP0}) == \
            ErrorCode.NO_ERROR
    run(scenario)
