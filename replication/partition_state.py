"""A partition's ISR state at its leader, with an ISR change in flight (Kafka's PartitionState).

The leader never changes its ISR by itself: it proposes a change to the
controller (AlterPartition) and applies the controller's answer. While a
proposal is in flight the partition is *pending*:

* the partition's ``isr`` stays the last committed ISR: ``min.insync.replicas`` is checked
  against it, so an expansion does not count before the controller accepts it;
* ``maximal_isr`` is the widest ISR that could be in force, the committed one
  plus a replica being added, or the committed one while replicas are being
  removed. The high watermark is computed over it, so it never passes an offset
  a replica that may be in the ISR lacks.

No further change is proposed until the pending one is answered.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Kafka's LeaderRecoveryState.RECOVERED.
RECOVERED = 0


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leadership as the controller records it (the state znode)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = RECOVERED


@dataclass(frozen=True, slots=True)
class PendingExpandIsr:
    new_in_sync_replica_id: int
    sent_leader_and_isr: LeaderAndIsr
    #: The committed ISR the proposal started from.
    last_committed_isr: tuple[int, ...]

    def maximal_isr(self, isr: list[int]) -> list[int]:
        return [*isr, self.new_in_sync_replica_id] if self.new_in_sync_replica_id not in isr else isr


@dataclass(frozen=True, slots=True)
class PendingShrinkIsr:
    out_of_sync_replica_ids: frozenset[int]
    sent_leader_and_isr: LeaderAndIsr
    #: The committed ISR the proposal started from.
    last_committed_isr: tuple[int, ...]

    def maximal_isr(self, isr: list[int]) -> list[int]:
        return isr


PendingIsrState = PendingExpandIsr | PendingShrinkIsr
