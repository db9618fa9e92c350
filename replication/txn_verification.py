"""Transaction verification of produces (KIP-890 part 1): the partition leader's half.

A transactional batch of a producer that has no transaction open on the
partition may only be appended once the transaction coordinator confirms the
partition is in that producer's ongoing transaction, at that producer id and
epoch. Without the check, a produce delayed past its transaction's abort
would start a transaction nobody ends (a hanging transaction that stalls the
last stable offset) or join the producer's next one.

Before asking, the leader creates a *verification guard* in the partition's
producer state (``Partition.maybe_start_transaction_verification``); the
append must carry it, and any append of that producer, marker included,
clears it. A verification answered before an abort marker therefore cannot
append after it.

The coordinator is reached through a :class:`TransactionVerifier`: Kafka's
AddPartitionsToTxnManager role, which sends AddPartitionsToTxn v4+ verify-only
requests to the coordinator's broker. This layer defines it; the broker wires
it to its transaction coordinator (replication/ never imports coordinator/).

Batches of a producer whose transaction is open on the partition, and
non-transactional requests, never wait for anything here.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from protocol.errors import ErrorCode
from protocol.record_batch import NO_PRODUCER_ID, TRANSACTIONAL_FLAG
from replication.partition import Partition
from storage.producer_state import SENTINEL_GUARD, VerificationGuard

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Records = bytearray | memoryview

#: Kafka's add.partitions.to.txn.retry.backoff.ms and .max.ms defaults: a verification answered
#: CONCURRENT_TRANSACTIONS (the previous transaction still completing) is asked again this often,
#: for this long, before the produce is failed.
RETRY_BACKOFF_MS = 20
RETRY_BACKOFF_MAX_MS = 100

#: A v2 batch's attributes, then (past lastOffsetDelta and two timestamps) producer id and epoch.
_PRODUCER_FIELDS = struct.Struct(">h20xqh")
_ATTRIBUTES_OFFSET = 21

#: Coordinator answers that say "could not verify now": older clients would not retry them, so the
#: produce gets NOT_ENOUGH_REPLICAS, retriable without a metadata refresh (Kafka's ReplicaManager).
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
})


class TransactionVerifier(Protocol):
    def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                 partitions: Sequence[TopicPartition], add_partitions: bool = False
                 ) -> Awaitable[dict[TopicPartition, int]]:
        """AddPartitionsToTxn verify-only to the transactional id's coordinator: the error of each
        partition not verified (as the coordinator answers it); a partition absent or NO_ERROR is
        in the ongoing transaction. ``add_partitions``: not verify-only, the coordinator adds
        them to the transaction (transaction version 2's implicit add, KIP-890 part 2)."""
        ...


@dataclass(frozen=True, slots=True)
class TransactionalProduce:
    """What a produce request says of its transaction."""

    transactional_id: str
    #: Produce v11+ (KIP-890): the client handles TRANSACTION_ABORTABLE; older ones get INVALID_TXN_STATE.
    abortable_supported: bool
    #: Transaction version 2 (TxnOffsetCommit v5): the partition joins the transaction on its first
    #: write instead of by an earlier AddPartitionsToTxn / AddOffsetsToTxn of the client.
    add_partitions: bool = False


@dataclass(slots=True)
class VerificationPlan:
    """The partitions of one produce request that need the coordinator, and the guards they append with."""

    guards: dict[int, VerificationGuard] = field(default_factory=dict)
    #: Entry index → partition, for the entries whose guard the coordinator must confirm.
    to_verify: dict[int, TopicPartition] = field(default_factory=dict)
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1
    #: Entry index → (error, message): refused before anything is appended.
    errors: dict[int, tuple[int, str | None]] = field(default_factory=dict)

    def guard_of(self, index: int) -> VerificationGuard:
        """The guard entry ``index`` appends with: SENTINEL_GUARD when not verified, so a
        transactional batch without a verification can never start a transaction."""
        return self.guards.get(index, SENTINEL_GUARD)


def transactional_producer(records: Records) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional batch, else None (three fields, not a parse:
    the request's decoder checked the header)."""
    if len(records) < _ATTRIBUTES_OFFSET + _PRODUCER_FIELDS.size:
        return None
    attributes, producer_id, epoch = _PRODUCER_FIELDS.unpack_from(records, _ATTRIBUTES_OFFSET)
    if not attributes & TRANSACTIONAL_FLAG or producer_id == NO_PRODUCER_ID:
        return None
    return producer_id, epoch


def plan_verification(entries: Sequence[tuple[str, int, Records]], hosted: dict[TopicPartition, Partition],
                      broker_id: int, now: int) -> VerificationPlan:
    """Kafka's maybeStartTransactionVerificationForPartitions: a guard for each transactional
    batch whose producer has no transaction open on its partition (the others append without
    one). Partitions not led here are left to the append, which answers their error."""
    plan = VerificationPlan()
    producers: set[tuple[int, int]] = set()
    for i, (topic, index, records) in enumerate(entries):
        producer = transactional_producer(records)
        if producer is None:
            continue
        producers.add(producer)
        partition = hosted.get((topic, index))
        if partition is None or partition.leader_id != broker_id:
            continue
        guard = partition.maybe_start_transaction_verification(producer[0], producer[1], now)
        if guard is not SENTINEL_GUARD:
            plan.guards[i] = guard
            plan.to_verify[i] = (topic, index)
    if len(producers) > 1:
        # One transactional id has one producer: Kafka refuses the request (InvalidPidMappingException).
        message = "Transactional records contained more than one producer ID"
        plan.errors = dict.fromkeys(range(len(entries)), (ErrorCode.INVALID_PRODUCER_ID_MAPPING, message))
        plan.to_verify.clear()
    elif producers:
        plan.producer_id, plan.producer_epoch = next(iter(producers))
    return plan


def produce_error(code: int, abortable_supported: bool) -> tuple[int, str | None]:
    """The produce's answer for a partition the coordinator did not verify (Kafka's
    AddPartitionsToTxnManager and ReplicaManager translations): (error, message)."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, None  # what producers expect on a produce
    if code == ErrorCode.TRANSACTION_ABORTABLE and not abortable_supported:
        code = ErrorCode.INVALID_TXN_STATE
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, "Partition was not added to the transaction"
    if code in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        underlying = ErrorCode(code).name
        return (ErrorCode.NOT_ENOUGH_REPLICAS,
                f"Unable to verify the partition has been added to the transaction. Underlying error: {underlying}")
    return code, None


async def verify(verifier: TransactionVerifier, transactional_id: str, producer_id: int, producer_epoch: int,
                 partitions: Sequence[TopicPartition], timeout_ms: int, add_partitions: bool = False
                 ) -> dict[TopicPartition, int]:
    """Ask the coordinator; ask again after CONCURRENT_TRANSACTIONS for up to
    ``min(RETRY_BACKOFF_MAX_MS, timeout_ms)``. The errors of the partitions not verified."""
    deadline = time.monotonic() + min(RETRY_BACKOFF_MAX_MS, max(timeout_ms, 0)) / 1000
    while True:
        try:
            answer = await verifier(transactional_id, producer_id, producer_epoch, partitions, add_partitions)
        except (OSError, TimeoutError) as exc:  # the coordinator could not be reached
            log.info("verifying the transaction of %s failed: %s", transactional_id, exc)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        errors = {tp: code for tp, code in answer.items() if code != ErrorCode.NO_ERROR}
        if ErrorCode.CONCURRENT_TRANSACTIONS not in errors.values() or time.monotonic() >= deadline:
            return errors
        await asyncio.sleep(RETRY_BACKOFF_MS / 1000)


@dataclass(slots=True)
class ProduceVerification:
    """The replica manager's verifier, whether verification is on now (the broker config
    ``transaction.partition.verification.enable``, read per request: it is dynamic in Kafka),
    and the partitions whose produces wait on a verification.

    A produce that waits on the coordinator must not be overtaken by a later produce of the
    same producer to the same partition (pipelined requests are handled concurrently here,
    not one at a time per connection as in Kafka): a later transactional produce to a
    partition with a verification in flight waits for that one's append to be queued.
    """

    verifier: TransactionVerifier
    enabled: Callable[[], bool] = lambda: True
    in_flight: dict[TopicPartition, asyncio.Future[None]] = field(default_factory=dict)
