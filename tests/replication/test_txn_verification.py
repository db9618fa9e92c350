"""ReplicaManager's transaction verification (KIP-890 part 1) over a real log and a scripted verifier."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from protocol.errors import ErrorCode
from replication.append_thread import AppendThread
from replication.partition import Partition
from replication.replica_manager import PartitionAppendResult, ReplicaManager, TxnMarker
from replication.txn_verification import TransactionalProduce
from storage.log import Log
from storage.log_config import LogConfig
from tests.storage.helpers import make_batch

PID, EPOCH = 4000, 0
TP = ("t", 0)
Answer = dict[tuple[str, int], int]


class ScriptedVerifier:
    """Answers each verification with ``answer`` after running ``before_answer`` (a race, scripted)."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer: Answer = answer or {}
        self.calls: list[tuple[str, int, int, list[tuple[str, int]]]] = []
        self.before_answer: Callable[[], Awaitable[None]] | None = None

    async def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Sequence[tuple[str, int]], add_partitions: bool = False) -> Answer:
        self.calls.append((transactional_id, producer_id, producer_epoch, list(partitions)))
        if self.before_answer is not None:
            await self.before_answer()
        return {tp: self.answer.get(tp, ErrorCode.NO_ERROR) for tp in partitions}


class Setup:
    def __init__(self, tmp_path: Path, verifier: ScriptedVerifier, enabled: bool = True) -> None:
        self.log = Log.open(tmp_path / "t-0", LogConfig(), had_clean_shutdown=True, producer_state=True)
        self.executor = concurrent.futures.ThreadPoolExecutor(1)
        self.manager = ReplicaManager(0, None, AppendThread(self.executor))  # type: ignore[arg-type]
        self.partition = Partition("t", 0, uuid.uuid4(), self.log, 0, [0])
        self.manager.partitions[TP] = self.partition
        self.manager.set_transaction_verifier(verifier, lambda: self.enabled)
        self.enabled = enabled
        self.sequence = 0

    def batch(self, transactional: bool = True, count: int = 1) -> bytearray:
        batch = make_batch(count, producer_id=PID, producer_epoch=EPOCH, base_sequence=self.sequence,
                           transactional=transactional)
        self.sequence += count
        return batch

    async def produce(self, batch: bytearray, tid: str | None = "tid", abortable: bool = False
                      ) -> PartitionAppendResult:
        txn = None if tid is None else TransactionalProduce(tid, abortable)
        outcome = self.manager.append_records([(*TP, batch)], 1, 5000, transactional=txn)
        results = outcome if isinstance(outcome, list) else await outcome
        return results[0]

    async def abort(self) -> None:
        marker = TxnMarker(PID, EPOCH, 0, False, [TP])
        outcome = self.manager.write_txn_markers([marker], 5000)
        answers = outcome if isinstance(outcome, list) else await outcome
        assert answers == [{TP: ErrorCode.NO_ERROR}]

    @property
    def ongoing_txns(self) -> dict[int, object]:
        state = self.log.producer_state
        assert state is not None
        return dict(state.ongoing_txns)

    def close(self) -> None:
        self.executor.shutdown()
        self.log.close()


def _run(tmp_path: Path, verifier: ScriptedVerifier, scenario: Callable[[Setup], Awaitable[None]],
         enabled: bool = True) -> None:
    async def main() -> None:
        setup = Setup(tmp_path, verifier, enabled)
        try:
            await scenario(setup)
        finally:
            setup.close()
    asyncio.run(main())


def test_the_first_batch_is_verified_and_later_ones_take_the_usual_path(tmp_path: Path) -> None:
    verifier = ScriptedVerifier()

    async def scenario(s: Setup) -> None:
        first = s.manager.append_records([(*TP, s.batch())], 1, 5000, transactional=TransactionalProduce("tid", True))
        assert not isinstance(first, list)  # it waits for the coordinator
        assert (await first)[0].error_code == ErrorCode.NO_ERROR
        assert verifier.calls == [("tid", PID, EPOCH, [TP])]
        second = s.manager.append_records([(*TP, s.batch())], 1, 5000, transactional=TransactionalProduce("tid", True))
        assert isinstance(second, list) and second[0].error_code == ErrorCode.NO_ERROR  # answered at once
        assert len(verifier.calls) == 1
        assert s.log.log_end_offset == 2 and s.partition.last_stable_offset == 0  # one open transaction

    _run(tmp_path, verifier, scenario)


def test_a_refused_verification_appends_nothing_and_answers_as_kafka(tmp_path: Path) -> None:
    cases = [  # coordinator's answer, produce v11+?, the produce's error
        (ErrorCode.TRANSACTION_ABORTABLE, True, ErrorCode.TRANSACTION_ABORTABLE),
        (ErrorCode.TRANSACTION_ABORTABLE, False, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.INVALID_TXN_STATE, False, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.PRODUCER_FENCED, True, ErrorCode.INVALID_PRODUCER_EPOCH),
        (ErrorCode.INVALID_PRODUCER_ID_MAPPING, True, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
        (ErrorCode.NOT_COORDINATOR, True, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, False, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.CONCURRENT_TRANSACTIONS, True, ErrorCode.NOT_ENOUGH_REPLICAS),
    ]
    verifier = ScriptedVerifier()

    async def scenario(s: Setup) -> None:
        for answer, abortable, expected in cases:
            verifier.answer = {TP: answer}
            result = await s.produce(s.batch(), abortable=abortable)
            assert (answer, result.error_code) == (answer, expected)
            assert result.info is None and s.log.log_end_offset == 0
        assert s.partition.last_stable_offset == 0 and not s.ongoing_txns

    _run(tmp_path, verifier, scenario)


def test_concurrent_transactions_is_asked_again_before_failing(tmp_path: Path) -> None:
    verifier = ScriptedVerifier({TP: ErrorCode.CONCURRENT_TRANSACTIONS})

    async def complete_soon() -> None:
        if len(verifier.calls) == 2:  # the previous transaction completes meanwhile
            verifier.answer = {}

    verifier.before_answer = complete_soon

    async def scenario(s: Setup) -> None:
        assert (await s.produce(s.batch())).error_code == ErrorCode.NO_ERROR
        assert len(verifier.calls) == 2

    _run(tmp_path, verifier, scenario)


def test_a_verification_that_races_an_abort_marker_cannot_append(tmp_path: Path) -> None:
    """The coordinator says "in the transaction", but its abort marker lands before the append."""
    verifier = ScriptedVerifier()

    async def scenario(s: Setup) -> None:
        assert (await s.produce(s.batch())).error_code == 0  # transaction 1 open here
        await s.abort()  # ... and aborted
        verifier.before_answer = s.abort  # the next verification is overtaken by another abort
        late = await s.produce(s.batch())
        assert late.error_code == ErrorCode.INVALID_TXN_STATE and late.info is None
        end = s.log.log_end_offset
        assert s.partition.last_stable_offset == end  # nothing hangs
        assert not s.ongoing_txns

    _run(tmp_path, verifier, scenario)


def test_pipelined_produces_keep_their_order_behind_a_verification(tmp_path: Path) -> None:
    verifier = ScriptedVerifier()
    gate = asyncio.Event

    async def scenario(s: Setup) -> None:
        opened = gate()

        async def slow() -> None:
            await opened.wait()

        verifier.before_answer = slow
        txn = TransactionalProduce("tid", True)
        first = s.manager.append_records([(*TP, s.batch())], 1, 5000, transactional=txn)
        second = s.manager.append_records([(*TP, s.batch())], 1, 5000, transactional=txn)
        assert not isinstance(first, list) and not isinstance(second, list)  # the second waits its turn
        tasks = [asyncio.ensure_future(first), asyncio.ensure_future(second)]
        await asyncio.sleep(0.05)
        assert not any(t.done() for t in tasks)
        opened.set()
        results = [(await t)[0] for t in tasks]
        assert [r.error_code for r in results] == [0, 0]
        assert [r.info.first_offset for r in results if r.info] == [0, 1]
        assert len(verifier.calls) == 1  # the second found the transaction open
        assert s.manager.txn_verification is not None and not s.manager.txn_verification.in_flight

    _run(tmp_path, verifier, scenario)


def test_a_transactional_batch_without_a_transactional_id_is_refused(tmp_path: Path) -> None:
    verifier = ScriptedVerifier()

    async def scenario(s: Setup) -> None:
        result = await s.produce(s.batch(), tid=None)
        assert result.error_code == ErrorCode.INVALID_TXN_STATE and s.log.log_end_offset == 0
        plain = make_batch(2, producer_id=PID + 1, producer_epoch=0, base_sequence=0)
        assert (await s.produce(plain, tid=None)).error_code == 0  # idempotent batches are untouched
        assert verifier.calls == []

    _run(tmp_path, verifier, scenario)


def test_verification_off_appends_without_asking(tmp_path: Path) -> None:
    verifier = ScriptedVerifier({TP: ErrorCode.INVALID_TXN_STATE})

    async def scenario(s: Setup) -> None:
        assert (await s.produce(s.batch())).error_code == 0
        assert (await s.produce(s.batch(), tid=None)).error_code == 0
        assert verifier.calls == []
        s.enabled = True  # the dynamic config turned on: the next transaction is verified
        await s.abort()
        assert (await s.produce(s.batch())).error_code == ErrorCode.INVALID_TXN_STATE

    _run(tmp_path, verifier, scenario, enabled=False)


def test_two_producers_in_one_request_are_refused(tmp_path: Path) -> None:
    verifier = ScriptedVerifier()

    async def scenario(s: Setup) -> None:
        s.manager.partitions[("t", 1)] = s.partition  # a second entry (same log is fine: nothing is appended)
        other = make_batch(1, producer_id=PID + 1, producer_epoch=0, base_sequence=0, transactional=True)
        outcome = s.manager.append_records([(*TP, s.batch()), ("t", 1, other)], 1, 5000,
                                           transactional=TransactionalProduce("tid", True))
        results = outcome if isinstance(outcome, list) else await outcome
        assert [r.error_code for r in results] == [ErrorCode.INVALID_PRODUCER_ID_MAPPING] * 2
        assert s.log.log_end_offset == 0 and verifier.calls == []

    _run(tmp_path, verifier, scenario)
