"""TransactionState and TransactionMetadata: one transactional id's state machine (pure, no I/O).

Every change is two steps, as in Kafka: a ``prepare_*`` method checks the
transition and returns the :class:`TxnTransitMetadata` to write to
``__transaction_state`` (marking it as the *pending* state, so no second
transition can start meanwhile); only once that record is in the log does the
state manager call :meth:`TransactionMetadata.complete_transition_to` to apply
it. A failed append clears the pending state and leaves the metadata as it
was, so what the coordinator acts on is never ahead of what a restart would
reload.

Producer epochs are Java shorts: they wrap as Java's ``(short) (epoch + 1)``
does, and an epoch at ``Short.MAX_VALUE - 1`` is exhausted (the coordinator
must always keep one epoch in hand to fence with), so the next InitProducerId
rotates to a new producer id at epoch 0.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: A partition in a transaction: (topic, partition index).
TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 0x7FFF
INT_MAX = 0x7FFFFFFF

#: transaction.version feature levels (Kafka's TransactionVersion): TV_2 is KIP-890 part 2,
#: where every EndTxn bumps the producer epoch.
TV_0, TV_1, TV_2 = 0, 1, 2


def supports_epoch_bump(transaction_version: int) -> bool:
    return transaction_version >= TV_2


def java_short(n: int) -> int:
    """``(short) n``: wrap into [-32768, 32767] as Java's narrowing cast does."""
    return ((n + 0x8000) & 0xFFFF) - 0x8000


def is_epoch_exhausted(producer_epoch: int) -> bool:
    return producer_epoch >= SHORT_MAX - 1


class TransactionState(enum.IntEnum):
    """Kafka's TransactionState; the values are the int8 ids written to the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """The name DescribeTransactions and ListTransactions show ("Empty", "PrepareCommit", ...)."""
        return _NAMES[self]

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS[self]

    @property
    def is_expiration_allowed(self) -> bool:
        """Only a transactional id with no transaction in flight may expire."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState | None:
        try:
            return cls(state_id)
        except ValueError:
            return None


_S = TransactionState
_NAMES = {
    _S.EMPTY: "Empty", _S.ONGOING: "Ongoing", _S.PREPARE_COMMIT: "PrepareCommit", _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit", _S.COMPLETE_ABORT: "CompleteAbort", _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_COMPLETED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: _COMPLETED,
    _S.ONGOING: _COMPLETED | {_S.ONGOING},
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # Transactions V2 lets a client that is unsure of the server's state abort from a completed one.
    _S.PREPARE_ABORT: _COMPLETED | {_S.ONGOING, _S.PREPARE_EPOCH_FENCE},
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: _COMPLETED,
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransitionError(Exception):
    """A transition the state machine forbids (Kafka's IllegalStateException): a coordinator bug."""


class ProducerFencedError(Exception):
    """InitProducerId from a producer whose epoch a newer instance has superseded."""

    error_code = ErrorCode.PRODUCER_FENCED


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The state a transition leads to: written to the log first, applied after."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


@dataclass(slots=True)
class _TransitionData:
    """The fields a transition may change, starting as the current ones (Kafka's TransitionData)."""

    state: TransactionState
    producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


@dataclass(eq=False, slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    client_transaction_version: int = TV_0
    #: The state a transition written to the log (not yet applied) leads to; blocks other transitions.
    pending_state: TransactionState | None = None
    #: A fence whose bumped epoch may not have reached the log: the next fence reuses that epoch.
    has_failed_epoch_fence: bool = False

    # -- queries ------------------------------------------------------------------------
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def is_distributed_two_phase_commit_txn(self) -> bool:
        """KIP-939 transactions carry no timeout (Integer.MAX_VALUE)."""
        return self.txn_timeout_ms == INT_MAX

    def has_pending_transaction(self) -> bool:
        return self.state in (TransactionState.ONGOING, TransactionState.PREPARE_ABORT,
                              TransactionState.PREPARE_COMMIT)

    def add_partitions(self, partitions: set[TopicPartition]) -> None:
        self.topic_partitions |= partitions

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker for ``tp`` was written: it no longer waits on that partition."""
        if self.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise IllegalTransitionError(
                f"{self.transactional_id}: removing partition {tp} whose marker was written in state "
                f"{self.state.state_name} (pending {self.pending_state}): not expected")
        self.topic_partitions.discard(tp)

    # -- transitions ----------------------------------------------------------------------
    def _data(self, state: TransactionState) -> _TransitionData:
        return _TransitionData(state, self.producer_id, self.next_producer_id, self.producer_epoch,
                               self.last_producer_epoch, self.txn_timeout_ms, frozenset(self.topic_partitions),
                               self.txn_start_timestamp, self.txn_last_update_timestamp,
                               self.client_transaction_version)

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a transit, without claiming the pending state."""
        return TxnTransitMetadata(self.producer_id, self.prev_producer_id, self.next_producer_id,
                                  self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms, self.state,
                                  frozenset(self.topic_partitions), self.txn_start_timestamp,
                                  self.txn_last_update_timestamp, self.client_transaction_version)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to fence the producer of an ongoing transaction before aborting it."""
        if self.producer_epoch == SHORT_MAX:
            log.error("fencing producer %s %d with epoch equal to Short.MAX_VALUE: this must not happen "
                      "unless there is a bug", self.transactional_id, self.producer_id)
        data = self._data(TransactionState.PREPARE_EPOCH_FENCE)
        # A previous fence may have failed to reach the log: its epoch was never handed out, so reuse it.
        if not self.has_failed_epoch_fence and self.producer_epoch != SHORT_MAX:
            data.producer_epoch = java_short(self.producer_epoch + 1)
        return self._prepare_transition_to(data)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int, expected_producer_epoch: int | None,
                                         update_timestamp: int) -> TxnTransitMetadata:
        """InitProducerId on an existing id: bump the epoch (KIP-360 rules for ``expected_producer_epoch``)."""
        if self.is_producer_epoch_exhausted():
            raise IllegalTransitionError(f"cannot allocate any more producer epochs for producerId {self.producer_id}")
        data = self._data(TransactionState.EMPTY)
        bumped = java_short(self.producer_epoch + 1)
        if expected_producer_epoch is None:
            # A new producer instance: bump, and forget the previous epoch so an older instance's retry is fenced.
            data.producer_epoch, data.last_producer_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            # The same producer recovering from an error, and nobody initialized since.
            data.producer_epoch, data.last_producer_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            # A retry of a bump that succeeded: answer with the epoch it got.
            data.producer_epoch, data.last_producer_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            log.info("expected producer epoch %d does not match current producer epoch %d or previous producer "
                     "epoch %d", expected_producer_epoch, self.producer_epoch, self.last_producer_epoch)
            raise ProducerFencedError(f"{self.transactional_id}: producer epoch {expected_producer_epoch} is fenced")
        data.txn_timeout_ms = new_txn_timeout_ms
        data.topic_partitions = frozenset()
        data.txn_start_timestamp = -1
        data.txn_last_update_timestamp = update_timestamp
        return self._prepare_transition_to(data)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """A new producer id at epoch 0 (the epoch is exhausted, or the id is new)."""
        if self.has_pending_transaction():
            raise IllegalTransitionError("cannot rotate producer ids while a transaction is still pending")
        data = self._data(TransactionState.EMPTY)
        data.producer_id = new_producer_id
        data.producer_epoch = 0
        data.last_producer_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        data.txn_timeout_ms = new_txn_timeout_ms
        data.topic_partitions = frozenset()
        data.txn_start_timestamp = -1
        data.txn_last_update_timestamp = update_timestamp
        return self._prepare_transition_to(data)

    def prepare_add_partitions(self, added: set[TopicPartition] | frozenset[TopicPartition], update_timestamp: int,
                               client_transaction_version: int) -> TxnTransitMetadata:
        data = self._data(TransactionState.ONGOING)
        # The first partition of a transaction starts its clock (what transaction.timeout.ms measures).
        if self.state in _COMPLETED:
            data.txn_start_timestamp = update_timestamp
        data.topic_partitions = frozenset(self.topic_partitions) | frozenset(added)
        data.txn_last_update_timestamp = update_timestamp
        data.client_transaction_version = client_transaction_version
        return self._prepare_transition_to(data)

    def prepare_abort_or_commit(self, new_state: TransactionState, client_transaction_version: int,
                                next_producer_id: int, update_timestamp: int,
                                no_partition_added: bool) -> TxnTransitMetadata:
        data = self._data(new_state)
        if supports_epoch_bump(client_transaction_version):
            # KIP-890 part 2: every EndTxn bumps the epoch, so a late write of this transaction is fenced.
            if self.producer_epoch == SHORT_MAX and new_state == TransactionState.PREPARE_ABORT:
                log.error("aborting producer %s %d with epoch equal to Short.MAX_VALUE: this must not happen "
                          "unless there is a bug", self.transactional_id, self.producer_id)
            else:
                data.producer_epoch = java_short(self.producer_epoch + 1)
            data.last_producer_epoch = self.producer_epoch
        # An abort with no partition added (allowed in V2) has no start time of its own.
        data.txn_start_timestamp = update_timestamp if no_partition_added else self.txn_start_timestamp
        data.next_producer_id = next_producer_id
        data.txn_last_update_timestamp = update_timestamp
        data.client_transaction_version = client_transaction_version
        return self._prepare_transition_to(data)

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        """Every marker is written: CompleteCommit / CompleteAbort."""
        self.has_failed_epoch_fence = False  # the prepare record reached the log
        target = (TransactionState.COMPLETE_COMMIT if self.state == TransactionState.PREPARE_COMMIT
                  else TransactionState.COMPLETE_ABORT)
        data = self._data(target)
        # Epoch overflow in V2: the client moves on to the next producer id at epoch 0; the last
        # epoch stays at what it last saw (Short.MAX_VALUE - 1).
        if supports_epoch_bump(self.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID:
            data.producer_id, data.producer_epoch = self.next_producer_id, 0
        data.next_producer_id = NO_PRODUCER_ID
        data.topic_partitions = frozenset()
        data.txn_last_update_timestamp = update_timestamp
        return self._prepare_transition_to(data)

    def prepare_dead(self) -> TxnTransitMetadata:
        data = self._data(TransactionState.DEAD)
        data.topic_partitions = frozenset()
        return self._prepare_transition_to(data)

    def _prepare_transition_to(self, data: _TransitionData) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: preparing a transition to {data.state.state_name} while a transition "
                f"to {self.pending_state.state_name} is pending")
        if data.producer_id < 0:
            raise IllegalTransitionError(f"illegal new producer id {data.producer_id}")
        # A new id's epoch is -1 until its first InitProducerId, and may stay so until it dies.
        if data.state != TransactionState.DEAD and data.producer_epoch < 0:
            raise IllegalTransitionError(f"illegal new producer epoch {data.producer_epoch}")
        if self.state not in data.state.valid_previous_states:
            raise IllegalTransitionError(
                f"{self.transactional_id}: preparing a transition to {data.state.state_name} failed since "
                f"{self.state.state_name} is not a valid previous state of it")
        transit = TxnTransitMetadata(data.producer_id, self.producer_id, data.next_producer_id, data.producer_epoch,
                                     data.last_producer_epoch, data.txn_timeout_ms, data.state,
                                     data.topic_partitions, data.txn_start_timestamp, data.txn_last_update_timestamp,
                                     data.client_transaction_version)
        log.debug("transactional id %s prepares a transition from %s to %s", self.transactional_id,
                  self.state.state_name, data.state.state_name)
        self.pending_state = data.state
        return transit

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply a transition whose record is in the log, after checking it is the one prepared."""
        to_state = self.pending_state
        if to_state is None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: completing a transition while none is pending")
        if to_state != transit.txn_state:
            self._fail(transit)
        s = TransactionState
        if to_state == s.EMPTY:  # InitProducerId
            if ((self.producer_epoch != transit.producer_epoch and not self._valid_producer_epoch_bump(transit))
                    or transit.topic_partitions or transit.txn_start_timestamp != -1):
                self._fail(transit)
        elif to_state == s.ONGOING:  # AddPartitionsToTxn / AddOffsetsToTxn
            if (not self._valid_producer_epoch(transit) or not transit.topic_partitions >= self.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms):
                self._fail(transit)
        elif to_state in (s.PREPARE_ABORT, s.PREPARE_COMMIT):  # EndTxn
            allowed_empty_abort = (to_state == s.PREPARE_ABORT
                                   and supports_epoch_bump(transit.client_transaction_version)
                                   and self.state in _COMPLETED)
            valid_timestamp = self.txn_start_timestamp == transit.txn_start_timestamp or allowed_empty_abort
            if (not self._valid_producer_epoch(transit) or self.topic_partitions != transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms or not valid_timestamp):
                self._fail(transit)
        elif to_state in (s.COMPLETE_ABORT, s.COMPLETE_COMMIT):  # every marker written
            if (not self._valid_producer_epoch(transit) or self.txn_timeout_ms != transit.txn_timeout_ms
                    or transit.txn_start_timestamp == -1):
                self._fail(transit)
        elif to_state == s.PREPARE_EPOCH_FENCE:
            # A fence is followed at once by PrepareAbort: it is never itself completed.
            self._fail(transit)
        elif to_state == s.DEAD:
            raise IllegalTransitionError(
                f"{self.transactional_id} is trying to complete a transition to Dead: an expired id is removed "
                "from the cache, never completed")
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = to_state

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        v2 = supports_epoch_bump(transit.client_transaction_version)
        s = TransactionState
        if v2 and transit.txn_state in (s.COMPLETE_COMMIT, s.COMPLETE_ABORT) and transit.producer_epoch == 0:
            # Epoch overflow: the producer id moved on; its predecessor must be ours.
            return (transit.last_producer_epoch == self.last_producer_epoch
                    and transit.prev_producer_id == self.producer_id)
        if v2 and transit.txn_state in (s.PREPARE_COMMIT, s.PREPARE_ABORT):
            # The epoch was bumped by this EndTxn: the last epoch must be ours.
            return transit.last_producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def _valid_producer_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return (transit.producer_epoch == java_short(self.producer_epoch + 1)
                or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id))

    def _fail(self, transit: TxnTransitMetadata) -> None:
        log.error("%s's transition to %s failed: this should not happen", self, transit)
        raise IllegalTransitionError(
            f"transactional id {self.transactional_id} failed transition to {transit} due to unexpected metadata")
