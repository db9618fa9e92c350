"""TimeIndex: max-timestamp entries, lookups, truncation, the slot kept for the roll."""

from __future__ import annotations

import pytest

from storage.errors import CorruptIndexError
from storage.time_index import TimeIndex, TimestampOffset


def test_only_new_maximum_timestamps_are_recorded(tmp_path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, max_index_size=120)
    index.maybe_append(1000, 5)
    index.maybe_append(1000, 9)   # not a new maximum
    index.maybe_append(2000, 12)
    assert index.entries == 2
    assert index.last_entry == TimestampOffset(2000, 12)
    with pytest.raises(CorruptIndexError):
        index.maybe_append(1500, 20)  # timestamps never go back
    with pytest.raises(CorruptIndexError):
        index.maybe_append(3000, 11)  # nor offsets
    index.close()


def test_lookup(tmp_path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000050.timeindex", 50, max_index_size=1200)
    for i in range(1, 21):
        index.maybe_append(i * 100, 50 + i * 2)
    assert index.lookup(99) == TimestampOffset(-1, 50)
    assert index.lookup(100) == TimestampOffset(100, 52)
    assert index.lookup(1050) == TimestampOffset(1000, 70)
    assert index.lookup(10**12) == TimestampOffset(2000, 90)
    index.close()


def test_file_format_and_trim(tmp_path) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    index = TimeIndex(path, 100, max_index_size=1000)
    assert path.stat().st_size == 996
    index.maybe_append(1_700_000_000_000, 107)
    index.close()
    assert path.read_bytes() == (1_700_000_000_000).to_bytes(8, "big") + (7).to_bytes(4, "big")


def test_full_keeps_one_slot_for_the_roll_entry(tmp_path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, max_index_size=36)
    index.maybe_append(1, 1)
    index.maybe_append(2, 2)
    assert index.is_full()
    with pytest.raises(CorruptIndexError):
        index.maybe_append(3, 3)
    index.maybe_append(3, 3, skip_full_check=True)
    assert index.entries == 3
    index.close()


def test_crashed_preallocated_time_index_reopens_with_its_entries(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(path, 0, max_index_size=10 << 20)
    for i in range(1, 301):
        index.maybe_append(1_700_000_000_000 + i, i * 3)
    index.truncate_to(600)  # drops the entries from offset 600 on, zeroing their slots
    index.close_handler()  # a crash: still preallocated
    reopened = TimeIndex(path, 0, max_index_size=10 << 20)
    assert reopened.entries == 199
    assert reopened.last_entry == TimestampOffset(1_700_000_000_199, 597)
    reopened.close()


def test_truncate_to(tmp_path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, max_index_size=1200)
    for i in range(1, 11):
        index.maybe_append(i * 10, i * 5)
    index.truncate_to(26)
    assert index.entries == 5 and index.last_entry == TimestampOffset(50, 25)
    index.truncate_to(0)
    assert index.entries == 0 and index.last_entry == TimestampOffset(-1, 0)
    index.close()


def test_sanity_check(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(path, 0, max_index_size=120)
    index.maybe_append(500, 3)
    index.close()
    TimeIndex(path, 0).sanity_check()
    path.write_bytes(path.read_bytes() + b"\x01")
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, 0).sanity_check()


def test_time_index_entries_straddling_a_page_are_written_with_pwrite(tmp_path, index_pwrites) -> None:
    from storage.abstract_index import PAGE_SIZE as page

    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(path, 0, max_index_size=1 << 20)
    for i in range(1, 701):  # 12-byte entries: 8,400 bytes, crossing two page boundaries
        index.maybe_append(1000 + i, i)
    page_writes = [slot * 12 for slot in range(700)
                   if (slot * 12) // page != (slot * 12 + 11) // page or (slot * 12) % page == 0]
    assert index_pwrites == [0, *page_writes[1:]]
    assert len(index_pwrites) == 3
    assert index.lookup(1000 + 342) == (1000 + 342, 342)
    index.close()
    reopened = TimeIndex(path, 0, max_index_size=1 << 20)
    assert reopened.entries == 700 and reopened.lookup(1000 + 699) == (1000 + 699, 699)
    reopened.close()
