"""TransactionCoordinator and its marker channel over an in-memory __transaction_state and fake markers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from coordinator.common.scheduler import ManualScheduler
from coordinator.transaction.transaction_coordinator import TransactionCoordinator, TransactionCoordinatorConfig
from coordinator.transaction.transaction_log import read
from coordinator.transaction.transaction_marker_channel_manager import TransactionMarkerChannelManager
from coordinator.transaction.transaction_metadata import SHORT_MAX, TopicPartition, TransactionState
from coordinator.transaction.transaction_state_manager import TransactionResult, TransactionStateManager
from protocol.errors import ErrorCode
from replication.replica_manager import TxnMarker
from tests.coordinator.fakes import MemoryCoordinatorLog

S = TransactionState
TP0, TP1 = ("t", 0), ("t", 1)
TID = "tid"


class FakeSender:
    """Answers WriteTxnMarkers with scripted errors (NO_ERROR once the script runs out), or holds them."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, TxnMarker]] = []
        self.script: list[dict[TopicPartition, ErrorCode]] = []
        self.hold = False
        self.held: list[tuple[asyncio.Future[list[dict[TopicPartition, int]]], TxnMarker]] = []

    def send(self, destination: int, markers: Sequence[TxnMarker], timeout_ms: int
             ) -> Awaitable[list[dict[TopicPartition, int]]]:
        future: asyncio.Future[list[dict[TopicPartition, int]]] = asyncio.get_running_loop().create_future()
        (marker,) = markers
        self.sent.append((destination, marker))
        if self.hold:
            self.held.append((future, marker))
        else:
            future.set_result([self._answer(marker)])
        return future

    def _answer(self, marker: TxnMarker) -> dict[TopicPartition, int]:
        scripted = self.script.pop(0) if self.script else {}
        return {tp: scripted.get(tp, ErrorCode.NO_ERROR) for tp in marker.partitions}

    def release(self) -> None:
        held, self.held = self.held, []
        for future, marker in held:
            future.set_result([self._answer(marker)])


class Harness:
    def __init__(self, leaders: dict[TopicPartition, int | None] | None = None, **config: int) -> None:
        self.log = MemoryCoordinatorLog()
        self.clock = ManualScheduler()
        self.manager = TransactionStateManager(0, self.log, self.clock)
        self.sender = FakeSender()
        self.leaders = leaders if leaders is not None else {}
        self.channel = TransactionMarkerChannelManager(0, self.manager, self.sender, self.leader_of, self.clock,
                                                       retry_backoff_ms=100)
        self.next_pid = 1000

        async def generate() -> int:
            self.next_pid += 1
            return self.next_pid

        self.coordinator = TransactionCoordinator(0, self.manager, self.channel, generate, self.clock,
                                                  lambda group: 7, TransactionCoordinatorConfig(**config))
        for partition in range(self.log.num_partitions):
            self.manager.load_partition(partition, 0)

    def leader_of(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp, 0)

    def metadata(self, tid: str = TID) -> Any:
        found = self.manager.get_transaction_state(tid)[1]
        assert found is not None
        return found.transaction_metadata

    def states_written(self, tid: str = TID) -> list[str]:
        partition = self.manager.partition_for(tid)
        states = []
        for _, key, value in self.log.records.get(partition, []):
            read_tid, m = read(key, value)
            if read_tid == tid and m is not None:
                states.append(m.state.state_name)
        return states


def run(scenario: Callable[[Harness], Coroutine[Any, Any, None]], **kwargs: Any) -> None:
    async def main() -> None:
        await scenario(Harness(**kwargs))
    asyncio.run(main())


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def begin(h: Harness, partitions: set[TopicPartition] | None = None, tid: str = TID) -> tuple[int, int]:
    init = await h.coordinator.handle_init_producer_id(tid, 60_000)
    assert init.error == ErrorCode.NO_ERROR
    error = await h.coordinator.handle_add_partitions_to_transaction(tid, init.producer_id, init.producer_epoch,
                                                                     partitions or {TP0, TP1})
    assert error == ErrorCode.NO_ERROR
    return init.producer_id, init.producer_epoch


def test_init_producer_id_gives_a_new_id_then_bumps_its_epoch() -> None:
    async def scenario(h: Harness) -> None:
        first = await h.coordinator.handle_init_producer_id(TID, 60_000)
        second = await h.coordinator.handle_init_producer_id(TID, 60_000)
        assert (first.error, first.producer_epoch) == (ErrorCode.NO_ERROR, 0)
        assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
        assert h.states_written() == ["Empty", "Empty"]
        # KIP-360: the current instance recovering bumps; a stale one is fenced.
        assert (await h.coordinator.handle_init_producer_id(TID, 60_000, first.producer_id, 0)).error == \
            ErrorCode.PRODUCER_FENCED
        recovered = await h.coordinator.handle_init_producer_id(TID, 60_000, first.producer_id, 1)
        assert (recovered.error, recovered.producer_epoch) == (ErrorCode.NO_ERROR, 2)
        # A retry of that bump (its answer lost) gets the same epoch again.
        retried = await h.coordinator.handle_init_producer_id(TID, 60_000, first.producer_id, 1)
        assert (retried.error, retried.producer_epoch) == (ErrorCode.NO_ERROR, 2)
    run(scenario)


def test_invalid_requests() -> None:
    async def scenario(h: Harness) -> None:
        assert (await h.coordinator.handle_init_producer_id(TID, 900_001)).error == \
            ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert (await h.coordinator.handle_init_producer_id(TID, 0)).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert (await h.coordinator.handle_init_producer_id("", 1000)).error == ErrorCode.INVALID_REQUEST
        assert await h.coordinator.handle_add_partitions_to_transaction("unknown", 1, 0, {TP0}) == \
            ErrorCode.INVALID_PRODUCER_ID_MAPPING
        pid, epoch = await begin(h)
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, pid + 1, epoch, {TP0}) == \
            ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, pid, epoch + 1, {TP0}) == \
            ErrorCode.PRODUCER_FENCED
        assert await h.coordinator.handle_end_transaction(TID, pid, epoch - 1, TransactionResult.COMMIT) == \
            ErrorCode.PRODUCER_FENCED
    run(scenario)


def test_commit_writes_prepare_then_markers_then_complete() -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        h.sender.hold = True
        assert await h.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.COMMIT) == \
            ErrorCode.NO_ERROR
        await settle()
        # PrepareCommit is in the log before any marker went out; nothing completes before the markers.
        assert h.states_written() == ["Empty", "Ongoing", "PrepareCommit"]
        (dest, marker), = h.sender.sent
        assert (dest, marker.committed, sorted(marker.partitions), marker.producer_epoch) == \
            (0, True, [TP0, TP1], epoch)
        assert await h.coordinator.handle_add_partitions_to_transaction(TID, pid, epoch, {TP0}) == \
            ErrorCode.CONCURRENT_TRANSACTIONS
        assert (await h.coordinator.handle_init_producer_id(TID, 60_000)).error == ErrorCode.CONCURRENT_TRANSACTIONS
        h.sender.release()
        await settle()
        assert h.states_written() == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
        assert h.metadata().state == S.COMPLETE_COMMIT and not h.metadata().topic_partitions
        # A retried EndTxn of a completed commit succeeds; an abort of it is invalid.
        assert await h.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.COMMIT) == \
            ErrorCode.NO_ERROR
        assert await h.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.ABORT) == \
            ErrorCode.INVALID_TXN_STATE
    run(scenario)


def test_markers_to_two_leaders_complete_only_when_both_answered() -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        h.sender.hold = True
        await h.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.ABORT)
        await settle()
        assert sorted((d, tuple(m.partitions)) for d, m in h.sender.sent) == [(0, (TP0,)), (1, (TP1,))]
        future, marker = h.sender.held.pop(0)
        future.set_result([dict.fromkeys(marker.partitions, ErrorCode.NO_ERROR)])
        await settle()
        assert h.states_written()[-1] == "PrepareAbort" and h.metadata().topic_partitions == {TP1}
        h.sender.release()
        await settle()
        assert h.states_written()[-1] == "CompleteAbort"
    run(scenario, leaders={TP0: 0, TP1: 1})


def test_retriable_marker_errors_and_unknown_leaders_are_retried() -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        h.sender.script = [{TP0: ErrorCode.NOT_LEADER_OR_FOLLOWER}, {TP0: ErrorCode.REQUEST_TIMED_OUT}]
        await h.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.COMMIT)
        await settle()
        assert h.metadata().topic_partitions == {TP0}  # TP1 written, TP0 not
        h.clock.advance(100)
        await settle()
        assert h.states_written()[-1] == "PrepareCommit"
        h.clock.advance(100)
        await settle()
        assert h.states_written()[-1] == "CompleteCommit"
        assert [m.partitions for _, m in h.sender.sent] == [[TP0, TP1], [TP0], [TP0]]
        # A partition with no leader waits until one is elected; a deleted one needs no marker.
        h.leaders.update({TP0: None, TP1: -1})
        pid, epoch = await begin(h)
        await h.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.COMMIT)
        await settle()
        sent = len(h.sender.sent)
        h.clock.advance(300)
        await settle()
        assert len(h.sender.sent) == sent and h.metadata().topic_partitions == {TP0}
        h.leaders[TP0] = 0
        h.clock.advance(100)
        await settle()
        assert h.states_written()[-1] == "CompleteCommit"
    run(scenario)


def test_a_fenced_marker_is_abandoned() -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        h.sender.script = [{TP0: ErrorCode.TRANSACTION_COORDINATOR_FENCED}]
        await h.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.COMMIT)
        await settle()
        h.clock.advance(1000)
        await settle()
        assert h.states_written()[-1] == "PrepareCommit" and len(h.sender.sent) == 1
        assert not h.channel.pending
    run(scenario)


def test_init_producer_id_aborts_the_ongoing_transaction_of_a_fenced_producer() -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        result = await h.coordinator.handle_init_producer_id(TID, 60_000)
        assert result.error == ErrorCode.CONCURRENT_TRANSACTIONS
        await settle()
        # The abort is written with the fenced epoch + 1, and its markers carry it.
        assert h.states_written() == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort"]
        (_, marker), = h.sender.sent
        assert (marker.committed, marker.producer_epoch) == (False, epoch + 1)
        # The old producer is fenced; the retry gets a second bump.
        assert await h.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.COMMIT) == \
            ErrorCode.PRODUCER_FENCED
        retried = await h.coordinator.handle_init_producer_id(TID, 60_000)
        assert (retried.error, retried.producer_id, retried.producer_epoch) == (ErrorCode.NO_ERROR, pid, epoch + 2)
    run(scenario)


def test_a_failed_fence_reuses_its_epoch() -> None:
    async def scenario(h: Harness) -> None:
        _, epoch = await begin(h)
        h.log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        assert (await h.coordinator.handle_init_producer_id(TID, 60_000)).error == \
            ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert h.metadata().has_failed_epoch_fence and h.metadata().pending_state is None
        h.log.fail_with = None
        assert (await h.coordinator.handle_init_producer_id(TID, 60_000)).error == ErrorCode.CONCURRENT_TRANSACTIONS
        await settle()
        (_, marker), = h.sender.sent
        assert marker.producer_epoch == epoch + 1
    run(scenario)


async def _cancel_while_written(h: Harness, request: Coroutine[Any, Any, object]) -> None:
    """Start ``request``, hold its write to __transaction_state, cancel it (its client went away), then
    let the write finish: what a SIGKILLed client does to a request the broker is handling."""
    h.log.hold = True
    task = asyncio.get_running_loop().create_task(request)
    await settle()
    assert h.log.held, "the request wrote nothing"
    task.cancel()
    await settle()
    h.log.hold = False
    h.log.release()
    await settle()


def test_an_end_txn_whose_client_went_away_still_completes() -> None:
    """The PrepareCommit reached the log, so the markers must follow: a request task cancelled with
    its connection once left the id in PrepareCommit, answering CONCURRENT_TRANSACTIONS forever."""
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        await _cancel_while_written(h, h.coordinator.handle_end_transaction(TID, pid, epoch,
                                                                            TransactionResult.COMMIT))
        assert h.states_written() == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
        assert h.metadata().state == S.COMPLETE_COMMIT
        retried = await h.coordinator.handle_init_producer_id(TID, 60_000)
        assert (retried.error, retried.producer_epoch) == (ErrorCode.NO_ERROR, epoch + 1)
    run(scenario)


def test_a_fence_whose_client_went_away_still_aborts() -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        # The fence's own InitProducerId is cancelled while its PrepareAbort is being written.
        await _cancel_while_written(h, h.coordinator.handle_init_producer_id(TID, 60_000))
        assert h.states_written() == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort"]
        retried = await h.coordinator.handle_init_producer_id(TID, 60_000)
        assert (retried.error, retried.producer_id, retried.producer_epoch) == (ErrorCode.NO_ERROR, pid, epoch + 2)
    run(scenario)


def test_an_end_txn_v5_whose_client_went_away_still_completes() -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        await _cancel_while_written(h, h.coordinator.handle_end_transaction_with_epoch_bump(
            TID, pid, epoch, TransactionResult.ABORT))
        assert h.states_written()[-2:] == ["PrepareAbort", "CompleteAbort"]
        assert h.metadata().state == S.COMPLETE_ABORT and h.metadata().pending_state is None
    run(scenario)


def test_transactions_past_their_timeout_are_aborted() -> None:
    async def scenario(h: Harness) -> None:
        h.coordinator.startup()
        init = await h.coordinator.handle_init_producer_id(TID, 5_000)
        await h.coordinator.handle_add_partitions_to_transaction(TID, init.producer_id, init.producer_epoch, {TP0})
        h.clock.advance(1_000)
        await settle()
        assert h.metadata().state == S.ONGOING
        h.clock.advance(5_000)
        await settle()
        assert h.states_written()[-2:] == ["PrepareAbort", "CompleteAbort"]
        assert h.metadata().producer_epoch == init.producer_epoch + 1  # the producer is fenced
        assert await h.coordinator.handle_end_transaction(TID, init.producer_id, init.producer_epoch,
                                                          TransactionResult.COMMIT) == ErrorCode.PRODUCER_FENCED
        await h.coordinator.shutdown()
    run(scenario, abort_timed_out_transactions_interval_ms=1_000)


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    async def scenario(h: Harness) -> None:
        first = await h.coordinator.handle_init_producer_id(TID, 60_000)
        m = h.metadata()
        m.producer_epoch = SHORT_MAX - 1
        rotated = await h.coordinator.handle_init_producer_id(TID, 60_000)
        assert rotated.error == ErrorCode.NO_ERROR
        assert rotated.producer_id != first.producer_id and rotated.producer_epoch == 0
    run(scenario)


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    async def scenario(h: Harness) -> None:
        init = await h.coordinator.handle_init_producer_id(TID, 60_000)
        assert await h.coordinator.handle_add_offsets_to_transaction(TID, init.producer_id, init.producer_epoch,
                                                                     "group") == ErrorCode.NO_ERROR
        assert h.metadata().topic_partitions == {("__consumer_offsets", 7)}
    run(scenario)


def test_a_transaction_prepared_before_a_restart_is_completed_on_load() -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        h.sender.hold = True
        await h.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.COMMIT)
        await settle()
        # A new coordinator over the same log: it finds PrepareCommit and writes the markers itself.
        again = Harness()
        again.log.records = h.log.records
        partition = again.manager.partition_for(TID)
        again.manager.load_partition(partition, 1)
        await settle()
        assert [m.committed for _, m in again.sender.sent] == [True]
        assert again.states_written()[-1] == "CompleteCommit"
    run(scenario)


def test_losing_the_partition_stops_the_markers() -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await begin(h)
        h.sender.hold = True
        await h.coordinator.handle_end_transaction(TID, pid, epoch, TransactionResult.COMMIT)
        await settle()
        h.coordinator.on_resignation(h.manager.partition_for(TID))
        h.sender.release()
        await settle()
        assert h.states_written()[-1] == "PrepareCommit" and not h.channel.pending
    run(scenario)


def _failing_transition(gate: asyncio.Event) -> Coroutine[Any, Any, None]:
    async def transition() -> None:
        await gate.wait()
        raise RuntimeError("the log refused the write")
    return transition()


def test_a_failed_transition_is_reported_once_to_its_waiting_request(caplog: Any) -> None:
    """The request hears the failure (its handler logs it); the coordinator adds no second line."""
    async def scenario(h: Harness) -> None:
        gate = asyncio.Event()
        gate.set()
        try:
            await h.coordinator._outliving_the_request(_failing_transition(gate), "EndTxn(tid)")
        except RuntimeError as exc:
            assert str(exc) == "the log refused the write"
        else:
            raise AssertionError("the request did not hear the failure")
        await settle()
    with caplog.at_level("ERROR", logger="coordinator.transaction.transaction_coordinator"):
        run(scenario)
    assert [r.getMessage() for r in caplog.records] == []


def test_a_failed_transition_whose_request_went_away_is_logged_by_the_coordinator(caplog: Any) -> None:
    async def scenario(h: Harness) -> None:
        gate = asyncio.Event()
        request = asyncio.get_running_loop().create_task(
            h.coordinator._outliving_the_request(_failing_transition(gate), "EndTxn(tid)"))
        await settle()
        request.cancel()
        await settle()
        assert request.cancelled()
        gate.set()
        await settle()
    with caplog.at_level("ERROR", logger="coordinator.transaction.transaction_coordinator"):
        run(scenario)
    assert [r.getMessage() for r in caplog.records] == ["[Transaction Coordinator 0]: EndTxn(tid) failed"]
