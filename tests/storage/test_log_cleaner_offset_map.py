"""The cleaner's key -> offset map."""

from __future__ import annotations

from storage.offset_map import BYTES_PER_ENTRY, OffsetMap


def test_latest_offset_per_key_wins_and_missing_keys_answer_minus_one() -> None:
    m = OffsetMap(memory=BYTES_PER_ENTRY * 100)
    for offset, key in enumerate([b"a", b"b", b"a", b"c", b"a"]):
        m.put(key, offset)
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c")) == (4, 1, 3)
    assert m.get(b"zzz") == -1
    assert m.size == 3 and m.latest_offset == 4
    m.update_latest_offset(10)
    m.update_latest_offset(7)
    assert m.latest_offset == 10
    m.clear()
    assert m.size == 0 and m.latest_offset == -1 and m.get(b"a") == -1


def test_capacity_follows_the_dedupe_buffer_size_and_load_factor() -> None:
    m = OffsetMap(memory=BYTES_PER_ENTRY * 100, load_factor=0.9)
    assert m.slots == 100 and m.max_desired_size == 90
    for i in range(89):
        m.put(b"k%d" % i, i)
    assert not m.is_full
    m.put(b"k89", 89)
    assert m.is_full and abs(m.utilization - 0.9) < 1e-9


def test_keys_of_any_length_and_buffer_type() -> None:
    m = OffsetMap(memory=BYTES_PER_ENTRY * 10)
    big = bytes(range(256)) * 4000
    m.put(memoryview(big), 5)
    m.put(bytearray(b""), 6)
    assert m.get(big) == 5 and m.get(b"") == 6
    assert m.get(big[:-1]) == -1
