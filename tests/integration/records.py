"""The records the client matrix produces, and the check of what came back.

Every record's value starts with its sequence number, so a consumed record
tells which produced record it is: the check needs no client-specific
bookkeeping and finds duplicates, losses, reordering within a partition and
any altered key, value, header or timestamp.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

KEYS = 997  # prime, so keys do not line up with partition counts
#: A compressible but not constant tail, so every codec has real work to do.
FILLER = b"-pafka-" * 6


@dataclass(frozen=True)
class Produced:
    seq: int
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def make_records(count: int, base_timestamp_ms: int, per_record_headers: bool = True) -> list[Produced]:
    records = []
    for seq in range(count):
        value = b"%08d" % seq + FILLER + bytes([65 + seq % 26]) * (seq % 17)
        if per_record_headers:
            headers = (("seq", b"%d" % seq), ("origin", b"pafka-tests"), ("empty", b""))
        else:
            headers = CONSTANT_HEADERS
        records.append(Produced(seq, b"key-%d" % (seq % KEYS), value, headers, base_timestamp_ms + seq))
    return records


#: Headers for clients that can only set the same headers on every record (kcat).
CONSTANT_HEADERS = (("origin", b"pafka-tests"), ("codec-test", b"yes"))


def seq_of(value: bytes) -> int:
    return int(value[:8])


def check_consumed(produced: list[Produced], consumed: list[Consumed], exact_timestamps: bool = True,
                   timestamp_window: tuple[int, int] | None = None) -> None:
    """Every record exactly once, in order per partition, with equal fields."""
    by_seq = {r.seq: r for r in produced}
    seen: dict[int, Consumed] = {}
    for record in consumed:
        seq = seq_of(record.value)
        assert seq not in seen, f"record {seq} consumed twice: {seen[seq]} and {record}"
        seen[seq] = record
    missing = sorted(set(by_seq) - set(seen))
    assert not missing, f"{len(missing)} records never consumed, first {missing[:10]}"
    assert len(consumed) == len(produced)

    per_partition: dict[int, list[Consumed]] = defaultdict(list)
    key_partition: dict[bytes | None, int] = {}
    for record in consumed:
        per_partition[record.partition].append(record)
        assert key_partition.setdefault(record.key, record.partition) == record.partition, \
            f"key {record.key!r} found in two partitions"
    for partition, records in per_partition.items():
        offsets = [r.offset for r in records]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), f"partition {partition} offsets"
        seqs = [seq_of(r.value) for r in records]
        assert seqs == sorted(seqs), f"partition {partition} out of production order"

    for seq, record in seen.items():
        want = by_seq[seq]
        assert record.key == want.key, (seq, record.key, want.key)
        assert record.value == want.value, (seq, record.value, want.value)
        assert record.headers == want.headers, (seq, record.headers, want.headers)
        if exact_timestamps:
            assert record.timestamp_ms == want.timestamp_ms, (seq, record.timestamp_ms, want.timestamp_ms)
        elif timestamp_window is not None:
            low, high = timestamp_window
            assert low <= record.timestamp_ms <= high, (seq, record.timestamp_ms, timestamp_window)
