"""Chaos, CI-sized: ten random faults (``testing.chaos``: SIGKILL and restart of any broker, the
controller included; SIGSTOP past the ZooKeeper session timeout; a black-holed link between two
brokers; a leader cut from ZooKeeper but not from its clients) on three brokers, RF 3,
``min.insync.replicas=2``, with idempotent acks=all producers and consumers running throughout.
Afterwards nothing acknowledged is lost, duplicated, moved or reordered, no consumer read a value
the final log does not hold at that offset, every replica holds the same batches, no partition
is offline and no consumer is stuck. The seed is printed; ``PAFKA_CHAOS_SEED`` replays a run's
faults (``python -m testing.chaos --faults 100 --seed S`` is the long run, docs/chaos.md)."""

from __future__ import annotations

import os
import random

import pytest

from testing import chaos
from testing.chaos_disks import disks_available

FAULTS = 10


def test_ten_random_faults_lose_nothing_acknowledged() -> None:
    seed = int(os.environ.get("PAFKA_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
    report = chaos.run(FAULTS, seed, progress=print, kinds=chaos.BASE_FAULTS)
    print("\n".join(report.lines()))
    assert len(report.faults) == FAULTS, report.lines()
    assert report.counts["acked"] > 0
    assert not report.findings, "\n".join(report.lines())


@pytest.mark.skipif(disks_available() is not None, reason=disks_available() or "")
def test_each_disk_fault_loses_nothing_acknowledged() -> None:
    """Every broker's only log dir on a tmpfs under the EIO passthrough: one ``disk-full`` (the
    broker halts, the ballast goes, it starts again), then one ``disk-eio``; the same checks."""
    seed = int(os.environ.get("PAFKA_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
    report = chaos.run(len(chaos.DISK_FAULTS), seed, progress=print, kinds=chaos.DISK_FAULTS, in_turn=True)
    print("\n".join(report.lines()))
    assert [f.split()[0] for f in report.faults] == ["fill", "EIO"], report.lines()
    assert "halted, started again" in report.faults[0], report.lines()
    assert report.counts["acked"] > 0
    assert not report.findings, "\n".join(report.lines())
