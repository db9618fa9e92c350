"""Shared helpers for the storage tests: batches built by kafka-python, file checks."""

from __future__ import annotations

import struct
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from protocol.record_batch import iter_batch_headers


def make_batch(
    count: int = 1,
    timestamp: int = 1_700_000_000_000,
    value_size: int = 16,
    key: bytes | None = b"k",
    seed: int = 0,
    compression_type: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamps: list[int] | None = None,
    transactional: bool = False,
) -> bytearray:
    """A v2 batch built by an independent implementation (kafka-python)."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression_type, is_transactional=int(transactional), producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 30,
    )
    for i in range(count):
        ts = timestamps[i] if timestamps else timestamp + i
        value = (f"{seed}:{i}:".encode() + b"x" * value_size)[: max(value_size, 1)]
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytearray(builder.build())


def check_log_dir_with_kafka_python(partition_dir: Path) -> int:
    """Every batch of every .log parses and passes its CRC with kafka-python; every
    .index entry points at the start of a batch whose last offset it names; every
    .timeindex entry names an offset of the segment. Returns the batch count."""
    total = 0
    for log_path in sorted(partition_dir.glob("*.log")):
        data = log_path.read_bytes()
        base = int(log_path.name[:20])
        starts: dict[int, int] = {}
        reader = MemoryRecords(data)
        pos = 0
        while reader.has_next():
            batch = reader.next_batch()
            assert batch.validate_crc(), f"CRC mismatch in {log_path} at {pos}"
            records = list(batch)
            assert len(records) == batch.last_offset_delta + 1 or batch.is_control_batch
            starts[pos] = batch.base_offset + batch.last_offset_delta
            pos += batch.size_in_bytes if hasattr(batch, "size_in_bytes") else len(batch._buffer)
            total += 1
        # kafka-python stops at a partial batch: the file must end exactly at a batch.
        assert sum(h.size_in_bytes for _, h in iter_batch_headers(data)) == len(data), f"partial batch in {log_path}"
        positions = {p: h.last_offset for p, h in iter_batch_headers(data)}
        assert set(positions) == set(starts)
        index = log_path.with_suffix(".index")
        if index.exists():
            raw = index.read_bytes()
            for i in range(0, len(raw) - len(raw) % 8, 8):
                rel, position = struct.unpack_from(">ii", raw, i)
                if rel == 0 and position == 0:
                    continue  # preallocated tail of the active segment's index
                assert position in positions, f"{index.name} entry {rel}->{position} is not a batch start"
                assert positions[position] == base + rel, f"{index.name} entry offset does not match its batch"
        tindex = log_path.with_suffix(".timeindex")
        if tindex.exists():
            raw = tindex.read_bytes()
            last_offsets = set(positions.values())
            for i in range(0, len(raw) - len(raw) % 12, 12):
                ts, rel = struct.unpack_from(">qi", raw, i)
                if ts == 0 and rel == 0:
                    continue
                assert base + rel in last_offsets, f"{tindex.name} entry names offset {base + rel}, no batch ends there"
    return total
