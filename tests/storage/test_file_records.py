"""FileRecords: positional appends, header scans and the chunked validating scan of recovery."""

from __future__ import annotations

import pytest

from protocol.errors import ProtocolError
from protocol.record_batch import iter_batch_headers, patch_base_offset
from storage.file_records import FileRecords
from tests.storage.helpers import make_batch


def _file(tmp_path, sizes=(10, 700, 30, 3000, 5, 5, 1200)) -> tuple[FileRecords, bytes]:
    records = FileRecords(tmp_path / "00000000000000000000.log", create=True)
    offset = 0
    for i, size in enumerate(sizes):
        batch = make_batch(2, value_size=size, seed=i)
        patch_base_offset(batch, 0, offset)
        offset += 2
        assert records.append(batch) == len(batch)
    return records, (tmp_path / "00000000000000000000.log").read_bytes()


@pytest.mark.parametrize("chunk", [64, 100, 1000, 4096, 1 << 20])
def test_scan_batches_matches_the_headers_whatever_the_chunk_size(checked_tmp_path, chunk: int) -> None:
    records, data = _file(checked_tmp_path)
    expected = list(iter_batch_headers(data))
    assert list(records.scan_batches(chunk)) == expected
    assert list(records.batch_headers()) == expected
    records.close()


@pytest.mark.parametrize("chunk", [64, 1000, 1 << 20])
def test_scan_batches_stops_at_the_first_bad_batch(tmp_path, chunk: int) -> None:
    records, data = _file(tmp_path)
    headers = list(iter_batch_headers(data))
    victim = headers[3][0]
    broken = bytearray(data)
    broken[victim + 200] ^= 0x40
    (tmp_path / "00000000000000000000.log").write_bytes(broken)
    scanned = list(FileRecords(tmp_path / "00000000000000000000.log").scan_batches(chunk))
    assert scanned[:3] == headers[:3]
    assert scanned[3][0] == victim and isinstance(scanned[3][1], ProtocolError)
    assert len(scanned) == 4
    # A torn tail: the last batch cut short.
    (tmp_path / "00000000000000000000.log").write_bytes(data[:-5])
    torn = list(FileRecords(tmp_path / "00000000000000000000.log").scan_batches(chunk))
    assert torn[-1][0] == headers[-1][0] and isinstance(torn[-1][1], ProtocolError)
    records.close()


def test_truncate_and_read(checked_tmp_path) -> None:
    records, data = _file(checked_tmp_path)
    headers = list(iter_batch_headers(data))
    assert records.search_for_offset(5, 0) == headers[2]
    assert records.search_for_offset(999, 0) is None
    assert records.truncate_to(headers[2][0]) == len(data) - headers[2][0]
    assert records.size == headers[2][0] and records.read(0, 10**6) == data[: headers[2][0]]
    with pytest.raises(ValueError):
        records.truncate_to(records.size + 1)
    records.close()
