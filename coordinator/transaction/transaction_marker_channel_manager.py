"""TransactionMarkerChannelManager: writes a finished transaction's markers, then completes it.

Once PrepareCommit / PrepareAbort is in ``__transaction_state``, the
coordinator hands the transaction here. The markers go, as Kafka sends them,
as WriteTxnMarkers to the leader of every partition in the transaction (one
request per leader); each partition acknowledged is removed from the
transaction's set, and only when the set is empty is CompleteCommit /
CompleteAbort written. A partition whose leader is unknown or whose write
fails retriably is retried after ``retry_backoff_ms``; a deleted one is dropped
(nothing can read it any more); INVALID_PRODUCER_EPOCH or
TRANSACTION_COORDINATOR_FENCED mean a newer producer or coordinator has taken
over, so this one stops. If the coordinator loses the transaction's
partition meanwhile, sending stops: the new coordinator finds the transaction
prepared when it loads and writes the markers itself.

The destination is a broker id: :class:`MarkerSender` decides how a request
reaches it. On a lone broker :class:`LocalMarkerSender` takes the path the
WriteTxnMarkers handler takes (``ReplicaManager.write_txn_markers``); in a
cluster ``transaction_marker_sender.RemoteMarkerSender`` sends the markers of
partitions led elsewhere as WriteTxnMarkers requests (and keeps the local path
for the rest).

TEST ONLY: ``PAFKA_TEST_TXN_CRASH=<step>:<transactional id>`` in the broker's
environment, read once when the manager is built, makes the broker SIGKILL
itself when that id's transaction reaches ``step``: ``before-markers`` (its
PrepareCommit / PrepareAbort is in the log, no marker is sent) or
``before-complete`` (every marker is written, CompleteCommit / CompleteAbort
is not). Only the recovery tests set it (tests/integration/
test_transaction_recovery.py): a crash between two steps of ending a
transaction cannot be timed from outside the process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from coordinator.common.scheduler import Scheduler
from coordinator.transaction.transaction_metadata import TopicPartition, TransactionMetadata, TxnTransitMetadata
from coordinator.transaction.transaction_state_manager import TransactionResult, TransactionStateManager
from protocol.errors import ErrorCode
from replication.replica_manager import ReplicaManager, TxnMarker

log = logging.getLogger(__name__)

MarkerErrors = list[dict[TopicPartition, int]]

#: Errors after which the marker is written again (to the partition's leader, which may have moved).
_RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
})
#: The producer or the coordinator moved on: this coordinator's markers are no longer wanted.
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


#: TEST ONLY (see the module's docstring): the variable naming the step to crash at.
CRASH_POINT_ENV = "PAFKA_TEST_TXN_CRASH"
CRASH_STEPS = frozenset({"before-markers", "before-complete"})


@dataclass(frozen=True, slots=True)
class CrashPoint:
    """TEST ONLY: the broker kills itself when ``transactional_id`` reaches ``step``."""

    step: str
    transactional_id: str

    @staticmethod
    def from_env(environ: Mapping[str, str]) -> CrashPoint | None:
        spec = environ.get(CRASH_POINT_ENV)
        if not spec:
            return None
        step, _, transactional_id = spec.partition(":")
        if step not in CRASH_STEPS or not transactional_id:
            raise ValueError(f"{CRASH_POINT_ENV}={spec!r}: expected <step>:<transactional id>, step one of "
                             f"{sorted(CRASH_STEPS)}")
        return CrashPoint(step, transactional_id)


class MarkerSender(Protocol):
    def send(self, destination: int, markers: Sequence[TxnMarker], timeout_ms: int) -> Awaitable[MarkerErrors]:
        """WriteTxnMarkers to broker ``destination``: one {partition: error} per marker, in order."""
        ...


class LeaderLookup(Protocol):
    def __call__(self, tp: TopicPartition) -> int | None:
        """The broker leading ``tp``; -1 if the partition does not exist; None if it has no leader now."""
        ...


class LocalMarkerSender:
    """A lone broker: the markers go straight to its replica manager, as its WriteTxnMarkers handler sends them."""

    def __init__(self, broker_id: int, replica_manager: ReplicaManager) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager

    async def send(self, destination: int, markers: Sequence[TxnMarker], timeout_ms: int) -> MarkerErrors:
        if destination != self.broker_id:
            # No inter-broker channel yet: the partition looks leaderless, so the marker is retried.
            return [dict.fromkeys(m.partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER) for m in markers]
        outcome = self.replica_manager.write_txn_markers(markers, timeout_ms)
        return outcome if isinstance(outcome, list) else await outcome


def replica_leader_lookup(broker_id: int, replica_manager: ReplicaManager,
                          topic_exists: Callable[[str], bool]) -> LeaderLookup:
    def leader(tp: TopicPartition) -> int | None:
        hosted = replica_manager.get_partition(*tp)
        if hosted is not None and hosted.is_leader:
            return broker_id
        if not topic_exists(tp[0]):
            return -1
        return None
    return leader


@dataclass(slots=True)
class PendingCompleteTxn:
    transactional_id: str
    coordinator_epoch: int
    result: TransactionResult
    txn_metadata: TransactionMetadata
    new_metadata: TxnTransitMetadata
    #: Completion callbacks (tests, and whoever waits for a transaction to end).
    waiters: list[Callable[[ErrorCode], None]] = field(default_factory=list)


class TransactionMarkerChannelManager:
    def __init__(self, broker_id: int, txn_manager: TransactionStateManager, sender: MarkerSender,
                 leader_of: LeaderLookup, scheduler: Scheduler, request_timeout_ms: int = 30_000,
                 retry_backoff_ms: int = 100, crash_point: CrashPoint | None = None) -> None:
        self.broker_id = broker_id
        self.txn_manager = txn_manager
        self.sender = sender
        self.leader_of = leader_of
        self.scheduler = scheduler
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.pending: dict[str, PendingCompleteTxn] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._shutting_down = False
        #: TEST ONLY: where to crash (the broker passes ``CrashPoint.from_env(os.environ)``).
        self.crash_point = crash_point

    def _prefix(self) -> str:
        return f"[Transaction Marker Channel Manager {self.broker_id}]:"

    def _maybe_crash(self, step: str, transactional_id: str) -> None:
        """TEST ONLY: SIGKILL this process at ``step`` if the recovery tests asked for it."""
        point = self.crash_point
        if point is not None and point.step == step and point.transactional_id == transactional_id:
            log.warning("%s %s=%s:%s: killing the broker (a test's crash point)", self._prefix(), CRASH_POINT_ENV,
                        step, transactional_id)
            os.kill(os.getpid(), signal.SIGKILL)

    # -- entry point ---------------------------------------------------------------------
    def add_txn_markers_to_send(self, coordinator_epoch: int, result: TransactionResult,
                                txn_metadata: TransactionMetadata, new_metadata: TxnTransitMetadata,
                                on_complete: Callable[[ErrorCode], None] | None = None) -> None:
        """Write the markers of a prepared transaction, then its Complete* transition (``new_metadata``)."""
        tid = txn_metadata.transactional_id
        self._maybe_crash("before-markers", tid)
        pending = PendingCompleteTxn(tid, coordinator_epoch, result, txn_metadata, new_metadata)
        if on_complete is not None:
            pending.waiters.append(on_complete)
        self.pending[tid] = pending
        self._send(pending, set(txn_metadata.topic_partitions))

    def _still_ours(self, pending: PendingCompleteTxn) -> bool:
        """The transaction is still this coordinator's, at the epoch the markers were started at."""
        if self.pending.get(pending.transactional_id) is not pending or self._shutting_down:
            return False
        error, found = self.txn_manager.get_transaction_state(pending.transactional_id)
        if error != ErrorCode.NO_ERROR or found is None or found.coordinator_epoch != pending.coordinator_epoch:
            log.info("%s %s is no longer coordinated here at epoch %d (%s): its markers are left to the new "
                     "coordinator", self._prefix(), pending.transactional_id, pending.coordinator_epoch, error.name)
            self._finish(pending, ErrorCode.NOT_COORDINATOR)
            return False
        return True

    def _send(self, pending: PendingCompleteTxn, partitions: set[TopicPartition]) -> None:
        if not self._still_ours(pending):
            return
        by_leader: dict[int, list[TopicPartition]] = {}
        unknown_leader: set[TopicPartition] = set()
        for tp in sorted(partitions):
            leader = self.leader_of(tp)
            if leader is None:
                unknown_leader.add(tp)
            elif leader < 0:
                # Deleted: nobody can read the partition, so it needs no marker.
                log.info("%s %s-%d of %s no longer exists: no marker for it", self._prefix(), *tp,
                         pending.transactional_id)
                pending.txn_metadata.remove_partition(tp)
            else:
                by_leader.setdefault(leader, []).append(tp)
        if unknown_leader:
            self._retry_later(pending, unknown_leader)
        if not by_leader and not unknown_leader:
            self._maybe_write_txn_completion(pending)
            return
        m = pending.txn_metadata
        for leader, tps in by_leader.items():
            marker = TxnMarker(producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                               coordinator_epoch=pending.coordinator_epoch,
                               committed=pending.result == TransactionResult.COMMIT, partitions=tps)
            self._spawn(self._send_to(pending, leader, marker))

    def _spawn(self, coro: Awaitable[None]) -> None:
        async def run() -> None:
            await coro
        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s sending markers failed", self._prefix(), exc_info=task.exception())

    async def _send_to(self, pending: PendingCompleteTxn, leader: int, marker: TxnMarker) -> None:
        try:
            answers = await self.sender.send(leader, [marker], self.request_timeout_ms)
            errors = answers[0]
        except (TimeoutError, OSError) as exc:  # the request never got an answer: send it again
            log.info("%s WriteTxnMarkers to broker %d failed (%s): retrying", self._prefix(), leader, exc)
            errors = dict.fromkeys(marker.partitions, ErrorCode.REQUEST_TIMED_OUT)
        self._on_markers_written(pending, errors)

    def _on_markers_written(self, pending: PendingCompleteTxn, errors: dict[TopicPartition, int]) -> None:
        """Kafka's TransactionMarkerRequestCompletionHandler for one transaction."""
        if not self._still_ours(pending):
            return
        retry: set[TopicPartition] = set()
        for tp, code in errors.items():
            error = ErrorCode(code)
            if error == ErrorCode.NO_ERROR or error == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT:
                pending.txn_metadata.remove_partition(tp)
            elif error in _FENCED:
                log.info("%s the marker of %s on %s-%d was refused (%s): a newer producer or coordinator "
                         "took over; abandoning it", self._prefix(), pending.transactional_id, *tp, error.name)
                self._finish(pending, error)
                return
            elif error in _RETRIABLE:
                retry.add(tp)
            else:
                log.error("%s unexpected error %s writing the marker of %s on %s-%d", self._prefix(), error.name,
                          pending.transactional_id, *tp)
                retry.add(tp)
        if retry:
            self._retry_later(pending, retry)
        else:
            self._maybe_write_txn_completion(pending)

    def _retry_later(self, pending: PendingCompleteTxn, partitions: set[TopicPartition]) -> None:
        self.scheduler.schedule(self.retry_backoff_ms, lambda: self._send(pending, partitions))

    # -- completion ----------------------------------------------------------------------
    def _maybe_write_txn_completion(self, pending: PendingCompleteTxn) -> None:
        if pending.txn_metadata.topic_partitions or not self._still_ours(pending):
            return  # other leaders have not answered yet
        self._write_txn_completion(pending)

    def _write_txn_completion(self, pending: PendingCompleteTxn) -> None:
        self._maybe_crash("before-complete", pending.transactional_id)
        def written(error: ErrorCode) -> None:
            if error == ErrorCode.NO_ERROR:
                log.debug("%s completed %s (%s)", self._prefix(), pending.transactional_id, pending.result.name)
                self._finish(pending, error)
            elif error == ErrorCode.COORDINATOR_NOT_AVAILABLE and self._still_ours(pending):
                # The log is briefly unwritable: the markers are in, so only the completion is retried.
                self.scheduler.schedule(self.retry_backoff_ms, lambda: self._write_txn_completion(pending))
            else:
                log.info("%s writing the completion of %s failed (%s): the next coordinator completes it",
                         self._prefix(), pending.transactional_id, error.name)
                self._finish(pending, error)

        self.txn_manager.append_transaction_to_log(
            pending.transactional_id, pending.coordinator_epoch, pending.new_metadata, written,
            retry_on_error=lambda e: e == ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def _finish(self, pending: PendingCompleteTxn, error: ErrorCode) -> None:
        if self.pending.get(pending.transactional_id) is pending:
            del self.pending[pending.transactional_id]
        waiters, pending.waiters = pending.waiters, []
        for waiter in waiters:
            waiter(error)

    def remove_markers_for_txn_topic_partition(self, partition: int) -> None:
        """Leadership of a __transaction_state partition left: stop finishing its transactions."""
        for tid, pending in list(self.pending.items()):
            if self.txn_manager.partition_for(tid) == partition:
                self._finish(pending, ErrorCode.NOT_COORDINATOR)

    async def shutdown(self) -> None:
        self._shutting_down = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # A networked sender owns connections and drain tasks (transaction_marker_sender).
        close = getattr(self.sender, "shutdown", None)
        if close is not None:
            await close()
        self.pending.clear()
