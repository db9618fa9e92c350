"""``pafka dump-log``: batches, records, index entries, mismatches, sanity check."""

from __future__ import annotations

import struct

from click.testing import CliRunner

from storage.log import Log
from storage.log_config import LogConfig
from tests.storage.helpers import make_batch
from tools.cli import main

NOW = 1_700_000_000_000


def _segment(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig.model_validate({"index.interval.bytes": 100}))
    for i in range(6):
        log.append_as_leader(make_batch(2, timestamp=NOW + 10 * i, seed=i, value_size=40), leader_epoch=3, now=NOW)
    log.close()
    return tmp_path / "t-0" / "00000000000000000000"


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["dump-log", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_batches_and_records(checked_tmp_path) -> None:
    base = _segment(checked_tmp_path)
    out = _run("--files", f"{base}.log")
    lines = out.splitlines()
    assert lines[0] == f"Dumping {base}.log"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 "
                               "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false "
                               "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 "
                               f"CreateTime: {NOW + 1} size: ")
    assert lines[2].endswith("magic: 2 compresscodec: none crc: " + lines[2].split("crc: ")[1].split()[0] + " isvalid: true")
    assert len([line for line in lines if line.startswith("baseOffset:")]) == 6
    assert not any(line.startswith("| offset") for line in lines)
    deep = _run("--deep-iteration", "--files", f"{base}.log").splitlines()
    assert deep[3] == f"| offset: 0 CreateTime: {NOW} keySize: 1 valueSize: 40 sequence: -1 headerKeys: []"
    data = _run("--print-data-log", "--files", f"{base}.log").splitlines()
    assert data[4].startswith(f"| offset: 1 CreateTime: {NOW + 1} keySize: 1 valueSize: 40 sequence: -1 headerKeys: [] "
                              "key: k payload: 0:1:x")


def test_indexes_and_mismatches(tmp_path) -> None:
    base = _segment(tmp_path)
    out = _run("--files", f"{base}.index,{base}.timeindex").splitlines()
    entries = [line for line in out if line.startswith("offset: ")]
    assert entries and all("position: " in line for line in entries)
    assert not any("Mismatches" in line for line in out)
    assert any(line == f"timestamp: {NOW + 51} offset: 11" for line in out)  # the final max timestamp
    # An entry that does not point at a batch start is flagged.
    raw = bytearray((base.parent / (base.name + ".index")).read_bytes())
    struct.pack_into(">i", raw, 4, struct.unpack_from(">i", raw, 4)[0] + 1)
    (base.parent / (base.name + ".index")).write_bytes(raw)
    flagged = _run("--files", f"{base}.index").splitlines()
    assert f"Mismatches in :{base.resolve()}.index" in flagged
    assert any(line.startswith("  Index offset: ") and "is not the start of a batch" in line for line in flagged)
    assert _run("--index-sanity-check", "--files", f"{base}.index").strip().endswith("passed sanity check.")
    (base.parent / (base.name + ".index")).write_bytes(b"\x00\x00\x00\x00\x00\x00\x00\x05")
    assert "Found a corrupted index file" in _run("--index-sanity-check", "--files", f"{base}.index")


def test_corrupt_batch_is_reported_invalid(tmp_path) -> None:
    base = _segment(tmp_path)
    path = base.parent / (base.name + ".log")
    data = bytearray(path.read_bytes())
    data[80] ^= 0xFF
    path.write_bytes(data)
    out = _run("--files", str(path))
    assert "isvalid: false" in out.splitlines()[2]


def test_null_keys_and_header_keys_print_as_kafka_does(checked_tmp_path) -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=NOW, key=None, value=b"v", headers=[("h1", b"x"), ("h2", None)])
    log = Log.open(checked_tmp_path / "t-0", LogConfig())
    log.append_as_leader(bytearray(builder.build()), 0, now=NOW)
    log.close()
    lines = _run("--print-data-log", "--files", str(checked_tmp_path / "t-0" / "00000000000000000000.log")).splitlines()
    assert lines[3] == f"| offset: 0 CreateTime: {NOW} keySize: -1 valueSize: 1 sequence: -1 headerKeys: [h1,h2] payload: v"
