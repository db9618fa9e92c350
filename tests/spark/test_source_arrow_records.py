"""The source's column-wise record decoder agrees with pafka's record decoder (no Spark needed)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from client.fetch_decoder import decode_fetched_records
from protocol import compression
from protocol.errors import CorruptRecordError
from protocol.records import Record, build_batch
from spark_jobs.arrow_records import decode_columns


def _random_records(rng: random.Random, base: int, n: int) -> list[Record]:
    records = []
    for i in range(n):
        key = None if rng.random() < 0.2 else rng.randbytes(rng.choice([0, 1, 5, 70, 200]))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 3, 100, 300, 20_000]))
        headers = [(f"h{j}", None if j == 2 else rng.randbytes(j * 3)) for j in range(rng.choice([0, 0, 1, 3]))]
        records.append(Record(base + i, 1_700_000_000_000 + rng.randrange(-10**6, 10**9), key, value, headers))
    return records


def _fetch_data(seed: int) -> bytes:
    rng = random.Random(seed)
    out = bytearray()
    offset = 0
    for b in range(12):
        n = rng.choice([1, 2, 50, 300])
        codec = rng.choice([compression.NONE, compression.NONE, compression.GZIP, compression.LZ4, compression.ZSTD,
                            compression.SNAPPY])
        records = _random_records(rng, offset, n)
        if b == 3:
            # A compacted batch: offsets with gaps.
            records = [r for r in records if r.offset % 3] or records[:1]
        ts_type = 1 if b == 5 else 0
        out += build_batch(records, base_offset=offset, compression=codec, timestamp_type=ts_type,
                           log_append_time=1_800_000_000_000 if ts_type else None,
                           last_offset_delta=n - 1)
        offset += n
    # A partial batch at the end, as a fetch cut at max_bytes returns.
    out += build_batch(_random_records(rng, offset, 10), base_offset=offset)[:-7]
    return bytes(out)


def _expected(data: bytes, fetch_offset: int, until: int) -> list[tuple]:
    batches, _ = decode_fetched_records(data, fetch_offset)
    return [
        (r.offset, r.timestamp, 1 if b.timestamp_type == "LogAppendTime" else 0, r.key, r.value, r.headers)
        for b in batches for r in b.records if r.offset < until
    ]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("window", [(0, 10**9), (7, 10**9), (120, 700), (0, 1)])
def test_columns_equal_record_decoder(seed: int, window: tuple[int, int]) -> None:
    data = _fetch_data(seed)
    fetch_offset, until = window
    columns, next_offset = decode_columns(data, fetch_offset, until, include_headers=True)
    want = _expected(data, fetch_offset, until)
    if not want:
        assert columns is None
        return
    assert columns is not None
    got = list(zip(columns.offsets.tolist(), columns.timestamps_ms.tolist(), columns.timestamp_types.tolist(),
                   columns.keys, columns.values, columns.headers, strict=True))
    assert got == want
    assert next_offset > fetch_offset


def test_headers_left_out_unless_asked() -> None:
    data = _fetch_data(1)
    columns, _ = decode_columns(data, 0, 10**9)
    assert columns is not None and columns.headers is None


def test_control_and_aborted_batches_are_not_shown() -> None:
    plain = build_batch([Record(0, 1, b"k", b"committed-before")], base_offset=0)
    aborted = build_batch([Record(1, 2, b"k", b"aborted")], base_offset=1, producer_id=7, producer_epoch=0,
                          is_transactional=True)
    marker = build_batch([Record(2, 3, None, b"\x00\x00\x00\x00\x00\x00")], base_offset=2, producer_id=7,
                         producer_epoch=0, is_transactional=True, is_control=True)
    after = build_batch([Record(3, 4, b"k", b"after")], base_offset=3)
    data = bytes(plain + aborted + marker + after)
    committed, next_offset = decode_columns(data, 0, 100, [SimpleNamespace(producer_id=7, first_offset=1)])
    assert committed is not None and committed.values == [b"committed-before", b"after"]
    assert next_offset == 4
    uncommitted, _ = decode_columns(data, 0, 100, None)
    assert uncommitted is not None and uncommitted.values == [b"committed-before", b"aborted", b"after"]


@pytest.mark.parametrize("damage", ["length", "key_length", "count"])
def test_malformed_records_raise(damage: str) -> None:
    records = [Record(i, 1000 + i, b"key", b"value-%d" % i) for i in range(5)]
    batch = bytearray(build_batch(records))
    if damage == "length":
        batch[61] = 0x02  # first record claims a 1-byte body
    elif damage == "key_length":
        batch[61 + 4] = 0x7E  # key length 63 runs past the record
    else:
        batch[57:61] = (9).to_bytes(4, "big")  # records count: more than the batch holds
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(batch), 0, 100, verify_crc=False)
