"""LogSegment: append and indexing, reads of whole batches, timestamps, truncation, recovery."""

from __future__ import annotations

from pathlib import Path

from protocol.record_batch import iter_batch_headers, patch_base_offset
from storage.log_config import LogConfig
from storage.log_segment import LogSegment
from tests.storage.helpers import make_batch

CONFIG = LogConfig.model_validate({"index.interval.bytes": 300, "segment.index.bytes": 4096})


def _append(segment: LogSegment, offset: int, count: int, timestamp: int, value_size: int = 100) -> bytearray:
    batch = make_batch(count, timestamp=timestamp, value_size=value_size, seed=offset)
    patch_base_offset(batch, 0, offset)
    segment.append(batch, list(iter_batch_headers(batch)))
    return batch


def _filled(tmp: Path, base: int = 100, batches: int = 40) -> tuple[LogSegment, list[bytes]]:
    segment = LogSegment.open(tmp, base, CONFIG, create=True)
    written = [bytes(_append(segment, base + i * 3, 3, 10_000 + i * 10)) for i in range(batches)]
    return segment, written


def test_files_are_named_by_the_20_digit_base_offset(checked_tmp_path) -> None:
    segment = LogSegment.open(checked_tmp_path, 1234, CONFIG, create=True)
    names = sorted(p.name for p in checked_tmp_path.iterdir())
    assert names == ["00000000000000001234.index", "00000000000000001234.log", "00000000000000001234.timeindex"]
    segment.close()


def test_append_writes_bytes_as_given_and_indexes_sparsely(checked_tmp_path) -> None:
    segment, written = _filled(checked_tmp_path)
    assert segment.log.path.read_bytes() == b"".join(written)
    batch_size = len(written[0])
    # An entry for a batch once more than index.interval.bytes were appended since the last one.
    expected, since = [], 0
    for i in range(len(written)):
        if since > 300:
            expected.append(i * batch_size)
            since = 0
        since += batch_size
    assert [segment.offset_index.entry(s).position for s in range(segment.offset_index.entries)] == expected
    for slot in range(segment.offset_index.entries):
        entry = segment.offset_index.entry(slot)
        assert entry.position % batch_size == 0
        assert entry.offset == 100 + (entry.position // batch_size) * 3 + 2  # the batch's last offset
    assert segment.read_next_offset() == 100 + 40 * 3
    segment.close()


def test_read_starts_at_the_batch_containing_the_offset(checked_tmp_path) -> None:
    segment, written = _filled(checked_tmp_path)
    size = len(written[0])
    info = segment.read(131, max_size=10 * size)
    assert info is not None and info.records is not None
    assert info.records.position == 10 * size  # offsets 130..132 are batch 10
    assert info.records.size == 10 * size
    assert info.records.read_bytes() == b"".join(written[10:20])
    # A byte limit inside a batch returns only whole batches.
    assert segment.read(131, max_size=int(2.5 * size)).records.size == 2 * size
    # KIP-74: at least one whole batch even when it is larger than max_size.
    assert segment.read(131, max_size=1, min_one_message=True).records.size == size
    assert segment.read(131, max_size=1, min_one_message=False).records.size == 0
    # max_position (the HW's batch) bounds the read.
    assert segment.read(131, max_size=10**6, max_position=12 * size).records.size == 2 * size
    assert segment.read(100 + 40 * 3, max_size=100) is None  # past the segment
    segment.close()


def test_find_offset_by_timestamp(checked_tmp_path) -> None:
    segment, _ = _filled(checked_tmp_path)
    _position, header = segment.find_offset_by_timestamp(10_155, starting_offset=0)
    assert header.max_timestamp >= 10_155 and header.base_offset == 100 + 16 * 3
    assert segment.find_offset_by_timestamp(99_999, 0) is None
    assert segment.max_timestamp_so_far == 10_000 + 39 * 10 + 2
    segment.close()


def test_truncate_to_cuts_at_the_batch_containing_the_offset(checked_tmp_path) -> None:
    segment, written = _filled(checked_tmp_path)
    removed = segment.truncate_to(161)  # inside batch 20 (160..162)
    assert removed == 20 * len(written[0])
    assert segment.size == 20 * len(written[0])
    assert segment.read_next_offset() == 160
    assert segment.offset_index.last_offset < 160
    assert segment.time_index.last_entry.offset < 160
    assert segment.max_timestamp_so_far == 10_000 + 19 * 10 + 2
    segment.close()


def test_close_trims_indexes_and_records_the_final_max_timestamp(checked_tmp_path) -> None:
    segment, _ = _filled(checked_tmp_path)
    segment.close()
    reopened = LogSegment.open(checked_tmp_path, 100, CONFIG)
    assert reopened.offset_index.path.stat().st_size == reopened.offset_index.entries * 8
    assert reopened.time_index.last_entry.timestamp == 10_000 + 39 * 10 + 2
    assert reopened.read_next_offset() == 220
    reopened.close()


def test_recover_rebuilds_indexes_and_cuts_a_torn_tail(checked_tmp_path) -> None:
    segment, written = _filled(checked_tmp_path)
    expected_entries = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    segment.offset_index.truncate_to_entries(0)
    segment.log.append(written[0][:30])  # a torn write
    assert segment.recover() == 30
    assert [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)] == expected_entries
    assert segment.read_next_offset() == 220
    segment.close()


def test_should_roll(checked_tmp_path) -> None:
    config = LogConfig.model_validate({"segment.bytes": 1000, "segment.ms": 1000, "segment.index.bytes": 4096})
    segment = LogSegment.open(checked_tmp_path, 0, config, create=True, now_ms=0)
    assert not segment.should_roll(900, 5000, 0, now_ms=10**9, config=config)  # empty: never by time
    _append(segment, 0, 1, 5000, value_size=10)
    assert segment.should_roll(1000, 5000, 1, now_ms=0, config=config)       # size
    assert not segment.should_roll(10, 5500, 1, now_ms=0, config=config)
    assert segment.should_roll(10, 6001, 1, now_ms=0, config=config)          # record time vs first batch
    assert segment.should_roll(10, 5000, 2**31, now_ms=0, config=config)      # relative offset overflow
    segment.close()
