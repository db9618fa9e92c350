"""The two ways a follower that truncates by its high watermark loses or forks data, replayed
step by step (the design notes, 000 §3.3 and §3.4; KIP-101's scenarios), and follower truncation
by leader epoch, which prevents both.

Two replicas, ``min.insync.replicas`` 1 (the harness checks none), replica fetches that long-poll
for 2 s so that a follower's high watermark lags its log end by one fetch round, as in the
notes. Each scenario runs twice: with leader epochs it must keep every acknowledged record and
leave both replicas with the same batches; with ``truncate_to_high_watermark_only`` (the switch
that exists for these tests: Kafka before KIP-101) the same check must fail, which shows the
scenario really reaches the failure it is about.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from replication.replication_config import ReplicationConfig
from tests.in_process import wait_for
from tests.replication.replication_rig import TP, ReplicationRig, batches, produce, run_rig
from tests.storage.helpers import make_batch

A, B = 0, 1
#: The follower's fetch parks at the leader this long: its HW lags by one round for that long.
LONG_POLL = ReplicationConfig(replica_lag_time_max_ms=30_000, replica_fetch_wait_max_ms=2_000,
                              replica_fetch_backoff_ms=50)
HIGH_WATERMARK_ONLY = ReplicationConfig(replica_lag_time_max_ms=30_000, replica_fetch_wait_max_ms=2_000,
                                        replica_fetch_backoff_ms=50, truncate_to_high_watermark_only=True)


def _run(tmp_path: Path, config: ReplicationConfig, scenario: Callable[[ReplicationRig], Awaitable[None]]) -> None:
    run_rig(tmp_path, config, scenario, timeout=45)


def _partition(cluster: ReplicationRig, broker_id: int):  # type: ignore[no-untyped-def]
    partition = cluster.nodes[broker_id].rm.get_partition(*TP)
    assert partition is not None
    return partition


async def _acknowledged(cluster: ReplicationRig, leader: int, seed: int, acks: int = -1) -> int:
    """Produce one record; its batch's CRC once acknowledged."""
    batch = make_batch(1, seed=seed)
    result = await produce(cluster.nodes[leader].rm, 1, acks=acks, batch=batch)
    assert result.error_code == ErrorCode.NO_ERROR
    return batches(_partition(cluster, leader).log)[-1][2]


async def _two_records_with_the_follower_hw_behind(cluster: ReplicationRig) -> list[int]:
    """A leads at epoch 0 with B in the ISR; m0 and m1 acknowledged (acks=all). B has both, but
    its high watermark is still 1: the answer carrying HW 2 is parked at A. Returns their CRCs."""
    await cluster.start(A)
    await cluster.start(B)
    await cluster.elect([A, B])
    m0 = await _acknowledged(cluster, A, seed=0)
    b = _partition(cluster, B)
    await wait_for(lambda: b.high_watermark == 1, "B to learn HW 1")
    m1 = await _acknowledged(cluster, A, seed=1)  # done when B's fetch at offset 2 reaches A
    assert _partition(cluster, A).high_watermark == 2
    assert (b.log_end_offset, b.high_watermark) == (2, 1)
    return [m0, m1]


def _crcs(cluster: ReplicationRig, broker_id: int) -> list[int]:
    return [crc for _, _, crc in batches(_partition(cluster, broker_id).log)]


# -- §3.3: an acknowledged record lost ---------------------------------------------------------------
async def _data_loss_scenario(cluster: ReplicationRig) -> None:
    acknowledged = await _two_records_with_the_follower_hw_behind(cluster)
    a_port = cluster.ports[A]
    # B restarts (its checkpointed HW is 1) and is told to follow A again; A dies before B fetches.
    await cluster.stop(B)
    await cluster.stop(A)
    await cluster.start(B)
    await cluster.resend(B, [A, B], live={A: a_port})
    # The controller sees A gone: B, still in the ISR, leads at epoch 1.
    await cluster.elect([A, B], leader=B, isr=[B])
    # A comes back and follows B.
    await cluster.start(A)
    await cluster.resend(A, [A, B])
    b_end = _partition(cluster, B).log_end_offset
    await wait_for(lambda: _partition(cluster, A).log_end_offset == b_end
                and _partition(cluster, A).high_watermark == b_end, "A to follow B")
    # Every acknowledged record is still in the log, on both replicas.
    assert _crcs(cluster, B)[:2] == acknowledged, "an acknowledged record was lost"
    assert batches(_partition(cluster, A).log) == batches(_partition(cluster, B).log)


def test_leader_epochs_keep_a_record_the_high_watermark_would_lose(tmp_path: Path) -> None:
    _run(tmp_path, LONG_POLL, _data_loss_scenario)


def test_truncating_to_the_high_watermark_loses_the_acknowledged_record(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="an acknowledged record was lost"):
        _run(tmp_path, HIGH_WATERMARK_ONLY, _data_loss_scenario)


# -- §3.4: two replicas with different records at the same offset ------------------------------------
async def _divergence_scenario(cluster: ReplicationRig, leader_fetch_version: int | None = None) -> None:
    m0, _ = await _two_records_with_the_follower_hw_behind(cluster)
    a_port = cluster.ports[A]
    # Both die. B comes back first without m1 (a crash can lose what was not flushed; with the
    # high watermark B cuts it off itself on becoming A's follower again).
    await cluster.stop(B)
    await cluster.stop(A)
    b = await cluster.start(B)
    if leader_fetch_version is not None:
        b.server.max_versions[1] = leader_fetch_version
    await b.rm.append_thread.run(b.log_manager.get_or_create_log(*TP).truncate_to, 1)
    await cluster.resend(B, [A, B], live={A: a_port})
    # B leads at epoch 1 and takes a new record, m1', at offset 1.
    await cluster.elect([A, B], leader=B, isr=[B])
    m1_new = await _acknowledged(cluster, B, seed=2, acks=1)
    assert _crcs(cluster, B) == [m0, m1_new]
    # A comes back (its HW is 2, past its m1) and follows B.
    await cluster.start(A)
    await cluster.resend(A, [A, B])
    # A's log already ends at B's end offset, so no offset says when it is done: give it three
    # long polls' time to agree with B.
    same = lambda: batches(_partition(cluster, A).log) == batches(_partition(cluster, B).log)  # noqa: E731
    with contextlib.suppress(AssertionError):
        await wait_for(same, "A to hold B's batches", timeout=3 * LONG_POLL.replica_fetch_wait_max_ms / 1000)
    # Both replicas hold the same batches at the same offsets.
    assert same(), "the replicas diverged"
    assert _partition(cluster, A).high_watermark == 2


@pytest.mark.parametrize("leader_fetch_version", [None, 11])
def test_leader_epochs_truncate_the_divergent_record(tmp_path: Path, leader_fetch_version: int | None) -> None:
    """From Fetch v12 the leader answers A's last fetched epoch with where it diverged (KIP-320);
    a leader below v12 is asked OffsetForLeaderEpoch before A fetches (KIP-101)."""
    async def scenario(cluster: ReplicationRig) -> None:
        await _divergence_scenario(cluster, leader_fetch_version)
        asked = cluster.nodes[B].server.requests.get(23, 0)
        assert asked >= 1 if leader_fetch_version == 11 else asked == 0

    _run(tmp_path, LONG_POLL, scenario)


def test_truncating_to_the_high_watermark_leaves_the_replicas_diverged(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="the replicas diverged"):
        _run(tmp_path, HIGH_WATERMARK_ONLY, _divergence_scenario)


# -- KIP-279: the follower knows epochs the leader never had, and the leader epochs it never had ------
def test_truncation_walks_down_the_epochs_until_both_logs_agree(tmp_path: Path) -> None:
    """Fast leader changes leave each replica with an epoch the other never saw. The leader
    answers the follower's last epoch (2) with the largest one it has below it (1, ending at 7);
    the follower has no epoch 1, so it cuts to where its own epoch 0 ends (3) and asks again with
    epoch 0, which both share up to 3: two rounds, then identical logs (KIP-279)."""
    async def scenario(cluster: ReplicationRig) -> None:
        lead, follow = A, B
        await cluster.start(lead)
        await cluster.start(follow)
        await cluster.elect([lead, follow])                                   # epoch 0
        assert (await produce(cluster.nodes[lead].rm, 3)).error_code == ErrorCode.NO_ERROR
        await wait_for(lambda: _partition(cluster, follow).log_end_offset == 3, "the follower to replicate")
        await cluster.stop(follow)
        await cluster.elect([lead, follow], isr=[lead])                       # epoch 1: 4 records, A only
        assert (await produce(cluster.nodes[lead].rm, 4, acks=1)).error_code == ErrorCode.NO_ERROR
        await cluster.stop(lead)
        await cluster.start(follow)
        await cluster.elect([lead, follow], leader=follow, isr=[follow])      # epoch 2: 5 records, B only
        assert (await produce(cluster.nodes[follow].rm, 5, acks=1)).error_code == ErrorCode.NO_ERROR
        await cluster.stop(follow)
        await cluster.start(lead)
        await cluster.elect([lead, follow], leader=lead, isr=[lead])          # epoch 3: 3 records, A only
        assert (await produce(cluster.nodes[lead].rm, 3, acks=1)).error_code == ErrorCode.NO_ERROR
        a = _partition(cluster, lead)
        assert [tuple(e) for e in a.log.leader_epoch_cache.entries] == [(0, 0), (1, 3), (3, 7)]
        await cluster.start(follow)
        b_log = cluster.nodes[follow].log_manager.get_log(*TP)
        assert b_log is not None and [tuple(e) for e in b_log.leader_epoch_cache.entries] == [(0, 0), (2, 3)]
        await cluster.elect([lead, follow], leader=lead, isr=[lead])          # epoch 4: B follows A
        await wait_for(lambda: batches(_partition(cluster, follow).log) == batches(a.log), "the logs to agree")
        assert _partition(cluster, follow).log_end_offset == a.log_end_offset == 10
        fetched = cluster.nodes[lead].server.fetch_requests
        asked = [p.last_fetched_epoch for r in fetched for t in r.topics for p in t.partitions]
        assert 2 in asked and 0 in asked  # the follower asked with epoch 2, then, after cutting, with 0

    _run(tmp_path, LONG_POLL, scenario)


def test_offset_for_leader_epoch_fences_older_and_newer_callers(tmp_path: Path) -> None:
    async def scenario(cluster: ReplicationRig) -> None:
        await cluster.start(A)
        await cluster.elect([A], leader_epoch=3)
        assert (await produce(cluster.nodes[A].rm, 2, acks=1)).error_code == ErrorCode.NO_ERROR
        rm = cluster.nodes[A].rm
        assert rm.last_offset_for_leader_epoch(TP, 3, 3) == (ErrorCode.NO_ERROR, 3, 2)
        assert rm.last_offset_for_leader_epoch(TP, -1, 1) == (ErrorCode.NO_ERROR, 1, 0)  # below every epoch
        assert rm.last_offset_for_leader_epoch(TP, 2, 3)[0] == ErrorCode.FENCED_LEADER_EPOCH
        assert rm.last_offset_for_leader_epoch(TP, 4, 3)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert rm.last_offset_for_leader_epoch(("other", 0), -1, 3)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    _run(tmp_path, LONG_POLL, scenario)
