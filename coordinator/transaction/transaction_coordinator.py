"""TransactionCoordinator: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn for transactional ids.

Kafka's TransactionCoordinator on pafka's interfaces. Every decision is made
on the cached :class:`TransactionMetadata` and written to
``__transaction_state`` before it takes effect (the state manager applies a
transition only once its record is in the log). The event loop is the only
thread touching the metadata; its ``pending_state`` stands in for Kafka's
per-transaction lock across the awaits of a log write: a second request
arriving meanwhile gets CONCURRENT_TRANSACTIONS.

EndTxn answers as soon as PrepareCommit / PrepareAbort is written, as Kafka
does: the outcome is decided then, and a restart finishes it from the log.
The markers are then written by the :class:`TransactionMarkerChannelManager`,
which writes CompleteCommit / CompleteAbort only after every partition
acknowledged its marker; until then the id answers CONCURRENT_TRANSACTIONS.

Transaction version 0/1 clients (EndTxn up to v4) get their producer epoch
bumped by InitProducerId only; EndTxn v5 (transaction version 2, KIP-890
part 2) bumps it on every commit and abort.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from coordinator.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from coordinator.common.scheduler import Scheduler, Timer
from coordinator.transaction.transaction_marker_channel_manager import TransactionMarkerChannelManager
from coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TV_0,
    TV_2,
    IllegalTransitionError,
    ProducerFencedError,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from coordinator.transaction.transaction_state_manager import (
    ListTransactionsResult,
    TransactionResult,
    TransactionStateManager,
)
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

S = TransactionState
T = TypeVar("T")
#: Gives a producer id never handed out before (it may block on a durable write: awaited off the loop).
ProducerIdGenerator = Callable[[], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    """EndTxn v5's answer: the producer id and epoch the client continues with (TV2 bumps the epoch)."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    """DescribeTransactions' answer for one transactional id (Kafka's TransactionState of that response)."""

    transactional_id: str
    error: ErrorCode
    state_name: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 0
    txn_start_timestamp: int = -1
    topic_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionCoordinatorConfig:
    #: transaction.abort.timed.out.transaction.cleanup.interval.ms
    abort_timed_out_transactions_interval_ms: int = 10_000


class _Refused(Exception):
    """A request refused before anything is written: its error code is the answer."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


class TransactionCoordinator:
    def __init__(self, broker_id: int, txn_manager: TransactionStateManager,
                 marker_channel: TransactionMarkerChannelManager, generate_producer_id: ProducerIdGenerator,
                 scheduler: Scheduler, offsets_partition_for: Callable[[str], int],
                 config: TransactionCoordinatorConfig | None = None) -> None:
        self.broker_id = broker_id
        self.txn_manager = txn_manager
        self.marker_channel = marker_channel
        self.generate_producer_id = generate_producer_id
        self.scheduler = scheduler
        self.offsets_partition_for = offsets_partition_for
        self.config = config or TransactionCoordinatorConfig()
        self._abort_timer: Timer | None = None
        #: Work this coordinator owns (timed-out aborts, requests' transitions): cancelled at shutdown.
        self._tasks: set[asyncio.Task[Any]] = set()
        self._shutting_down = False
        txn_manager.send_txn_markers = marker_channel.add_txn_markers_to_send

    def _prefix(self) -> str:
        return f"[Transaction Coordinator {self.broker_id}]:"

    # -- helpers ----------------------------------------------------------------------------
    def _append(self, transactional_id: str, coordinator_epoch: int, transit: TxnTransitMetadata
                ) -> asyncio.Future[ErrorCode]:
        done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()

        def written(error: ErrorCode) -> None:
            if not done.done():
                done.set_result(error)

        self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit, written)
        return done

    def _own(self, work: Coroutine[Any, Any, T], name: str, *, log_failure: bool = True) -> asyncio.Task[T]:
        """A task cancelled at shutdown; its failure logged unless someone awaiting it hears it."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if log_failure:
            task.add_done_callback(self._log_failure)
        return task

    def _log_failure(self, task: asyncio.Task[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s %s failed", self._prefix(), task.get_name(), exc_info=task.exception())

    async def _outliving_the_request(self, work: Coroutine[Any, Any, T], name: str) -> T:
        """A request's transition, run to its end even if the request is cancelled.

        A client that disconnects cancels its request. Once a PrepareCommit /
        PrepareAbort is on its way to the log, the markers after it must still
        be sent: cut off there, the id stayed prepared and answered
        CONCURRENT_TRANSACTIONS until its coordinator moved (Kafka finishes the
        write's callback whatever became of the client).
        """
        task = self._own(work, name, log_failure=False)  # the request hears a failure and logs it
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            # The request is gone: the task's end is now the only place its failure shows (a task
            # already done has the callback scheduled at once).
            task.add_done_callback(self._log_failure)
            raise

    def _lookup(self, transactional_id: str) -> tuple[int, TransactionMetadata]:
        error, found = self.txn_manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NO_ERROR:
            raise _Refused(error)
        if found is None:
            raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        return found.coordinator_epoch, found.transaction_metadata

    # -- InitProducerId ---------------------------------------------------------------------------
    async def handle_init_producer_id(self, transactional_id: str, txn_timeout_ms: int,
                                      expected_producer_id: int = NO_PRODUCER_ID,
                                      expected_producer_epoch: int = NO_PRODUCER_EPOCH) -> InitProducerIdResult:
        """A transactional producer starts (or, KIP-360, recovers): bump its epoch, fencing older instances.

        An ongoing transaction of the id is aborted first (its producer is fenced
        by an epoch bump written before the abort) and the client is told
        CONCURRENT_TRANSACTIONS, so its retry finds the id completed.
        """
        return await self._outliving_the_request(
            self._init_producer_id(transactional_id, txn_timeout_ms, expected_producer_id, expected_producer_epoch),
            f"init-producer-id-{transactional_id}")

    async def _init_producer_id(self, transactional_id: str, txn_timeout_ms: int, expected_producer_id: int,
                                expected_producer_epoch: int) -> InitProducerIdResult:
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not self.txn_manager.validate_transaction_timeout_ms(txn_timeout_ms):
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        expected = (expected_producer_id, expected_producer_epoch) if expected_producer_id != NO_PRODUCER_ID else None
        error, found = self.txn_manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NO_ERROR:
            return InitProducerIdResult(error)
        if found is None:
            producer_id = await self.generate_producer_id()
            created = TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_ID,
                                          NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, txn_timeout_ms, S.EMPTY, set(), -1,
                                          self.scheduler.now_ms(), TV_0)
            error, found = self.txn_manager.put_transaction_state_if_not_exists(created)
            if error != ErrorCode.NO_ERROR or found is None:
                return InitProducerIdResult(error if error != ErrorCode.NO_ERROR else ErrorCode.NOT_COORDINATOR)
        coordinator_epoch, m = found.coordinator_epoch, found.transaction_metadata
        try:
            transit = await self._prepare_init_producer_id_transit(m, txn_timeout_ms, expected)
        except _Refused as refused:
            return InitProducerIdResult(refused.error)
        if transit.txn_state == S.PREPARE_EPOCH_FENCE:
            # Abort the fenced instance's transaction; this epoch is never handed out, the retry bumps again.
            error = await self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                                TransactionResult.ABORT, is_from_client=False)
            return InitProducerIdResult(error if error != ErrorCode.NO_ERROR else ErrorCode.CONCURRENT_TRANSACTIONS)
        error = await self._append(transactional_id, coordinator_epoch, transit)
        if error != ErrorCode.NO_ERROR:
            return InitProducerIdResult(error)
        log.info("%s initialized %s with producer id %d and epoch %d", self._prefix(), transactional_id,
                 transit.producer_id, transit.producer_epoch)
        return InitProducerIdResult(ErrorCode.NO_ERROR, transit.producer_id, transit.producer_epoch)

    async def _prepare_init_producer_id_transit(self, m: TransactionMetadata, txn_timeout_ms: int,
                                                expected: tuple[int, int] | None) -> TxnTransitMetadata:
        if m.pending_transition_in_progress:
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)  # an earlier InitProducerId or EndTxn is being written
        if expected is not None and not _is_valid_producer_id(m, expected):
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        if m.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)  # the markers are being written: retry later
        if m.state == S.ONGOING:
            return m.prepare_fence_producer_epoch()
        if m.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            log.error("%s InitProducerId for %s found it in state %s: this should not happen", self._prefix(),
                      m.transactional_id, m.state.state_name)
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        expected_epoch = None if expected is None else expected[1]
        try:
            if m.is_producer_epoch_exhausted() and (expected_epoch is None or expected_epoch == m.producer_epoch):
                new_producer_id = await self.generate_producer_id()
                if m.pending_transition_in_progress:  # another request got in while the id was generated
                    raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
                return m.prepare_producer_id_rotation(new_producer_id, txn_timeout_ms, self.scheduler.now_ms(),
                                                      expected is not None)
            return m.prepare_increment_producer_epoch(txn_timeout_ms, expected_epoch, self.scheduler.now_ms())
        except ProducerFencedError as exc:
            raise _Refused(ErrorCode.PRODUCER_FENCED) from exc

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------------
    async def handle_add_partitions_to_transaction(self, transactional_id: str, producer_id: int,
                                                   producer_epoch: int, partitions: set[TopicPartition],
                                                   client_transaction_version: int = TV_0) -> ErrorCode:
        """Record partitions as part of the producer's ongoing transaction (starting it, if none is).
        ``client_transaction_version`` TV_2: an implicit add by a partition leader (KIP-890 part 2)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        try:
            coordinator_epoch, m = self._lookup(transactional_id)
            if m.producer_id != producer_id:
                raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            if m.producer_epoch != producer_epoch:
                raise _Refused(ErrorCode.PRODUCER_FENCED)
            if m.pending_transition_in_progress or m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
            if m.state == S.ONGOING and partitions <= m.topic_partitions:
                return ErrorCode.NO_ERROR  # nothing new: no need to write
            transit = m.prepare_add_partitions(partitions, self.scheduler.now_ms(), client_transaction_version)
        except _Refused as refused:
            return refused.error
        return await self._append(transactional_id, coordinator_epoch, transit)

    def verify_partitions_in_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                         partitions: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1's verify-only check (AddPartitionsToTxn v4+): each partition is in this
        producer's ongoing transaction. As Kafka's, a pending transition is not checked: the
        partition leader's verification guard settles a race with a marker; a partition not in
        the transaction answers TRANSACTION_ABORTABLE."""
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST)
        try:
            _, m = self._lookup(transactional_id)
            if m.producer_id != producer_id:
                raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            if m.producer_epoch != producer_epoch:
                raise _Refused(ErrorCode.PRODUCER_FENCED)
            if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        except _Refused as refused:
            return dict.fromkeys(partitions, refused.error)
        return {tp: ErrorCode.NO_ERROR if tp in m.topic_partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in partitions}

    async def handle_add_offsets_to_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                                group_id: str) -> ErrorCode:
        """The group's __consumer_offsets partition joins the transaction, so the commit marker reaches it."""
        partition = (GROUP_METADATA_TOPIC_NAME, self.offsets_partition_for(group_id))
        return await self.handle_add_partitions_to_transaction(transactional_id, producer_id, producer_epoch,
                                                               {partition})

    # -- EndTxn -----------------------------------------------------------------------------------
    async def handle_end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                     result: TransactionResult) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        return await self._outliving_the_request(
            self._end_transaction(transactional_id, producer_id, producer_epoch, result, is_from_client=True),
            f"end-txn-{transactional_id}")

    async def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               result: TransactionResult, is_from_client: bool) -> ErrorCode:
        """Write PrepareCommit / PrepareAbort, then hand the markers to the channel manager.

        ``is_from_client`` False: the coordinator itself aborts (a fence by
        InitProducerId, or a timeout) with the epoch it just bumped.
        """
        is_epoch_fence = False
        coordinator_epoch, m = -1, None
        try:
            coordinator_epoch, m = self._lookup(transactional_id)
            if m.producer_id != producer_id:
                raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            # A client must use the current epoch; the coordinator's own abort may carry a newer one.
            if (is_from_client and producer_epoch != m.producer_epoch) or producer_epoch < m.producer_epoch:
                raise _Refused(ErrorCode.PRODUCER_FENCED)
            # Only the coordinator's own abort may continue a fence it prepared (a client's EndTxn racing
            # it waits: Kafka would fail that request with an internal error).
            if m.pending_transition_in_progress and (is_from_client or m.pending_state != S.PREPARE_EPOCH_FENCE):
                raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
            transit = self._prepare_end(m, result)
        except _Refused as refused:
            if not is_from_client:
                self._clear_unwritten_fence(transactional_id)
            return refused.error
        except _FenceAbort:
            assert m is not None
            # The fence's bumped epoch goes into the PrepareAbort record itself (Kafka does the same).
            is_epoch_fence = True
            m.pending_state = None
            m.producer_epoch, m.last_producer_epoch = producer_epoch, NO_PRODUCER_EPOCH
            transit = m.prepare_abort_or_commit(S.PREPARE_ABORT, m.client_transaction_version, NO_PRODUCER_ID,
                                                self.scheduler.now_ms(), no_partition_added=False)
        error = await self._append(transactional_id, coordinator_epoch, transit)
        if error != ErrorCode.NO_ERROR:
            if is_epoch_fence:
                # The bumped epoch may not be in the log: the next fence must reuse it, not bump past it.
                found = self.txn_manager.get_transaction_state(transactional_id)[1]
                if found is not None and found.coordinator_epoch == coordinator_epoch:
                    found.transaction_metadata.has_failed_epoch_fence = True
            log.info("%s writing %s for %s failed: %s", self._prefix(), transit.txn_state.state_name,
                     transactional_id, error.name)
            return error
        return self._send_markers(transactional_id, coordinator_epoch, producer_id, transit.producer_epoch, result)

    def _prepare_end(self, m: TransactionMetadata, result: TransactionResult) -> TxnTransitMetadata:
        commit = result == TransactionResult.COMMIT
        if m.state == S.ONGOING:
            if m.pending_state == S.PREPARE_EPOCH_FENCE:
                raise _FenceAbort
            next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            return m.prepare_abort_or_commit(next_state, m.client_transaction_version, NO_PRODUCER_ID,
                                             self.scheduler.now_ms(), no_partition_added=False)
        if m.pending_state == S.PREPARE_EPOCH_FENCE:
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)  # nothing ongoing to abort any more
        if (m.state == S.COMPLETE_COMMIT and commit) or (m.state == S.COMPLETE_ABORT and not commit):
            raise _Refused(ErrorCode.NO_ERROR)  # a retry of an EndTxn that succeeded
        if (m.state == S.PREPARE_COMMIT and commit) or (m.state == S.PREPARE_ABORT and not commit):
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)  # its markers are still being written
        log.debug("%s %s of %s in state %s is invalid", self._prefix(), result.name, m.transactional_id,
                  m.state.state_name)
        raise _Refused(ErrorCode.INVALID_TXN_STATE)

    # -- EndTxn v5: transaction version 2 (KIP-890 part 2) -----------------------------------------------
    async def handle_end_transaction_with_epoch_bump(self, transactional_id: str, producer_id: int,
                                                     producer_epoch: int, result: TransactionResult) -> EndTxnResult:
        """EndTxn from a transaction version 2 client: every commit or abort bumps the producer epoch.

        The markers carry the bumped epoch, so a write of the transaction that
        arrives late is fenced by the partition (its epoch is older). The client
        is answered the epoch it continues with; when the epoch is exhausted the
        coordinator moves the producer to a fresh id at epoch 0. A retry carries
        the epoch before the bump: answered like the first call once the
        transaction completed. An abort is allowed with nothing ongoing (the
        client may not know whether its transaction started).
        """
        if not transactional_id:
            return EndTxnResult(ErrorCode.INVALID_REQUEST)
        return await self._outliving_the_request(
            self._end_transaction_with_epoch_bump(transactional_id, producer_id, producer_epoch, result),
            f"end-txn-{transactional_id}")

    async def _end_transaction_with_epoch_bump(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                               result: TransactionResult) -> EndTxnResult:
        try:
            coordinator_epoch, m = self._lookup(transactional_id)
            prepared = self._prepare_end_v2(m, producer_id, producer_epoch, result)
            if isinstance(prepared, EndTxnResult):
                return prepared
            next_state, no_partition_added = prepared
            next_producer_id = NO_PRODUCER_ID
            if m.is_producer_epoch_exhausted():
                next_producer_id = await self.generate_producer_id()
                if m.pending_transition_in_progress:  # another request got in while the id was generated
                    raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
            transit = m.prepare_abort_or_commit(next_state, TV_2, next_producer_id, self.scheduler.now_ms(),
                                                no_partition_added)
        except _Refused as refused:
            return EndTxnResult(refused.error)
        error = await self._append(transactional_id, coordinator_epoch, transit)
        if error == ErrorCode.NO_ERROR:
            error = self._send_markers(transactional_id, coordinator_epoch, producer_id, transit.producer_epoch,
                                       result)
        if error != ErrorCode.NO_ERROR:
            return EndTxnResult(error)
        if transit.next_producer_id != NO_PRODUCER_ID:
            # Epoch overflow: the completion moves the producer to the new id at epoch 0; that is what it uses next.
            return EndTxnResult(ErrorCode.NO_ERROR, transit.next_producer_id, 0)
        return EndTxnResult(ErrorCode.NO_ERROR, transit.producer_id, transit.producer_epoch)

    def _prepare_end_v2(self, m: TransactionMetadata, producer_id: int, producer_epoch: int,
                        result: TransactionResult) -> EndTxnResult | tuple[TransactionState, bool]:
        """Kafka's TV2 checks: the next state and whether no partition was added, or the answer at once."""
        commit = result == TransactionResult.COMMIT
        # A retry of an EndTxn that bumped the epoch (or moved to a new producer id on overflow).
        retry_on_overflow = (m.prev_producer_id == producer_id and producer_epoch == SHORT_MAX - 1
                             and m.producer_epoch == 0)
        retry_on_epoch_bump = m.producer_epoch == producer_epoch + 1
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_epoch_bump
        elif m.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = retry_on_epoch_bump or retry_on_overflow or producer_epoch == m.producer_epoch
        else:
            valid_epoch = producer_epoch == m.producer_epoch
        if m.producer_id != producer_id and not retry_on_overflow:
            raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        if m.pending_transition_in_progress:
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)  # a fence or another EndTxn is being written
        is_retry = retry_on_epoch_bump or retry_on_overflow
        completed = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if m.state == S.ONGOING:
            return (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT), False
        if m.state == completed and is_retry:
            return EndTxnResult(ErrorCode.NO_ERROR, m.producer_id, m.producer_epoch)  # it succeeded before
        if not commit and not is_retry and m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return S.PREPARE_ABORT, True  # an abort with nothing ongoing still bumps the epoch
        if (m.state == S.PREPARE_COMMIT and commit) or (m.state == S.PREPARE_ABORT and not commit):
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)  # its markers are still being written
        log.debug("%s %s of %s in state %s is invalid", self._prefix(), result.name, m.transactional_id,
                  m.state.state_name)
        raise _Refused(ErrorCode.INVALID_TXN_STATE)

    def _clear_unwritten_fence(self, transactional_id: str) -> None:
        found = self.txn_manager.get_transaction_state(transactional_id)[1]
        if found is not None and found.transaction_metadata.pending_state == S.PREPARE_EPOCH_FENCE:
            found.transaction_metadata.pending_state = None

    def _send_markers(self, transactional_id: str, coordinator_epoch: int, producer_id: int, producer_epoch: int,
                      result: TransactionResult) -> ErrorCode:
        """The prepare record is in: check nothing moved meanwhile, then start the markers (Kafka's
        sendTxnMarkersCallback)."""
        error, found = self.txn_manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NO_ERROR:
            return error
        if found is None or found.coordinator_epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        m = found.transaction_metadata
        if m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if m.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        expected = S.PREPARE_COMMIT if result == TransactionResult.COMMIT else S.PREPARE_ABORT
        if m.state != expected:
            log.error("%s %s is in %s after writing %s", self._prefix(), transactional_id, m.state.state_name,
                      expected.state_name)
            return ErrorCode.INVALID_TXN_STATE
        complete = m.prepare_complete(self.scheduler.now_ms())
        self.marker_channel.add_txn_markers_to_send(coordinator_epoch, result, m, complete)
        return ErrorCode.NO_ERROR

    # -- DescribeTransactions / ListTransactions ------------------------------------------------------
    def handle_describe_transactions(self, transactional_id: str) -> DescribedTransaction:
        """What this coordinator knows of ``transactional_id`` (an id being expired is not found)."""
        if self._shutting_down:
            return DescribedTransaction(transactional_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not transactional_id:
            return DescribedTransaction(transactional_id, ErrorCode.INVALID_REQUEST)
        error, found = self.txn_manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NO_ERROR:
            return DescribedTransaction(transactional_id, error)
        if found is None or found.transaction_metadata.state == S.DEAD:
            return DescribedTransaction(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        m = found.transaction_metadata
        return DescribedTransaction(transactional_id, ErrorCode.NO_ERROR, m.state.state_name, m.producer_id,
                                    m.producer_epoch, m.txn_timeout_ms, m.txn_start_timestamp,
                                    tuple(sorted(m.topic_partitions)))

    def handle_list_transactions(self, filter_producer_ids: Iterable[int], filter_state_names: Iterable[str],
                                 filter_duration_ms: int = -1, filter_transactional_id_pattern: str | None = None
                                 ) -> ListTransactionsResult:
        if self._shutting_down:
            return ListTransactionsResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return self.txn_manager.list_transaction_states(filter_producer_ids, filter_state_names, filter_duration_ms,
                                                        filter_transactional_id_pattern)

    # -- timeouts -------------------------------------------------------------------------------
    def abort_timed_out_transactions(self) -> None:
        """Abort every transaction open past its timeout, fencing its producer with a bumped epoch first."""
        for timed_out in self.txn_manager.timed_out_transactions():
            found = self.txn_manager.get_transaction_state(timed_out.transactional_id)[1]
            if found is None:
                continue
            m = found.transaction_metadata
            if m.producer_id != timed_out.producer_id or m.pending_transition_in_progress:
                continue  # it moved on meanwhile
            try:
                fence = m.prepare_fence_producer_epoch()
            except IllegalTransitionError:
                log.exception("%s cannot fence timed-out %s", self._prefix(), m.transactional_id)
                continue
            log.info("%s aborting transaction %s (producer id %d) open longer than its timeout of %d ms",
                     self._prefix(), m.transactional_id, m.producer_id, m.txn_timeout_ms)
            self._spawn_abort(m.transactional_id, fence)

    def _spawn_abort(self, transactional_id: str, fence: TxnTransitMetadata) -> None:
        async def abort() -> None:
            error = await self._end_transaction(transactional_id, fence.producer_id, fence.producer_epoch,
                                                TransactionResult.ABORT, is_from_client=False)
            if error != ErrorCode.NO_ERROR:
                log.info("%s aborting timed-out %s failed: %s (retried at the next check)", self._prefix(),
                         transactional_id, error.name)
        _ = self._own(abort(), f"abort-timed-out-{transactional_id}")  # owned: cancelled at shutdown

    def _schedule_abort_check(self) -> None:
        if self._shutting_down:
            return

        def run() -> None:
            try:
                self.abort_timed_out_transactions()
            finally:
                self._schedule_abort_check()

        self._abort_timer = self.scheduler.schedule(self.config.abort_timed_out_transactions_interval_ms, run)

    # -- lifecycle --------------------------------------------------------------------------------
    def startup(self) -> None:
        self._schedule_abort_check()
        log.info("%s started", self._prefix())

    def on_resignation(self, partition: int) -> None:
        self.marker_channel.remove_markers_for_txn_topic_partition(partition)
        self.txn_manager.remove_transactions_for_txn_topic_partition(partition, None)

    async def shutdown(self) -> None:
        self._shutting_down = True
        if self._abort_timer is not None:
            self._abort_timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.marker_channel.shutdown()
        self.scheduler.shutdown()  # the marker retries' timers, when the channel shares this scheduler
        await self.txn_manager.shutdown()
        log.info("%s shutdown complete", self._prefix())


class _FenceAbort(Exception):
    """EndTxn(ABORT) continuing a PrepareEpochFence: the fence's epoch goes into the PrepareAbort."""


def _is_valid_producer_id(m: TransactionMetadata, expected: tuple[int, int]) -> bool:
    """KIP-360: a producer recovering with its id and epoch is fenced unless the id is still its own.

    Allowed: the id was just created (epoch -1, a producer migrating to a
    transactional id); the id is the current one (the epoch is checked by the
    bump); or it is the previous one with an exhausted epoch (a retry of a
    rotation whose answer was lost).
    """
    producer_id, producer_epoch = expected
    return (m.producer_epoch == NO_PRODUCER_EPOCH or producer_id == m.producer_id
            or (producer_id == m.prev_producer_id and is_epoch_exhausted(producer_epoch)))
