"""Partition at its leader: follower state, the high watermark over the (maximal) ISR, ISR
shrink and expansion proposals with their pending states, the controller's answers."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from protocol.errors import ErrorCode
from replication.partition import NotLeaderOrFollowerError, Partition
from replication.partition_state import LeaderAndIsr, PendingExpandIsr, PendingShrinkIsr
from replication.replica import Replica
from storage.log_append import AppendOrigin
from storage.log_config import LogConfig
from tests.replication.conftest import LAG
from tests.storage.helpers import make_batch

T0 = 1_000_000


@dataclass
class State:
    """A LeaderAndIsr partition state."""

    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int = 0
    replicas: list[int] = field(default_factory=lambda: [0, 1, 2])
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0


def _append(p: Partition, count: int) -> None:
    p.append_records_to_leader(make_batch(count), AppendOrigin.CLIENT)


def _fetch(p: Partition, replica: int, offset: int, now: int) -> bool:
    return p.update_follower_fetch_state(replica, offset, 0, p.log_end_offset, now)


def test_lone_leader_commits_at_once(partition: Partition) -> None:
    assert partition.make_leader(State(0, 0, [0], replicas=[0]), T0)
    _append(partition, 3)
    assert partition.high_watermark == 3
    assert partition.check_enough_replicas_reach_offset(3) == (True, ErrorCode.NO_ERROR)


def test_high_watermark_is_the_smallest_log_end_in_the_isr_and_never_moves_back(partition: Partition) -> None:
    assert partition.make_leader(State(0, 1, [0, 1, 2]), T0)
    _append(partition, 10)
    assert partition.high_watermark == 0  # the followers' log ends are unknown
    assert not _fetch(partition, 1, 10, T0 + 1)
    assert _fetch(partition, 2, 4, T0 + 2) and partition.high_watermark == 4
    assert _fetch(partition, 2, 10, T0 + 3) and partition.high_watermark == 10
    # A follower fetching from an older offset (it truncated) cannot move the HW back.
    assert not _fetch(partition, 2, 6, T0 + 4)
    assert partition.high_watermark == 10
    assert partition.check_enough_replicas_reach_offset(10) == (True, ErrorCode.NO_ERROR)
    assert partition.check_enough_replicas_reach_offset(11) == (False, ErrorCode.NO_ERROR)


def test_last_caught_up_time_follows_kafkas_rule() -> None:
    replica = Replica(1)
    replica.update_fetch_state(5, 0, 100, leader_end_offset=10)  # behind: not caught up
    assert replica.last_caught_up_time_ms == 0
    replica.update_fetch_state(10, 0, 200, leader_end_offset=15)  # reached the previous fetch's leader end
    assert replica.last_caught_up_time_ms == 100
    replica.update_fetch_state(15, 0, 300, leader_end_offset=15)  # at the leader's end now
    assert replica.last_caught_up_time_ms == 300
    assert replica.is_caught_up(20, 300 + LAG, LAG) and not replica.is_caught_up(20, 301 + LAG, LAG)
    assert replica.is_caught_up(15, 10**9, LAG)  # at the leader's end: caught up however long ago


def test_shrink_waits_for_the_lag_then_proposes_and_applies_the_answer(partition: Partition) -> None:
    partition.make_leader(State(0, 1, [0, 1, 2], partition_epoch=4), T0)
    _append(partition, 10)
    _fetch(partition, 1, 10, T0 + 10)
    _fetch(partition, 2, 3, T0 + 10)
    assert partition.high_watermark == 3
    assert partition.maybe_shrink_isr(T0 + LAG) is None  # in sync from the election until the lag passes
    proposal = partition.maybe_shrink_isr(T0 + LAG + 1)
    assert proposal == LeaderAndIsr(0, 1, (0, 1), 4)
    assert isinstance(partition.pending_isr, PendingShrinkIsr)
    # Pending: min.insync.replicas counts the committed ISR, the HW still waits for broker 2.
    assert partition.isr == [0, 1, 2] and partition.maximal_isr == [0, 1, 2]
    assert partition.maybe_shrink_isr(T0 + 5 * LAG) is None  # one change at a time
    assert partition.high_watermark == 3
    assert partition.handle_alter_partition_result(proposal, LeaderAndIsr(0, 1, (0, 1), 5))
    assert partition.isr == [0, 1] and partition.partition_epoch == 5 and partition.pending_isr is None
    assert partition.high_watermark == 10


def test_an_isr_below_min_insync_after_the_append_fails_it(partition: Partition) -> None:
    partition.log.config = LogConfig.model_validate({"min.insync.replicas": 2})
    partition.make_leader(State(0, 1, [0, 1], replicas=[0, 1]), T0)
    _append(partition, 2)
    assert partition.check_enough_replicas_reach_offset(2) == (False, ErrorCode.NO_ERROR)
    proposal = partition.maybe_shrink_isr(T0 + LAG + 1)
    assert proposal is not None and partition.check_enough_replicas_reach_offset(2)[0] is False
    assert partition.handle_alter_partition_result(proposal, LeaderAndIsr(0, 1, (0,), 1))
    assert partition.check_enough_replicas_reach_offset(2) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_expand_needs_the_hw_and_the_leader_epoch_start(partition: Partition) -> None:
    _append_as_old_leader = 6
    partition.make_leader(State(0, 0, [0]), T0)
    _append(partition, _append_as_old_leader)
    # Re-elected at a new epoch: this epoch starts at offset 6.
    partition.make_leader(State(0, 1, [0, 1]), T0)
    assert partition.leader_epoch_start_offset == 6
    _fetch(partition, 1, 6, T0)
    assert partition.high_watermark == 6
    assert partition.maybe_expand_isr(1) is None  # already in the ISR
    _fetch(partition, 2, 5, T0)
    assert partition.maybe_expand_isr(2) is None  # below the HW and the epoch's start
    _fetch(partition, 2, 6, T0)
    proposal = partition.maybe_expand_isr(2)
    assert proposal == LeaderAndIsr(0, 1, (0, 1, 2), 0)
    assert isinstance(partition.pending_isr, PendingExpandIsr)
    assert partition.isr == [0, 1] and partition.maximal_isr == [0, 1, 2]
    # While pending, the HW counts broker 2 (it may be in the ISR already).
    _append(partition, 4)
    _fetch(partition, 1, 10, T0 + 1)
    assert partition.high_watermark == 6
    _fetch(partition, 2, 8, T0 + 1)
    assert partition.high_watermark == 8
    # The controller refused without trying: back to the committed state, proposed again later.
    assert not partition.handle_alter_partition_result(proposal, None, ErrorCode.OPERATION_NOT_ATTEMPTED)
    assert partition.pending_isr is None and partition.isr == [0, 1]
    again = partition.maybe_expand_isr(2)
    assert again is not None
    # A stale partition epoch: left pending until the controller's next LeaderAndIsr, as Kafka does.
    assert not partition.handle_alter_partition_result(again, None, ErrorCode.INVALID_UPDATE_VERSION)
    assert partition.pending_isr is not None
    partition.make_leader(State(0, 2, [0, 1], partition_epoch=3), T0 + 2)
    assert partition.pending_isr is None and partition.partition_epoch == 3
    # An answer to a proposal the LeaderAndIsr replaced changes nothing.
    assert not partition.handle_alter_partition_result(again, LeaderAndIsr(0, 1, (0, 1, 2), 1))
    assert partition.isr == [0, 1]


def test_only_a_live_follower_outside_the_isr_holds_the_high_watermark(partition: Partition) -> None:
    """Kafka's maybeIncrementLeaderHW waits for a caught-up follower outside the ISR only when
    it is ISR-eligible (ZooKeeper mode: its broker alive). A follower that just died stays
    "caught up" for replica.lag.time.max.ms: without the check every acks=all produce after a
    broker's SIGTERM waited that long (30 s by default) for its replica."""
    alive = {0, 1, 2}
    partition.replica_isr_eligible = alive.__contains__
    partition.make_leader(State(0, 1, [0, 1, 2]), T0)
    _append(partition, 4)
    _fetch(partition, 1, 4, T0 + 1)
    _fetch(partition, 2, 4, T0 + 1)
    assert partition.high_watermark == 4
    # Broker 2 leaves the ISR (controlled shutdown) while it was caught up.
    partition.make_leader(State(0, 2, [0, 1], partition_epoch=1), T0 + 2)
    _append(partition, 3)
    _fetch(partition, 1, 7, T0 + 3)
    assert partition.high_watermark == 4  # alive and caught up: about to rejoin, so it counts
    alive.discard(2)  # the metadata cache learns that broker 2 is gone
    _fetch(partition, 1, 7, T0 + 4)
    assert partition.high_watermark == 7
    _fetch(partition, 2, 7, T0 + 5)  # a late fetch from the dead broker: no ISR expansion
    assert partition.maybe_expand_isr(2) is None
    alive.add(2)
    assert partition.maybe_expand_isr(2) == LeaderAndIsr(0, 2, (0, 1, 2), 1)


def test_answer_from_an_older_leader_epoch_is_ignored(partition: Partition) -> None:
    partition.make_leader(State(0, 3, [0, 1, 2], partition_epoch=7), T0)
    proposal = partition.maybe_shrink_isr(T0 + LAG + 1)
    assert proposal is not None
    assert not partition.handle_alter_partition_result(proposal, LeaderAndIsr(0, 2, (0,), 9))
    assert partition.isr == [0, 1, 2]


def test_follower_refuses_leader_appends_and_takes_the_leaders_hw(partition: Partition) -> None:
    partition.make_leader(State(0, 0, [0], replicas=[0, 1]), T0)
    _append(partition, 5)
    assert partition.make_follower(State(1, 1, [0, 1], replicas=[0, 1]))
    assert not partition.is_leader and partition.leader_id == 1 and partition.remote_replicas == {}
    with pytest.raises(NotLeaderOrFollowerError):
        _append(partition, 1)
    assert not partition.reserve_append(make_batch(1), T0)
    assert partition.check_enough_replicas_reach_offset(1) == (False, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert partition.maybe_shrink_isr(T0 + 10 * LAG) is None and partition.maybe_expand_isr(0) is None
    partition.update_follower_high_watermark(3)
    assert partition.high_watermark == 3
    partition.update_follower_high_watermark(100)  # never past its own log end
    assert partition.high_watermark == 5
    assert not partition.make_follower(State(1, 1, [0, 1], replicas=[0, 1]))  # nothing changed
