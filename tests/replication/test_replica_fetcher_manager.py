"""Which fetcher follows which partition: Kafka's getFetcherId over Java's String hash."""

from __future__ import annotations

from replication.replica_fetcher_manager import fetcher_id, java_string_hash


def test_java_string_hash() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("t") == 116
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Java's famous Integer.MIN_VALUE hash
    assert java_string_hash("é") == 233 and java_string_hash("😀") == 31 * 0xD83D + 0xDE00  # UTF-16 units


def test_fetcher_id_spreads_partitions_as_kafka_does() -> None:
    assert fetcher_id(("t", 0), 1) == 0
    assert [fetcher_id(("t", p), 3) for p in range(6)] == [(31 * 116 + p) % 3 for p in range(6)]
    # 31 * hash + partition overflowing to Integer.MIN_VALUE counts as 0 (Kafka's Utils.abs).
    # (31 * MIN_VALUE is MIN_VALUE again; a plain abs would give 2**31 % 7 == 2.)
    assert fetcher_id(("polygenelubricants", 0), 7) == 0
    ids = {fetcher_id((topic, p), 4) for topic in ("a", "b", "orders") for p in range(8)}
    assert ids == {0, 1, 2, 3}
