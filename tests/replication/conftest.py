"""Fixtures shared by the Partition tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from replication.partition import NO_EPOCH, NO_LEADER, Partition
from storage.log import Log
from storage.log_config import LogConfig

#: replica.lag.time.max.ms of the fixture's partition.
LAG = 1000


@pytest.fixture
def partition(tmp_path: Path) -> Iterator[Partition]:
    """Partition t-0 on broker 0 (replicas 0, 1, 2), neither leader nor follower yet."""
    log = Log.open(tmp_path / "t-0", LogConfig(), had_clean_shutdown=True)
    p = Partition("t", 0, uuid.uuid4(), log, 0, [0, 1, 2], NO_EPOCH)
    p.leader_id, p.leader_epoch_start_offset = NO_LEADER, None
    p.replica_lag_time_max_ms = LAG
    yield p
    log.close()
