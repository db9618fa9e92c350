"""Reads bounded by the high watermark: the bound's position comes from the last append
when the HW is the log end, from the index otherwise, and truncation forgets it."""

from __future__ import annotations

import time
from pathlib import Path

from protocol.record_batch import iter_batch_headers
from storage.log import FetchIsolation, Log
from storage.log_config import LogConfig
from tests.storage.helpers import make_batch


def _offsets(log: Log, offset: int) -> tuple[list[int], int | None]:
    info = log.read(offset, 1 << 20, isolation=FetchIsolation.HIGH_WATERMARK)
    if info.records is None:
        return [], info.next_offset
    data = info.records.read_bytes()
    return [h.base_offset for _, h in iter_batch_headers(data)], info.next_offset


def test_reads_stop_at_the_high_watermark_whether_or_not_it_is_the_log_end(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), had_clean_shutdown=True)
    now = int(time.time() * 1000)
    try:
        for seed in range(3):
            log.append_as_leader(make_batch(5, timestamp=now, seed=seed), 0)
        log.update_high_watermark(log.log_end_offset)
        assert _offsets(log, 0) == ([0, 5, 10], 15)
        assert _offsets(log, 5) == ([5, 10], 15)

        log.append_as_leader(make_batch(5, timestamp=now, seed=3), 0)  # beyond the HW until it moves
        assert _offsets(log, 0) == ([0, 5, 10], 15)
        log.update_high_watermark(log.log_end_offset)
        assert _offsets(log, 10) == ([10, 15], 20)

        log.truncate_to(10)  # a follower's truncation: the log end moves back
        log.update_high_watermark(log.log_end_offset)
        assert _offsets(log, 0) == ([0, 5], 10)
        log.append_as_leader(make_batch(2, timestamp=now, seed=4), 0)
        log.update_high_watermark(log.log_end_offset)
        assert _offsets(log, 5) == ([5, 10], 12)
    finally:
        log.close()


def test_a_consumer_reading_on_from_the_last_read_gets_every_batch_once(tmp_path: Path) -> None:
    """The next read starts where the last one ended (no index lookup); any other offset,
    and any read after a truncation, still finds its batch through the index."""
    log = Log.open(tmp_path / "t-0", LogConfig(), had_clean_shutdown=True)
    now = int(time.time() * 1000)
    batch_size = len(make_batch(5, timestamp=now, value_size=300))
    try:
        for seed in range(10):
            log.append_as_leader(make_batch(5, timestamp=now, value_size=300, seed=seed), 0)
        log.update_high_watermark(log.log_end_offset)

        def read_through(start: int) -> list[int]:
            seen, offset = [], start
            while offset < log.high_watermark:
                info = log.read(offset, 2 * batch_size + 10, isolation=FetchIsolation.HIGH_WATERMARK)
                seen += [h.base_offset for _, h in iter_batch_headers(info.records.read_bytes())]
                offset = info.next_offset
            return seen

        assert read_through(0) == list(range(0, 50, 5))
        assert _offsets(log, 7)[0][0] == 5  # mid-batch: the batch holding it
        assert read_through(20) == list(range(20, 50, 5))

        # The last read ended at offset 50. Truncate, then batches of other sizes
        # where the old ones were: offset 50 is now elsewhere in the file.
        log.truncate_to(20)
        for seed in range(20):
            log.append_as_leader(make_batch(2, timestamp=now, value_size=700, seed=seed), 0)
        log.update_high_watermark(log.log_end_offset)
        assert _offsets(log, 50)[0][0] == 50
        assert read_through(0) == list(range(0, 20, 5)) + list(range(20, 60, 2))
    finally:
        log.close()
