"""Retention: by time (largest timestamp per segment), by size, by log start offset
(DeleteRecords); the active segment is never deleted; delayed file deletion."""

from __future__ import annotations

import pytest

from storage.errors import OffsetOutOfRangeError
from storage.log import Log
from storage.log_config import LogConfig
from tests.storage.helpers import make_batch

NOW = 1_700_000_000_000
HOUR = 3_600_000


def _log(path, **props) -> Log:
    config = LogConfig.model_validate({"segment.bytes": 1000, "file.delete.delay.ms": 60_000,
                                       **{k.replace("_", "."): v for k, v in props.items()}})
    return Log.open(path / "t-0", config)


def _fill(log: Log, hours: list[int]) -> None:
    """One batch per entry, timestamped that many hours before NOW; ~4 batches a segment."""
    for h in hours:
        log.append_as_leader(make_batch(1, value_size=150, timestamp=NOW - h * HOUR), 0, now=NOW)
    log.update_high_watermark(log.log_end_offset)


def test_time_retention_judges_each_segments_largest_timestamp(checked_tmp_path) -> None:
    log = _log(checked_tmp_path, retention_ms=10 * HOUR)
    # Segment 0 holds 30h..27h; segment 1 holds 26h,25h,24h and 1h (its largest is recent).
    _fill(log, [30, 29, 28, 27, 26, 25, 24, 1, 5, 5, 5, 5])
    bases = [s.base_offset for s in log.segments]
    assert bases[:3] == [0, 4, 8]
    assert log.delete_old_segments(now=NOW) == 1
    assert [s.base_offset for s in log.segments] == bases[1:]
    assert log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    # The deleted segment's files wait as .deleted for file.delete.delay.ms.
    deleted = sorted(p.name for p in log.dir.glob("*.deleted"))
    assert deleted == ["00000000000000000000.index.deleted", "00000000000000000000.log.deleted",
                       "00000000000000000000.timeindex.deleted"]
    assert log.delete_pending_segments(now=NOW + 59_999) == 0
    assert log.delete_pending_segments(now=NOW + 60_000) == 1
    assert not list(log.dir.glob("*.deleted"))
    log.close()


def test_everything_expired_rolls_first_and_keeps_an_empty_active_segment(checked_tmp_path) -> None:
    log = _log(checked_tmp_path, retention_ms=HOUR)
    _fill(log, [9, 8, 7, 6, 5, 4])
    end = log.log_end_offset
    assert log.delete_old_segments(now=NOW) == 2
    assert [s.base_offset for s in log.segments] == [end]
    assert log.active_segment.size == 0 and log.log_start_offset == end == log.log_end_offset
    assert log.append_as_leader(make_batch(1, timestamp=NOW), 0, now=NOW).first_offset == end
    log.close()


def test_nothing_above_the_high_watermark_is_deleted(checked_tmp_path) -> None:
    log = _log(checked_tmp_path, retention_ms=HOUR)
    _fill(log, [9, 9, 9, 9, 9, 9, 9, 9, 9])
    log.update_high_watermark(5)
    assert log.delete_old_segments(now=NOW) == 1  # only segment [0, 4) lies below the HW
    assert log.log_start_offset == 4
    log.close()


def test_size_retention(checked_tmp_path) -> None:
    log = _log(checked_tmp_path, retention_bytes=1500)
    _fill(log, [0] * 14)
    sizes = [s.size for s in log.segments]
    total = sum(sizes)
    # Kafka deletes the oldest segments while what remains stays >= retention.bytes.
    expected, remaining = 0, total
    while remaining - sizes[expected] >= 1500:
        remaining -= sizes[expected]
        expected += 1
    assert expected >= 1
    assert log.delete_old_segments(now=NOW) == expected
    assert log.size == remaining >= 1500
    assert log.size - log.segments.values()[0].size < 1500
    log.close()


def test_delete_records_moves_the_log_start_offset(checked_tmp_path) -> None:
    log = _log(checked_tmp_path, retention_ms=-1)
    _fill(log, [1] * 14)
    assert log.delete_records(6, now=NOW) == 6
    assert next(s.base_offset for s in log.segments) == 4  # segment [4, 8) still holds offset 6
    info = log.read(6, 10**6)
    assert info.records.position > 0  # the batch holding offset 6
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(log.log_end_offset + 1)
    assert log.fetch_offset_by_timestamp(-2).offset == 6
    assert log.delete_old_segments(now=NOW) == 0  # retention.ms=-1: nothing else goes
    log.close()


def test_compact_only_logs_are_not_deleted_by_time(checked_tmp_path) -> None:
    log = _log(checked_tmp_path, retention_ms=HOUR, cleanup_policy="compact")
    _fill(log, [9] * 10)
    assert log.delete_old_segments(now=NOW) == 0
    log.close()
