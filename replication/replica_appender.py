"""The leader's append path: Kafka's ReplicaManager.appendRecords, as a collaborator of
:class:`~replication.replica_manager.ReplicaManager`.

It decides where an append runs: on the event loop when it cannot block and the
append thread has nothing queued (no thread hand-off, and the socket server can
send the answers to every request of one read in one write), else on the append
thread, in arrival order. Every append wakes the fetches parked on its
partition; ``acks=-1`` waits in the produce purgatory for the high watermark. It
owns the transaction verification of transactional produces (KIP-890 part 1).
What an append answers per partition, and the error code each failure becomes,
is ``append_result``'s.

Threads: called on the event loop; ``_append_blocking`` runs on the append thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence

from protocol.errors import ErrorCode
from replication import txn_verification
from replication.append_result import APPEND_EXCEPTIONS, PartitionAppendResult, error_code_for
from replication.append_thread import AppendThread
from replication.broker_topic_stats import BrokerTopicStats
from replication.hosted_partitions import HostedPartitions
from replication.partition import Partition
from replication.purgatories import Purgatories
from replication.txn_verification import TransactionalProduce
from storage.errors import StorageError
from storage.log import now_ms
from storage.log_append import AppendOrigin
from storage.log_config import LogConfig

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Records = bytearray | memoryview

#: Errors whose batches count as BytesRejected (Kafka marks them where the log refuses the records).
REJECTED_RECORDS = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
                              ErrorCode.INVALID_RECORD})

#: Verification on, nothing verified: every append carries SENTINEL_GUARD (never mutated).
_UNVERIFIED = txn_verification.VerificationPlan()


class ReplicaAppender:
    def __init__(self, broker_id: int, hosted: HostedPartitions, append_thread: AppendThread,
                 purgatories: Purgatories, topic_stats: BrokerTopicStats | None = None) -> None:
        self.broker_id = broker_id
        self._hosted = hosted
        self._append_thread = append_thread
        self._purgatories = purgatories
        #: KIP-890 part 1; None: transactional produces are not verified (no coordinator wired).
        self.txn_verification: txn_verification.ProduceVerification | None = None
        #: What every leader append took in (read by the broker's metrics).
        self.topic_stats = topic_stats if topic_stats is not None else BrokerTopicStats()

    def append_records(
        self,
        entries: Sequence[tuple[str, int, Records]],
        required_acks: int,
        timeout_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transactional: TransactionalProduce | None = None,
    ) -> list[PartitionAppendResult] | Awaitable[list[PartitionAppendResult]]:
        """Append one batch per (topic, partition, batch) entry as leader; one result per entry, in order.

        Each batch was checked by the request's decoder (one v2 batch, header
        sane); its offsets are patched in place. With ``required_acks=-1`` the
        answer waits until the high watermark passes each append, at most
        ``timeout_ms``. Answers synchronously when every append could be made on
        the loop and is acknowledged; else returns an awaitable.

        ``transactional``: the request's transactional id. With transaction
        verification on (``set_transaction_verifier``), a transactional batch that
        does not continue a transaction open on its partition is appended only once
        the coordinator confirms it (``replication.txn_verification``).
        """
        verification = self.txn_verification
        # An implicit add (transaction version 2) is how the partition joins the transaction at all:
        # it is made even with verification switched off.
        implicit_add = transactional is not None and transactional.add_partitions
        if verification is None or origin == AppendOrigin.REPLICATION or not (verification.enabled() or implicit_add):
            return self._append(entries, required_acks, timeout_ms, origin, None)
        if transactional is None:
            if origin != AppendOrigin.CLIENT:
                return self._append(entries, required_acks, timeout_ms, origin, None)  # markers, coordinator state
            # Verification on: a transactional batch in a request without a transactional id is
            # checked against a guard it cannot have, so it never starts a transaction.
            return self._append(entries, required_acks, timeout_ms, origin, _UNVERIFIED)
        # A client's produce, or TxnOffsetCommit's write to __consumer_offsets (Kafka verifies both).
        return self._append_transactional(verification, entries, required_acks, timeout_ms, transactional, origin)

    def set_transaction_verifier(self, verifier: txn_verification.TransactionVerifier,
                                 enabled: Callable[[], bool]) -> None:
        """Verify transactional produces with ``verifier`` while ``enabled()`` (KIP-890 part 1)."""
        self.txn_verification = txn_verification.ProduceVerification(verifier, enabled)

    def _append_transactional(self, verification: txn_verification.ProduceVerification,
                              entries: Sequence[tuple[str, int, Records]], required_acks: int, timeout_ms: int,
                              transactional: TransactionalProduce, origin: AppendOrigin
                              ) -> list[PartitionAppendResult] | Awaitable[list[PartitionAppendResult]]:
        """Append at once when nothing needs the coordinator; else verify, then append, in turn
        with the verifications in flight on the same partitions."""
        in_flight = verification.in_flight
        tps = [(topic, index) for topic, index, _ in entries]
        earlier = {fut for tp in tps if (fut := in_flight.get(tp)) is not None}
        if not earlier:
            plan = txn_verification.plan_verification(entries, self._hosted.by_tp, self.broker_id, now_ms())
            if not plan.to_verify:
                return self._append(entries, required_acks, timeout_ms, origin, plan)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for tp in tps:
            in_flight[tp] = turn
        return self._verify_then_append(verification, earlier, turn, tps, entries, required_acks, timeout_ms,
                                        transactional, origin)

    async def _verify_then_append(self, verification: txn_verification.ProduceVerification,
                                  earlier: set[asyncio.Future[None]], turn: asyncio.Future[None],
                                  tps: list[TopicPartition], entries: Sequence[tuple[str, int, Records]],
                                  required_acks: int, timeout_ms: int, transactional: TransactionalProduce,
                                  origin: AppendOrigin) -> list[PartitionAppendResult]:
        try:
            if earlier:
                await asyncio.wait(earlier)  # not cancelled with this request: others wait on them too
            # Planned again: the append waited on may have opened the transaction here.
            plan = txn_verification.plan_verification(entries, self._hosted.by_tp, self.broker_id, now_ms())
            if plan.to_verify:
                errors = await txn_verification.verify(
                    verification.verifier, transactional.transactional_id, plan.producer_id, plan.producer_epoch,
                    list(plan.to_verify.values()), timeout_ms, transactional.add_partitions)
                for i, tp in plan.to_verify.items():
                    if tp in errors:
                        plan.errors[i] = txn_verification.produce_error(errors[tp], transactional.abortable_supported)
            # The appends are queued (in order) by this call: later produces need not wait for their answer.
            outcome = self._append(entries, required_acks, timeout_ms, origin, plan)
        finally:
            if not turn.done():
                turn.set_result(None)
            for tp in tps:
                if verification.in_flight.get(tp) is turn:
                    del verification.in_flight[tp]
        return outcome if isinstance(outcome, list) else await outcome

    def _append(self, entries: Sequence[tuple[str, int, Records]], required_acks: int, timeout_ms: int,
                origin: AppendOrigin, plan: txn_verification.VerificationPlan | None
                ) -> list[PartitionAppendResult] | Awaitable[list[PartitionAppendResult]]:
        """``append_records`` once verified: ``plan`` (None: verification off) gives each
        append's guard and the entries refused by the coordinator."""
        now = now_ms()  # one clock read per request: with 1,000 partitions a request carries 1,000 batches
        # First pass: look up and check each partition batch. Then, while nothing is queued
        # on the append thread, reserve (lock, roll test) and append on the loop. Stopping
        # at the first that would block keeps each partition's appends in arrival order:
        # that one, everything after it, and every later request queue on the append
        # thread behind it.
        results: list[PartitionAppendResult | None] = []
        appends: list[tuple[int, Partition, Records]] = []
        partitions = self._hosted.by_tp
        broker_id = self.broker_id
        check_isr = required_acks == -1
        refused = plan.errors if plan is not None else None
        for topic, index, records in entries:
            partition = partitions.get((topic, index))
            if partition is None or partition.leader_id != broker_id:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if partition is None else ErrorCode.NOT_LEADER_OR_FOLLOWER
                results.append(PartitionAppendResult(code, None, None))
                continue
            if refused and len(results) in refused:
                error, message = refused[len(results)]
                results.append(PartitionAppendResult(error, None, message))
                continue
            if check_isr and len(partition.isr) < partition.log.config.min_insync_replicas:
                results.append(PartitionAppendResult(ErrorCode.NOT_ENOUGH_REPLICAS, None, partition.isr_too_small()))
                continue
            if type(records) is memoryview and records.readonly:  # offsets are patched in place
                records = bytearray(records)
            appends.append((len(results), partition, records))
            results.append(None)  # filled by the append below
        leftover = self._append_on_loop(appends, results, origin, now, plan) if self._append_thread.idle else appends
        if leftover:
            # Queued now, not when a task first runs: a later request handled
            # synchronously must see the append thread busy and queue behind it.
            # Waiters wake when the records land, whatever became of the request (its client may be gone).
            pending = self._append_thread.run(self._append_blocking, leftover, origin, now, None, plan,
                                             on_done=functools.partial(self._wake_after_thread_append, leftover))
            return self._complete_after_thread(pending, entries, leftover, results, required_acks, timeout_ms)
        return self._acknowledged(entries, results, required_acks, timeout_ms)  # type: ignore[arg-type]

    def append_converted_records(
        self,
        entries: Sequence[tuple[str, int, Records]],
        required_acks: int,
        timeout_ms: int,
        convert: Callable[[Records, LogConfig, int], Records],
    ) -> list[PartitionAppendResult] | Awaitable[list[PartitionAppendResult]]:
        """``append_records`` for a client's records that must be converted first (Produce
        v0-v2's message formats v0/v1): ``convert(records, partition config, now)`` gives the
        v2 bytes to append, or raises with the error to answer.

        Conversion reads and rebuilds every record, so it runs with its append on the
        append thread, in arrival order, and never on the event loop; a separate entry
        point keeps ``append_records``, which current clients take, free of it.
        """
        now = now_ms()
        results: list[PartitionAppendResult | None] = []
        appends: list[tuple[int, Partition, Records]] = []
        for topic, index, records in entries:
            partition = self._hosted.get((topic, index))
            if partition is None or partition.leader_id != self.broker_id:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if partition is None else ErrorCode.NOT_LEADER_OR_FOLLOWER
                results.append(PartitionAppendResult(code, None, None))
            elif required_acks == -1 and len(partition.isr) < partition.log.config.min_insync_replicas:
                results.append(PartitionAppendResult(ErrorCode.NOT_ENOUGH_REPLICAS, None, partition.isr_too_small()))
            else:
                appends.append((len(results), partition, records))
                results.append(None)
        if not appends:
            return self._acknowledged(entries, results, required_acks, timeout_ms)  # type: ignore[arg-type]
        verification = self.txn_verification
        plan = _UNVERIFIED if verification is not None and verification.enabled() else None
        pending = self._append_thread.run(self._append_blocking, appends, AppendOrigin.CLIENT, now, convert, plan,
                                         on_done=functools.partial(self._wake_after_thread_append, appends))
        return self._complete_after_thread(pending, entries, appends, results, required_acks, timeout_ms)

    def _append_on_loop(self, appends: list[tuple[int, Partition, Records]],
                        results: list[PartitionAppendResult | None], origin: AppendOrigin,
                        now: int, plan: txn_verification.VerificationPlan | None = None
                        ) -> list[tuple[int, Partition, Records]]:
        """Append on the loop every batch up to the first whose append could block;
        return the rest (for the append thread)."""
        reserved = 0
        for _, partition, records in appends:
            if not partition.reserve_append(records, now):
                break
            reserved += 1
        # Nothing can start waiting while these appends run: skip notifying when nobody waits.
        fetches = self._purgatories.fetch if self._purgatories.fetch.watching else None
        purgatory = self._purgatories.produce
        done = 0
        try:
            for i, partition, records in appends[:reserved]:
                done += 1
                high_watermark = partition.high_watermark
                try:
                    info = partition.append_reserved(records, origin, now, None if plan is None else plan.guard_of(i))
                except APPEND_EXCEPTIONS as exc:
                    results[i] = self._append_failed(partition, exc)
                    continue
                results[i] = PartitionAppendResult(ErrorCode.NO_ERROR, info, None)
                tp = (partition.topic, partition.partition_index)
                if fetches is not None:
                    fetches.notify_log_end(tp)
                    if partition.high_watermark != high_watermark:  # a lone in-sync replica's append
                        fetches.notify_high_watermark(tp)
                if purgatory.watching and purgatory.is_watched(tp):
                    purgatory.check_and_complete(tp)
        finally:
            for _, partition, _ in appends[done:reserved]:  # only after an unexpected error
                partition.release_reserved()
        return appends[reserved:]

    def _append_blocking(self, appends: list[tuple[int, Partition, Records]], origin: AppendOrigin, now: int,
                         convert: Callable[[Records, LogConfig, int], Records] | None = None,
                         plan: txn_verification.VerificationPlan | None = None) -> list[PartitionAppendResult]:
        """Append thread: one result per append, in order (each converted first when ``convert``)."""
        results = []
        for i, partition, records in appends:
            try:
                if convert is not None:
                    records = convert(records, partition.log.config, now)
                info = partition.append_records_to_leader(records, origin, now, None if plan is None else plan.guard_of(i))
                results.append(PartitionAppendResult(ErrorCode.NO_ERROR, info))
            except APPEND_EXCEPTIONS as exc:
                results.append(self._append_failed(partition, exc))
            except Exception as exc:
                if self._hosted.get((partition.topic, partition.partition_index)) is not partition:
                    # Deleted (or replaced) between the request's lookup and this append.
                    results.append(PartitionAppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, str(exc)))
                    continue
                log.error("error appending to %s: %s", partition, exc)
                results.append(PartitionAppendResult(ErrorCode.KAFKA_STORAGE_ERROR, None, str(exc)))
        return results

    @staticmethod
    def _append_failed(partition: Partition, exc: BaseException) -> PartitionAppendResult:
        log.debug("append to %s failed: %s", partition, exc)
        record_errors = exc.record_errors if isinstance(exc, StorageError) else ()
        return PartitionAppendResult(error_code_for(exc), None, str(exc), record_errors)

    async def _complete_after_thread(self, pending: Awaitable[list[PartitionAppendResult]],
                                     entries: Sequence[tuple[str, int, Records]],
                                     appended: list[tuple[int, Partition, Records]],
                                     results: list[PartitionAppendResult | None], required_acks: int,
                                     timeout_ms: int) -> list[PartitionAppendResult]:
        done = await pending  # parked fetches and produces were woken already (_wake_after_thread_append)
        for (i, _, _), result in zip(appended, done, strict=True):
            results[i] = result
        acknowledged = self._acknowledged(entries, results, required_acks, timeout_ms)  # type: ignore[arg-type]
        return acknowledged if isinstance(acknowledged, list) else await acknowledged

    def _wake_after_thread_append(self, appended: list[tuple[int, Partition, Records]],
                                  pending: asyncio.Future[list[PartitionAppendResult]]) -> None:
        """Appends done on the append thread: wake the fetches parked on their partitions, and
        the acks=all produces the append may have completed (it may move the high watermark)."""
        if pending.cancelled() or pending.exception() is not None:
            return  # the awaiting request reports it
        notify = self._purgatories.fetch.notify
        purgatory = self._purgatories.produce
        for (_, partition, _), result in zip(appended, pending.result(), strict=True):
            if result.info is not None:
                tp = (partition.topic, partition.partition_index)
                notify(tp)
                if purgatory.is_watched(tp):
                    purgatory.check_and_complete(tp)

    def _acknowledged(self, entries: Sequence[tuple[str, int, Records]],
                      results: list[PartitionAppendResult], required_acks: int,
                      timeout_ms: int) -> list[PartitionAppendResult] | Awaitable[list[PartitionAppendResult]]:
        """acks 0/1: the results now. acks=-1: once each high watermark passes its append."""
        self._count(entries, results)
        if required_acks != -1:
            return results
        required: dict[TopicPartition, int] = {}
        partitions = self._hosted.by_tp
        for (topic, index, _), result in zip(entries, results, strict=True):
            info = result.info
            if info is None:
                continue
            tp = (topic, index)
            partition = partitions.get(tp)
            if partition is not None and partition.high_watermark <= info.last_offset:
                required[tp] = info.last_offset + 1
        if not required:
            return results
        return self._wait_for_high_watermark(entries, results, required, timeout_ms)

    def _count(self, entries: Sequence[tuple[str, int, Records]], results: list[PartitionAppendResult]) -> None:
        """Kafka's BrokerTopicMetrics of an append: one increment or two per partition, no lookup but the topic's."""
        topics = self.topic_stats.topics
        for (topic, _, records), result in zip(entries, results, strict=True):
            counters = topics.get(topic) or self.topic_stats.of(topic)
            counters.total_produce_requests += 1
            info = result.info
            if info is not None:
                if not info.duplicate:
                    counters.messages_in += info.num_records
                    counters.bytes_in += info.valid_bytes
            elif result.error_code:
                counters.failed_produce_requests += 1
                if result.error_code in REJECTED_RECORDS:
                    counters.bytes_rejected += len(records)

    async def _wait_for_high_watermark(self, entries: Sequence[tuple[str, int, Records]],
                                       results: list[PartitionAppendResult], required: dict[TopicPartition, int],
                                       timeout_ms: int) -> list[PartitionAppendResult]:
        errors = await self._purgatories.produce.wait(required, max(timeout_ms, 0) / 1000)
        for (topic, index, _), result in zip(entries, results, strict=True):
            error = errors.get((topic, index))
            if error is not None:
                result.error_code = error
                result.info = None
        return results
