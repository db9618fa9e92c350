"""Helpers for the log cleaner tests: build compacted logs, read them back two ways.

``kafka_python_records`` is the independent check: it parses every ``.log``
file of a partition with kafka-python's record-batch implementation
(``MemoryRecords`` / ``DefaultRecordBatch``), verifies each batch's CRC32C and
returns what that parser sees.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, NamedTuple

from protocol.record_batch import RecordBatchHeader, iter_batch_headers
from protocol.records import Record, build_batch, read_batch
from storage.log import Log
from storage.log_config import LogConfig

KEYS = 10_000
RECORDS = 100_000
RECORDS_PER_BATCH = 100
CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd
BASE_TIMESTAMP = 1_700_000_000_000


def compact_config(**overrides: Any) -> LogConfig:
    props: dict[str, Any] = {
        "cleanup.policy": "compact",
        "segment.bytes": 256 * 1024,
        "min.cleanable.dirty.ratio": 0.5,
        "delete.retention.ms": 60_000,
        "min.compaction.lag.ms": 0,
        "file.delete.delay.ms": 0,
    }
    props.update(overrides)
    return LogConfig.model_validate(props)


class Written(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def key_of(i: int) -> bytes:
    return b"key-%05d" % i


def value_of(offset: int) -> bytes:
    return b"value-of-offset-%d-" % offset + b"x" * (offset % 23)


def append_keyed(
    log: Log,
    plan: list[tuple[bytes | None, bool]],
    *,
    codec: int = 0,
    timestamp: int = BASE_TIMESTAMP,
    producer: tuple[int, int, int] | None = None,
    transactional: bool = False,
) -> list[Written]:
    """Append one batch of (key, is_tombstone) records; returns what was written."""
    start = log.log_end_offset
    records = []
    for i, (key, tombstone) in enumerate(plan):
        offset = start + i
        records.append(Record(i, timestamp + i, key, None if tombstone else value_of(offset)))
    pid, epoch, seq = producer or (-1, -1, -1)
    batch = build_batch(
        records, base_offset=0, compression=codec, producer_id=pid, producer_epoch=epoch,
        base_sequence=seq, is_transactional=transactional,
    )
    log.append_as_leader(batch, leader_epoch=0, now=timestamp)
    return [Written(start + i, r.key, r.value, r.timestamp) for i, r in enumerate(records)]


def write_workload(log: Log, keys: int = KEYS, total: int = RECORDS, seed: int = 3) -> list[Written]:
    """``total`` records on ``keys`` random keys (seeded), about 1 in 10 a tombstone.

    Keys are drawn at random so the latest version of a key can be anywhere in
    the log, and batches rotate through every compression codec.
    """
    rnd = random.Random(seed)
    written: list[Written] = []
    for batch_no in range(total // RECORDS_PER_BATCH):
        plan = [(key_of(rnd.randrange(keys)), rnd.random() < 0.1) for _ in range(RECORDS_PER_BATCH)]
        ts = BASE_TIMESTAMP + batch_no
        written += append_keyed(log, plan, codec=CODECS[batch_no % len(CODECS)], timestamp=ts)
    return written


def latest_per_key(written: list[Written]) -> dict[bytes, Written]:
    latest: dict[bytes, Written] = {}
    for w in written:
        if w.key is not None:
            latest[w.key] = w
    return latest


def log_files(directory: Path) -> list[Path]:
    return sorted(directory / name for name in os.listdir(directory) if name.endswith(".log"))


def pafka_records(directory: Path) -> list[Written]:
    """Every record of the partition's live ``.log`` files, via our own parser."""
    out = []
    for path in log_files(directory):
        data = path.read_bytes()
        for pos, _ in iter_batch_headers(data):
            _, records = read_batch(data, pos, verify_crc=True)
            out += [Written(r.offset, r.key, r.value, r.timestamp) for r in records]
    return out


def batch_headers(directory: Path) -> list[RecordBatchHeader]:
    out = []
    for path in log_files(directory):
        data = path.read_bytes()
        out += [h for _, h in iter_batch_headers(data)]
    return out


class KafkaPythonBatch(NamedTuple):
    base_offset: int
    last_offset: int
    codec: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    records: list[Written]


def kafka_python_batches(directory: Path) -> list[KafkaPythonBatch]:
    """Parse every batch of every ``.log`` file with kafka-python; each must pass its CRC."""
    # Imported here: the crash-test child process does not need kafka-python.
    from kafka.record.memory_records import MemoryRecords

    out = []
    for path in log_files(directory):
        data = path.read_bytes()
        records = MemoryRecords(data)
        consumed = 0
        while records.has_next():
            batch = records.next_batch()
            assert batch is not None
            assert batch.validate_crc(), f"CRC mismatch in {path.name} at offset {batch.base_offset}"
            consumed += batch.size_in_bytes
            out.append(KafkaPythonBatch(
                batch.base_offset, batch.base_offset + batch.last_offset_delta, batch.compression_type,
                batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional,
                batch.is_control_batch, [Written(r.offset, r.key, r.value, r.timestamp) for r in batch],
            ))
        assert consumed == len(data), f"{path.name}: {len(data) - consumed} trailing bytes"
    return out


def kafka_python_records(directory: Path) -> list[Written]:
    return [r for batch in kafka_python_batches(directory) for r in batch.records]
