"""TransactionStateManager: the transactional ids this broker coordinates, persisted in ``__transaction_state``.

A transactional id lives in partition ``partition_for(id)`` of
``__transaction_state``; the broker leading that partition is its transaction
coordinator. Each owned partition has a cache entry (the coordinator epoch it
was loaded at, and the metadata of its ids), rebuilt on election by reading
the partition from its start: later records win, a tombstone removes the id.
A partition being loaded answers COORDINATOR_LOAD_IN_PROGRESS; one not owned,
NOT_COORDINATOR.

Every transition is appended (``acks=-1``, through ``CoordinatorLog``) before
it is applied: ``append_transaction_to_log`` completes the prepared transition
only if the append succeeded and the partition is still owned at the same
coordinator epoch; otherwise the pending state is dropped and the metadata
stays as the log has it. Transactions found in PrepareCommit/PrepareAbort on
load are handed to the coordinator (``send_txn_markers``) to finish.

Idle transactional ids (Empty, CompleteCommit, CompleteAbort and not updated
for ``transactional.id.expiration.ms``) are removed with tombstones every
``transaction.remove.expired.transaction.cleanup.interval.ms``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from coordinator.common.coordinator_log import APPEND_ERRORS, CoordinatorLog, KeyValues
from coordinator.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from coordinator.common.partitioner import partition_for
from coordinator.common.scheduler import Scheduler, Timer
from coordinator.transaction.transaction_log import UnknownVersion, key_to_bytes, read, value_to_bytes
from coordinator.transaction.transaction_metadata import (
    TV_2,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from protocol.errors import CorruptRecordError, ErrorCode

log = logging.getLogger(__name__)

Records = Iterator[tuple[int, bytes | None, bytes | None]]

#: Record overhead in a v2 batch beyond the key (attributes, varints, no headers): generous.
_TOMBSTONE_OVERHEAD = 24
_BATCH_OVERHEAD = 61


def transaction_topic_configs(min_isr: int, segment_bytes: int) -> dict[str, str]:
    """The configs ``__transaction_state`` is created with (Kafka's transactionTopicConfigs)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "min.insync.replicas": str(min_isr),
        "segment.bytes": str(segment_bytes),
    }


class TransactionResult(enum.Enum):
    ABORT = False
    COMMIT = True


@dataclass(frozen=True, slots=True)
class TransactionStateManagerConfig:
    transactional_id_expiration_ms: int = 604_800_000
    transaction_max_timeout_ms: int = 900_000
    remove_expired_transactional_ids_interval_ms: int = 3_600_000
    #: The transaction.version feature level: it decides the value version written (Kafka 4 default: 2).
    transaction_version_level: int = TV_2
    #: The largest tombstone batch written at once (the topic's max.message.bytes).
    max_batch_bytes: int = 1_048_588


@dataclass(slots=True)
class TxnMetadataCacheEntry:
    coordinator_epoch: int
    metadata_per_transactional_id: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CoordinatorEpochAndTxnMetadata:
    coordinator_epoch: int
    transaction_metadata: TransactionMetadata


@dataclass(frozen=True, slots=True)
class TransactionalIdAndProducerIdEpoch:
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class PendingCompletion:
    """A transaction found prepared on load: its markers must be (re)written, then it completes."""

    transactional_id: str
    coordinator_epoch: int
    result: TransactionResult
    txn_metadata: TransactionMetadata
    transit_metadata: TxnTransitMetadata


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state_name: str


@dataclass(slots=True)
class ListTransactionsResult:
    error_code: ErrorCode
    unknown_state_filters: list[str] = field(default_factory=list)
    transaction_states: list[ListedTransaction] = field(default_factory=list)


#: (coordinator epoch, result, metadata, the Complete* transition to apply once the markers are written).
SendTxnMarkersCallback = Callable[[int, TransactionResult, TransactionMetadata, TxnTransitMetadata], None]
StateLookup = tuple[ErrorCode, CoordinatorEpochAndTxnMetadata | None]


class TransactionStateManager:
    def __init__(self, broker_id: int, log_: CoordinatorLog, scheduler: Scheduler,
                 config: TransactionStateManagerConfig | None = None) -> None:
        self.broker_id = broker_id
        self.coordinator_log = log_
        self.scheduler = scheduler
        self.config = config or TransactionStateManagerConfig()
        #: partition → the coordinator epoch it is being loaded at.
        self.loading_partitions: dict[int, int] = {}
        self.transaction_metadata_cache: dict[int, TxnMetadataCacheEntry] = {}
        #: Set by the transaction coordinator: finishes transactions found prepared on load.
        self.send_txn_markers: SendTxnMarkersCallback | None = None
        self._load_tasks: set[asyncio.Task[None]] = set()
        self._expiration_timer: Timer | None = None
        self._shutting_down = False

    def _prefix(self) -> str:
        return f"[Transaction State Manager {self.broker_id}]:"

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.coordinator_log.num_partitions)

    # -- the cache --------------------------------------------------------------------------
    def get_transaction_state(self, transactional_id: str) -> StateLookup:
        return self._get_and_maybe_add(transactional_id, None)

    def put_transaction_state_if_not_exists(self, metadata: TransactionMetadata) -> StateLookup:
        """The cached metadata of the id, after adding ``metadata`` if it had none."""
        return self._get_and_maybe_add(metadata.transactional_id, metadata)

    def _get_and_maybe_add(self, transactional_id: str, created: TransactionMetadata | None) -> StateLookup:
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        entry = self.transaction_metadata_cache.get(partition)
        if entry is None:
            return ErrorCode.NOT_COORDINATOR, None
        metadata = entry.metadata_per_transactional_id.get(transactional_id)
        if metadata is None and created is not None:
            metadata = entry.metadata_per_transactional_id.setdefault(transactional_id, created)
        if metadata is None:
            return ErrorCode.NO_ERROR, None
        return ErrorCode.NO_ERROR, CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, metadata)

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms

    def timed_out_transactions(self) -> list[TransactionalIdAndProducerIdEpoch]:
        """Ongoing transactions open longer than their timeout (best effort: the abort re-checks)."""
        now = self.scheduler.now_ms()
        return [TransactionalIdAndProducerIdEpoch(tid, m.producer_id, m.producer_epoch)
                for entry in self.transaction_metadata_cache.values()
                for tid, m in entry.metadata_per_transactional_id.items()
                if not m.pending_transition_in_progress and m.state == TransactionState.ONGOING
                and m.txn_start_timestamp + m.txn_timeout_ms < now]

    def list_transaction_states(self, filter_producer_ids: Iterable[int], filter_state_names: Iterable[str],
                                filter_duration_ms: int = -1, filter_transactional_id_pattern: str | None = None
                                ) -> ListTransactionsResult:
        """ListTransactions: every id of the owned partitions matching all the filters given.

        The transactional id pattern (KIP-1152) must match the whole id, as
        Java's ``Matcher.matches``; an empty one filters nothing.
        """
        if self.loading_partitions:
            return ListTransactionsResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        try:
            pattern = re.compile(filter_transactional_id_pattern) if filter_transactional_id_pattern else None
        except re.error:
            return ListTransactionsResult(ErrorCode.INVALID_REGULAR_EXPRESSION)
        result = ListTransactionsResult(ErrorCode.NO_ERROR)
        producer_ids = set(filter_producer_ids)
        state_names = list(filter_state_names)
        states: set[TransactionState] = set()
        for name in state_names:
            state = TransactionState.from_name(name)
            if state is None:
                result.unknown_state_filters.append(name)
            else:
                states.add(state)
        now = self.scheduler.now_ms()

        def include(m: TransactionMetadata) -> bool:
            if m.state == TransactionState.DEAD:
                return False  # being expired: already gone as far as clients are concerned
            if producer_ids and m.producer_id not in producer_ids:
                return False
            if state_names and m.state not in states:
                return False
            if pattern is not None and pattern.fullmatch(m.transactional_id) is None:
                return False
            # Only transactions running longer than the filter (KIP-994).
            return filter_duration_ms < 0 or now - m.txn_start_timestamp > filter_duration_ms

        for entry in self.transaction_metadata_cache.values():
            for m in entry.metadata_per_transactional_id.values():
                if include(m):
                    result.transaction_states.append(
                        ListedTransaction(m.transactional_id, m.producer_id, m.state.state_name))
        return result

    # -- loading and unloading ------------------------------------------------------------------
    def add_loading_partition(self, partition: int, coordinator_epoch: int) -> None:
        self.loading_partitions[partition] = coordinator_epoch

    def load_transactions_for_txn_topic_partition(self, partition: int, coordinator_epoch: int) -> None:
        """This broker now leads ``partition``: read it off the event loop, then rebuild its cache on it."""
        self.add_loading_partition(partition, coordinator_epoch)
        if self.coordinator_log.log_end_offset(partition) == 0:
            self.complete_loading(partition, coordinator_epoch, iter(()))  # nothing to read: owned at once
            return

        async def load() -> None:
            records = await asyncio.to_thread(self._read_partition, partition)
            self.complete_loading(partition, coordinator_epoch, iter(records))

        task = asyncio.get_running_loop().create_task(load(), name=f"load-txns-for-partition-{partition}")
        self._load_tasks.add(task)
        task.add_done_callback(self._load_done)

    def load_partition(self, partition: int, coordinator_epoch: int) -> list[PendingCompletion]:
        """Synchronous load (tests; the broker loads in the background)."""
        self.add_loading_partition(partition, coordinator_epoch)
        return self.complete_loading(partition, coordinator_epoch, iter(self._read_partition(partition)))

    def _read_partition(self, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
        return list(self.coordinator_log.read_records(partition))

    def _load_done(self, task: asyncio.Task[None]) -> None:
        self._load_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s loading %s failed", self._prefix(), TRANSACTION_STATE_TOPIC_NAME, exc_info=task.exception())

    def read_transactions(self, partition: int, records: Records) -> dict[str, TransactionMetadata]:
        """The latest metadata of every id in ``records`` (in offset order); tombstones remove ids.

        A record of a version this broker does not know is skipped, as Kafka
        does; a malformed one raises CorruptRecordError: half a partition's
        transactions must never be acted on as if they were all of them.
        """
        loaded: dict[str, TransactionMetadata] = {}
        for offset, key, value in records:
            if key is None:
                raise CorruptRecordError(f"record at offset {offset} of {TRANSACTION_STATE_TOPIC_NAME}-{partition} "
                                         "has no key")
            try:
                transactional_id, metadata = read(key, value)
            except UnknownVersion as exc:
                log.warning("%s %s at offset %d of %s-%d: ignoring it (a leftover of an aborted upgrade?)",
                            self._prefix(), exc, offset, TRANSACTION_STATE_TOPIC_NAME, partition)
                continue
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"offset {offset} of {TRANSACTION_STATE_TOPIC_NAME}-{partition}: "
                                         f"{exc}") from exc
            if metadata is None:
                loaded.pop(transactional_id, None)
            else:
                loaded[transactional_id] = metadata
        return loaded

    def complete_loading(self, partition: int, coordinator_epoch: int, records: Records) -> list[PendingCompletion]:
        """Install the partition's transactions; hand prepared ones to ``send_txn_markers``.

        Nothing is installed if leadership moved on meanwhile (the load is for
        another epoch) or a record is corrupt (the partition is then not
        owned: its ids answer NOT_COORDINATOR, and the error is raised).
        """
        if self.loading_partitions.get(partition) != coordinator_epoch or self._shutting_down:
            return []
        try:
            loaded = self.read_transactions(partition, records)
        except CorruptRecordError:
            del self.loading_partitions[partition]
            log.error("%s cannot load %s-%d: it holds a corrupt record", self._prefix(),
                      TRANSACTION_STATE_TOPIC_NAME, partition)
            raise
        previous = self.transaction_metadata_cache.get(partition)
        if previous is not None:
            log.warning("%s unloaded %d transaction(s) of %s-%d (epoch %d) while loading it at epoch %d",
                        self._prefix(), len(previous.metadata_per_transactional_id), TRANSACTION_STATE_TOPIC_NAME,
                        partition, previous.coordinator_epoch, coordinator_epoch)
        self.transaction_metadata_cache[partition] = TxnMetadataCacheEntry(coordinator_epoch, loaded)
        pending: list[PendingCompletion] = []
        if self.send_txn_markers is not None:
            now = self.scheduler.now_ms()
            for transactional_id, metadata in loaded.items():
                if metadata.state == TransactionState.PREPARE_COMMIT:
                    result = TransactionResult.COMMIT
                elif metadata.state == TransactionState.PREPARE_ABORT:
                    result = TransactionResult.ABORT
                else:
                    continue
                pending.append(PendingCompletion(transactional_id, coordinator_epoch, result, metadata,
                                                 metadata.prepare_complete(now)))
        # Out of loading first: the Complete* appends the markers lead to must not see it loading.
        del self.loading_partitions[partition]
        log.info("%s loaded %d transaction(s) from %s-%d at coordinator epoch %d", self._prefix(), len(loaded),
                 TRANSACTION_STATE_TOPIC_NAME, partition, coordinator_epoch)
        if self.send_txn_markers is not None:
            for p in pending:
                self.send_txn_markers(p.coordinator_epoch, p.result, p.txn_metadata, p.transit_metadata)
        return pending

    def remove_transactions_for_txn_topic_partition(self, partition: int, coordinator_epoch: int | None = None
                                                    ) -> None:
        """Leadership of ``partition`` left (or it was deleted): forget its transactions."""
        if coordinator_epoch is None or self.loading_partitions.get(partition) == coordinator_epoch:
            self.loading_partitions.pop(partition, None)
        entry = self.transaction_metadata_cache.pop(partition, None)
        log.info("%s unloaded %s transaction(s) of %s-%d", self._prefix(),
                 0 if entry is None else len(entry.metadata_per_transactional_id), TRANSACTION_STATE_TOPIC_NAME,
                 partition)

    # -- writing ------------------------------------------------------------------------------
    def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                  new_metadata: TxnTransitMetadata, callback: Callable[[ErrorCode], None],
                                  retry_on_error: Callable[[ErrorCode], bool] = lambda _e: False) -> None:
        """Write a prepared transition; apply it (``complete_transition_to``) only once it is in the log."""
        error, found = self.get_transaction_state(transactional_id)
        if error != ErrorCode.NO_ERROR:
            callback(error)
            return
        if found is None or found.coordinator_epoch != coordinator_epoch:
            # Removed, or the partition moved away and back: the client must find its coordinator again.
            callback(ErrorCode.NOT_COORDINATOR)
            return
        key = key_to_bytes(transactional_id)
        value = value_to_bytes(new_metadata, self.config.transaction_version_level)

        def appended(append_error: ErrorCode, _offset: int | None) -> None:
            callback(self._on_appended(transactional_id, coordinator_epoch, new_metadata, append_error,
                                       retry_on_error))

        self.coordinator_log.append(self.partition_for(transactional_id), [(key, value)], self.scheduler.now_ms(),
                                    appended)

    def _on_appended(self, transactional_id: str, coordinator_epoch: int, new_metadata: TxnTransitMetadata,
                     append_error: ErrorCode, retry_on_error: Callable[[ErrorCode], bool]) -> ErrorCode:
        error = APPEND_ERRORS.get(append_error, append_error)
        lookup_error, found = self.get_transaction_state(transactional_id)
        if error == ErrorCode.NO_ERROR:
            if lookup_error != ErrorCode.NO_ERROR:
                log.info("%s %s was written, but its metadata is not accessible (%s): not applying %s",
                         self._prefix(), transactional_id, lookup_error.name, new_metadata)
                return lookup_error
            if found is None or found.coordinator_epoch != coordinator_epoch:
                log.info("%s the coordinator of %s changed while %s was written: not applying it",
                         self._prefix(), transactional_id, new_metadata)
                return ErrorCode.NOT_COORDINATOR
            found.transaction_metadata.complete_transition_to(new_metadata)
            return ErrorCode.NO_ERROR
        log.info("%s writing %s for %s failed: %s", self._prefix(), new_metadata, transactional_id, error.name)
        if found is not None and found.coordinator_epoch == coordinator_epoch and not retry_on_error(error):
            # Nothing reached the log: the transaction stays where the log has it.
            found.transaction_metadata.pending_state = None
        return error

    # -- transactional id expiration ----------------------------------------------------------------
    def _should_expire(self, m: TransactionMetadata, now: int) -> bool:
        return (m.state.is_expiration_allowed and m.pending_state is None
                and m.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms)

    def remove_expired_transactional_ids(self, callback: Callable[[int], None] | None = None) -> None:
        """Tombstone every idle id of the owned partitions; drop each from the cache once its tombstone is in.

        ``callback`` gets the number of ids removed once every append has finished.
        """
        now = self.scheduler.now_ms()
        batches: list[tuple[int, int, list[tuple[str, TxnTransitMetadata]]]] = []
        for partition, entry in self.transaction_metadata_cache.items():
            batch: list[tuple[str, TxnTransitMetadata]] = []
            size = _BATCH_OVERHEAD
            for tid, m in entry.metadata_per_transactional_id.items():
                if not self._should_expire(m, now):
                    continue
                record_size = len(tid.encode("utf-8")) + _TOMBSTONE_OVERHEAD
                if batch and size + record_size > self.config.max_batch_bytes:
                    batches.append((partition, entry.coordinator_epoch, batch))
                    batch, size = [], _BATCH_OVERHEAD
                batch.append((tid, m.prepare_dead()))
                size += record_size
            if batch:
                batches.append((partition, entry.coordinator_epoch, batch))
        pending = len(batches)
        removed = 0
        if pending == 0:
            if callback is not None:
                callback(0)
            return

        def written(partition: int, coordinator_epoch: int, expired: list[tuple[str, TxnTransitMetadata]],
                    error: ErrorCode) -> None:
            nonlocal pending, removed
            removed += self._remove_from_cache(partition, coordinator_epoch, expired, error)
            pending -= 1
            if pending == 0 and callback is not None:
                callback(removed)

        def on_append(partition: int, coordinator_epoch: int, expired: list[tuple[str, TxnTransitMetadata]]
                      ) -> Callable[[ErrorCode, int | None], None]:
            return lambda error, _offset: written(partition, coordinator_epoch, expired, error)

        for partition, coordinator_epoch, expired in batches:
            records: KeyValues = [(key_to_bytes(tid), None) for tid, _ in expired]
            self.coordinator_log.append(partition, records, now, on_append(partition, coordinator_epoch, expired))

    def _remove_from_cache(self, partition: int, coordinator_epoch: int,
                           expired: list[tuple[str, TxnTransitMetadata]], error: ErrorCode) -> int:
        entry = self.transaction_metadata_cache.get(partition)
        if entry is None:
            return 0
        removed = 0
        for tid, transit in expired:
            m = entry.metadata_per_transactional_id.get(tid)
            if m is None:
                continue
            if (error == ErrorCode.NO_ERROR and entry.coordinator_epoch == coordinator_epoch
                    and m.pending_state == TransactionState.DEAD and m.producer_epoch == transit.producer_epoch):
                del entry.metadata_per_transactional_id[tid]
                removed += 1
            else:
                log.warning("%s failed to remove expired transactional id %s from the cache: tombstone append "
                            "error %s, pending state %s, producer epoch %d (expected %d), coordinator epoch %d "
                            "(expected %d)", self._prefix(), tid, error.name, m.pending_state, m.producer_epoch,
                            transit.producer_epoch, entry.coordinator_epoch, coordinator_epoch)
                m.pending_state = None
        return removed

    def enable_transactional_id_expiration(self) -> None:
        def removed(n: int) -> None:
            if n:
                log.info("%s removed %d expired transactional id(s)", self._prefix(), n)

        def run() -> None:
            try:
                self.remove_expired_transactional_ids(removed)
            finally:
                self._schedule_expiration(run)

        self._schedule_expiration(run)

    def _schedule_expiration(self, run: Callable[[], None]) -> None:
        if not self._shutting_down:
            self._expiration_timer = self.scheduler.schedule(
                self.config.remove_expired_transactional_ids_interval_ms, run)

    # -- lifecycle ---------------------------------------------------------------------------------
    def startup(self, led_partitions: Mapping[int, int], enable_transactional_id_expiration: bool = True) -> None:
        """Load the partitions this broker leads (partition → coordinator epoch), in the background."""
        for partition, coordinator_epoch in led_partitions.items():
            self.load_transactions_for_txn_topic_partition(partition, coordinator_epoch)
        if enable_transactional_id_expiration:
            self.enable_transactional_id_expiration()
        log.info("%s started (loading %d partition(s) of %s)", self._prefix(), len(led_partitions),
                 TRANSACTION_STATE_TOPIC_NAME)

    async def shutdown(self) -> None:
        self._shutting_down = True
        if self._expiration_timer is not None:
            self._expiration_timer.cancel()
        for task in list(self._load_tasks):
            task.cancel()
        await asyncio.gather(*self._load_tasks, return_exceptions=True)
        self.loading_partitions.clear()
        self.transaction_metadata_cache.clear()
        self.scheduler.shutdown()
        log.info("%s shutdown complete", self._prefix())
