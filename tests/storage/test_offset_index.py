"""OffsetIndex: append, binary-search lookups, truncation, trimming, reopen, sanity."""

from __future__ import annotations

import pytest

from storage.abstract_index import AbstractIndex
from storage.errors import CorruptIndexError
from storage.offset_index import OffsetIndex, OffsetPosition


def test_lookup_finds_largest_entry_at_or_below(tmp_path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, max_index_size=800)
    for i in range(1, 51):
        index.append(100 + i * 10, i * 1000)
    assert index.entries == 50 and index.max_entries == 100
    assert index.lookup(99) == OffsetPosition(100, 0)   # before the first entry
    assert index.lookup(109) == OffsetPosition(100, 0)
    assert index.lookup(110) == OffsetPosition(110, 1000)
    assert index.lookup(255) == OffsetPosition(250, 15000)
    assert index.lookup(10**9) == OffsetPosition(600, 50000)
    assert index.lookup_by_position(15999) == OffsetPosition(250, 15000)
    assert index.lookup_by_position(999) == OffsetPosition(100, 0)
    index.close()


def test_entries_are_big_endian_relative_offset_and_position(tmp_path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, max_index_size=80)
    index.append(105, 4242)
    index.close()
    assert path.read_bytes() == (5).to_bytes(4, "big") + (4242).to_bytes(4, "big")


def test_preallocated_then_trimmed_and_reopened(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=1003)
    assert path.stat().st_size == 1000  # rounded down to whole entries
    for i in range(1, 11):
        index.append(i * 3, i * 100)
    index.close()
    assert path.stat().st_size == 80
    reopened = OffsetIndex(path, 0, max_index_size=1000)
    assert reopened.entries == 10 and reopened.last_offset == 30
    assert reopened.lookup(17) == OffsetPosition(15, 500)
    reopened.resize(1000)
    assert reopened.max_entries == 125 and reopened.entries == 10
    reopened.append(33, 1100)
    assert reopened.lookup(40) == OffsetPosition(33, 1100)
    reopened.close()


def test_zero_tail_of_a_crashed_active_index_is_not_entries(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=800)
    index.append(5, 100)
    index.append(9, 300)
    index.flush()
    index.close_handler()  # a crash: still preallocated
    assert path.stat().st_size == 800
    reopened = OffsetIndex(path, 0, max_index_size=800)
    assert reopened.entries == 2 and reopened.last_offset == 9
    reopened.close()


@pytest.fixture
def probes(monkeypatch) -> list[int]:
    """The slots an index reads while counting its entries at open."""
    seen: list[int] = []
    probe = AbstractIndex._is_zero_slot
    monkeypatch.setattr(AbstractIndex, "_is_zero_slot",
                        lambda self, *a: seen.append(a[-1]) or probe(self, *a))
    return seen


@pytest.mark.parametrize("written", [0, 1, 2, 777, 1000])
def test_crashed_preallocated_index_opens_by_binary_search_over_its_zero_tail(tmp_path, probes, written) -> None:
    # 10 MiB as segment.index.bytes: 1,310,720 slots, of which only ~log2 are read.
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=10 << 20)
    for i in range(1, written + 1):
        index.append(i * 2, i * 64)
    if written > 1:
        index.truncate_to(written * 2)  # drops the last entry, zeroing its slot
        written -= 1
    index.close_handler()  # a crash: still preallocated
    probes.clear()
    reopened = OffsetIndex(path, 0, max_index_size=10 << 20)
    assert reopened.entries == written
    assert reopened.last_offset == written * 2
    assert len(probes) <= 22
    reopened.close_handler()


def read_rss_file_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssFile:"):
                return int(line.split()[1])
    raise KeyError("RssFile")


def test_crashed_preallocated_indexes_open_without_mapping_their_pages(tmp_path) -> None:
    # Probing slots through the mapping faulted in ~1.4 MB per 10 MiB index (fault-around);
    # 50 crashed indexes must now cost well under that in resident file pages.
    paths = []
    for n in range(50):
        path = tmp_path / f"{n:020d}.index"
        index = OffsetIndex(path, n, max_index_size=10 << 20)
        index.append(n + 1, 64)
        index.close_handler()  # a crash: still preallocated
        paths.append(path)
    before = read_rss_file_kb()
    reopened = [OffsetIndex(path, n, max_index_size=10 << 20) for n, path in enumerate(paths)]
    grown_kb = read_rss_file_kb() - before
    assert all(index.entries == 1 for index in reopened)
    for index in reopened:
        index.close()
    assert grown_kb < 50 * 256, f"{grown_kb} kB of index pages mapped in to open 50 crashed indexes"


def test_trimmed_index_count_comes_from_its_size(tmp_path, probes) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=800)
    for i in range(1, 101):  # full: no zero tail at all
        index.append(i, i * 10)
    index.close()
    probes.clear()
    reopened = OffsetIndex(path, 0, max_index_size=800)
    assert reopened.entries == 100 and reopened.last_offset == 100
    assert probes == [99]
    reopened.close()


def test_truncate_to_removes_entries_at_or_after(tmp_path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=800)
    for i in range(1, 11):
        index.append(i * 10, i * 100)
    index.truncate_to(50)
    assert index.entries == 4 and index.last_offset == 40
    index.truncate_to(45)
    assert index.entries == 4
    index.truncate_to(0)
    assert index.entries == 0 and index.last_offset == 0
    index.close()


def test_rejects_non_increasing_offsets_full_index_and_overflow(tmp_path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=16)
    index.append(1, 10)
    with pytest.raises(CorruptIndexError):
        index.append(1, 20)
    index.append(2, 20)
    assert index.is_full()
    with pytest.raises(CorruptIndexError):
        index.append(3, 30)
    assert not index.can_append_offset(2**31)
    index.close()


def test_sanity_check(tmp_path) -> None:
    path = tmp_path / "00000000000000000010.index"
    path.write_bytes(b"\x00\x00\x00\x00\x00\x00\x00\x07")  # relative offset 0 -> last offset == base
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 10).sanity_check()
    path.write_bytes(b"\x00\x00\x00\x01\x00\x00\x00\x07\x00")  # not a multiple of 8
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 10).sanity_check()
    path.write_bytes(b"\x00\x00\x00\x01\x00\x00\x10\x00")
    OffsetIndex(path, 10).sanity_check(log_size=5000)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 10).sanity_check(log_size=100)  # points past the log


def test_entries_opening_a_page_of_a_preallocated_index_are_written_with_pwrite(tmp_path, index_pwrites) -> None:
    # A store through the mapping into a hole of the sparse file takes a block-allocating
    # write fault (~2 ms on ext4); pwrite allocates the block for a few microseconds.
    from storage.abstract_index import PAGE_SIZE as page

    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=10 << 20)
    for i in range(1, 1101):
        index.append(i * 3, i * 100)
    assert index_pwrites == [0, page, 2 * page]  # 1,100 entries of 8 bytes: three pages
    assert [index.lookup(i * 3 + 1) for i in (1, 511, 512, 513, 1100)] == [
        (i * 3, i * 100) for i in (1, 511, 512, 513, 1100)]
    index.close()
    reopened = OffsetIndex(path, 0, max_index_size=10 << 20)
    assert reopened.entries == 1100 and reopened.lookup(1537) == (1536, 51200)
    reopened.close()


def test_counting_a_crashed_index_reads_nothing_of_its_sparse_tail(tmp_path, probes) -> None:
    # Reading holes of the preallocated file fills the page cache with zero pages that the
    # first lookups then map in around the entries (fault-around, up to 64 kB a fault).
    paths = []
    for n in range(50):
        path = tmp_path / f"{n:020d}.index"
        index = OffsetIndex(path, n, max_index_size=10 << 20)
        for i in range(1, 4):
            index.append(n + i, 64 * i)
        index.close_handler()  # a crash: still preallocated
        paths.append(path)
    probes.clear()
    before = read_rss_file_kb()
    reopened = [OffsetIndex(path, n, max_index_size=10 << 20) for n, path in enumerate(paths)]
    assert all(index.lookup(n + 2) == (n + 2, 128) for n, index in enumerate(reopened))
    grown_kb = read_rss_file_kb() - before
    for index in reopened:
        index.close()
    assert all(slot * 8 < 4096 for slot in probes), "a slot in the file's hole was read"
    assert grown_kb < 50 * 12, f"{grown_kb} kB of index pages mapped in by 50 reopened crashed indexes"
