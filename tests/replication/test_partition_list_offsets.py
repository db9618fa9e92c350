"""ListOffsets at a partition's leader (Kafka's Partition.fetchOffsetForTimestamp): what a
consumer, a follower and a debugging client may see, and KIP-207's rule for a new leader whose
high watermark has not yet reached the start of its epoch: no "latest" (and no lookup past the
high watermark) for a client until it has, so the offsets a consumer sees never go back."""

from __future__ import annotations

from protocol.request_constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED
from replication.partition import Partition
from storage.log_append import AppendOrigin
from tests.replication.test_partition_isr import State
from tests.storage.helpers import make_batch

T0 = 1_000_000
#: The records' timestamps: record i has FIRST_TIMESTAMP + i.
FIRST_TIMESTAMP = 1_700_000_000_000


def _new_leader_behind_its_epoch_start(p: Partition) -> None:
    """Leader at epoch 1 with 10 records and a high watermark of 4; then a follower, then leader
    again at epoch 3 (its followers' positions unknown): the epoch starts at 10, the HW is 4."""
    assert p.make_leader(State(0, 1, [0, 1, 2]), T0)
    p.append_records_to_leader(make_batch(10, timestamp=FIRST_TIMESTAMP), AppendOrigin.CLIENT)
    for follower in (1, 2):
        p.update_follower_fetch_state(follower, 4, 0, p.log_end_offset, T0 + 1)
    assert p.high_watermark == 4
    p.make_follower(State(1, 2, [0, 1, 2]))
    assert p.make_leader(State(0, 3, [0, 1, 2]), T0 + 2)
    assert (p.leader_epoch_start_offset, p.high_watermark) == (10, 4)


def test_latest_is_not_available_to_clients_until_the_high_watermark_reaches_the_epoch_start(
        partition: Partition) -> None:
    _new_leader_behind_its_epoch_start(partition)
    assert partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, READ_UNCOMMITTED) is None
    assert partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, READ_COMMITTED) is None
    # A follower (or a debugging client) reads the log end, whatever the high watermark, and is
    # told the current leader epoch, though nothing is written in it yet.
    assert partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, None) == (-1, 10, 3)

    for follower in (1, 2):
        partition.update_follower_fetch_state(follower, 10, 0, partition.log_end_offset, T0 + 3)
    assert partition.high_watermark == 10
    assert partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, READ_UNCOMMITTED) == (-1, 10, 3)


def test_lookups_below_the_high_watermark_stay_available_to_a_lagging_leader(partition: Partition) -> None:
    _new_leader_behind_its_epoch_start(partition)
    assert partition.fetch_offset_for_timestamp(EARLIEST_TIMESTAMP, READ_UNCOMMITTED) == (-1, 0, 1)
    assert partition.fetch_offset_for_timestamp(FIRST_TIMESTAMP + 2, READ_UNCOMMITTED) == (
        FIRST_TIMESTAMP + 2, 2, 1)
    # Found at or past the high watermark, or not found at all: not available yet.
    assert partition.fetch_offset_for_timestamp(FIRST_TIMESTAMP + 7, READ_UNCOMMITTED) is None
    assert partition.fetch_offset_for_timestamp(FIRST_TIMESTAMP + 100, READ_UNCOMMITTED) is None
    assert partition.fetch_offset_for_timestamp(FIRST_TIMESTAMP + 7, None) == (FIRST_TIMESTAMP + 7, 7, 1)


def test_a_leader_caught_up_to_its_epoch_start_answers_as_before(partition: Partition) -> None:
    assert partition.make_leader(State(0, 1, [0, 1, 2]), T0)
    partition.append_records_to_leader(make_batch(10, timestamp=FIRST_TIMESTAMP), AppendOrigin.CLIENT)
    assert partition.high_watermark == 0  # the epoch started at 0: nothing lags
    assert partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, READ_UNCOMMITTED) == (-1, 0, 1)
    assert partition.fetch_offset_for_timestamp(FIRST_TIMESTAMP + 7, READ_UNCOMMITTED) == (-1, -1, -1)
