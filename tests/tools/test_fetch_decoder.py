"""Records out of fetched partition data: offsets, partial batches, control and aborted batches."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from client.fetch_decoder import CREATE_TIME, LOG_APPEND_TIME, decode_fetched_records
from protocol import compression
from protocol.control_records import build_end_txn_marker_batch
from protocol.errors import CorruptRecordError
from protocol.records import Record, build_batch


@dataclass
class Aborted:
    producer_id: int
    first_offset: int


def _batch(base: int, count: int, codec: int = compression.NONE, **kw) -> bytearray:  # type: ignore[no-untyped-def]
    records = [Record(base + i, 1000 + i, b"k%d" % (base + i), b"v%d" % (base + i), [("h", b"x")]) for i in range(count)]
    return build_batch(records, base_offset=base, compression=codec, **kw)


def _offsets(batches) -> list[int]:  # type: ignore[no-untyped-def]
    return [r.offset for b in batches for r in b.records]


@pytest.mark.parametrize("codec", sorted(compression.CODEC_NAMES))
def test_skips_records_before_the_fetch_offset(codec: int) -> None:
    data = _batch(0, 5, codec) + _batch(5, 5, codec)
    batches, next_offset = decode_fetched_records(bytes(data), 3)
    assert _offsets(batches) == [3, 4, 5, 6, 7, 8, 9]
    assert next_offset == 10
    assert batches[0].records[0].key == b"k3" and batches[0].records[0].headers == [("h", b"x")]
    assert batches[0].timestamp_type == CREATE_TIME


def test_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    whole = _batch(0, 4) + _batch(4, 4)
    for cut in (1, 11, 30, len(_batch(4, 4)) - 1):
        data = bytes(whole[: len(whole) - cut])
        batches, next_offset = decode_fetched_records(data, 0)
        assert _offsets(batches) == [0, 1, 2, 3]
        assert next_offset == 4


def test_nothing_whole_keeps_the_fetch_offset() -> None:
    assert decode_fetched_records(bytes(_batch(7, 3)[:40]), 7) == ([], 7)
    assert decode_fetched_records(b"", 7) == ([], 7)


def test_control_batches_are_hidden_but_advance_the_offset() -> None:
    data = _batch(0, 2, producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
    data += build_end_txn_marker_batch(commit=True, producer_id=9, producer_epoch=0, coordinator_epoch=0, timestamp=5, base_offset=2)
    batches, next_offset = decode_fetched_records(bytes(data), 0)
    assert _offsets(batches) == [0, 1]
    assert next_offset == 3


def test_read_committed_drops_aborted_transactions() -> None:
    txn = {"producer_epoch": 0, "base_sequence": 0, "is_transactional": True}
    data = _batch(0, 2, producer_id=1, **txn)  # aborted
    data += _batch(2, 2, producer_id=2, **txn)  # committed
    data += build_end_txn_marker_batch(commit=False, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=5, base_offset=4)
    data += build_end_txn_marker_batch(commit=True, producer_id=2, producer_epoch=0, coordinator_epoch=0, timestamp=5, base_offset=5)
    data += _batch(6, 2, producer_id=1, **txn)  # a later transaction of producer 1, not aborted
    committed, next_offset = decode_fetched_records(bytes(data), 0, [Aborted(1, 0)])
    assert _offsets(committed) == [2, 3, 6, 7]
    assert next_offset == 8
    uncommitted, _ = decode_fetched_records(bytes(data), 0, None)
    assert _offsets(uncommitted) == [0, 1, 2, 3, 6, 7]


def test_log_append_time_batches_say_so() -> None:
    data = build_batch([Record(0, 5, None, b"v")], timestamp_type=1, log_append_time=99)
    batches, _ = decode_fetched_records(bytes(data), 0)
    assert batches[0].timestamp_type == LOG_APPEND_TIME
    assert batches[0].records[0].timestamp == 99


def test_crc_is_checked() -> None:
    data = bytearray(_batch(0, 3))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decode_fetched_records(bytes(data), 0)
