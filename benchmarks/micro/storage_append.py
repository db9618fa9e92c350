"""Append throughput of 16 KiB batches, fsync only on segment roll (in-process).

    .venv/bin/python benchmarks/micro/storage_append.py [--total-mib 2048] [--segment-mib 256]

Each append validates the batch header and CRC32C, patches the base offset and
leader epoch in place, writes with one pwrite and updates the indexes. For
reference the same bytes are also written with plain os.write calls (the disk
and page cache ceiling on this machine). Uses a temp dir that is removed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from protocol.records import Record, build_batch
from storage.log import Log
from storage.log_config import LogConfig

BATCH_BYTES = 16 * 1024


def make_16k_batch() -> bytearray:
    records = [Record(i, 1_700_000_000_000 + i, b"key-%d" % i, os.urandom(1000)) for i in range(16)]
    batch = build_batch(records)
    # Pad the last value so the batch is as close to 16 KiB as record framing allows.
    pad = BATCH_BYTES - len(batch)
    records[-1].value = records[-1].value + b"p" * pad
    return build_batch(records)


def bench_log(dir: Path, total: int, segment_bytes: int) -> tuple[float, float, int]:
    config = LogConfig.model_validate({"segment.bytes": segment_bytes})
    log = Log.open(dir / "bench-0", config)
    batch = make_16k_batch()
    count = total // len(batch)
    now = int(time.time() * 1000)
    start = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, leader_epoch=0, now=now)
    appended = time.perf_counter() - start
    log.flush()
    flushed = time.perf_counter() - start
    segments = len(log.segments)
    log.close()
    return count * len(batch) / appended, count * len(batch) / flushed, segments


def bench_raw(dir: Path, total: int) -> float:
    batch = bytes(make_16k_batch())
    count = total // len(batch)
    fd = os.open(dir / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return count * len(batch) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--total-mib", type=int, default=2048)
    parser.add_argument("--segment-mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="parent of the temp dir (default: the system's)")
    args = parser.parse_args()
    total, segment = args.total_mib << 20, args.segment_mib << 20
    results = []
    for _ in range(args.repeat):
        tmp = Path(tempfile.mkdtemp(prefix="pafka-bench-append-", dir=args.dir))
        try:
            raw = bench_raw(tmp, total)
            (tmp / "raw.bin").unlink()
            results.append((*bench_log(tmp, total, segment), raw))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    mb = 1e6
    print(f"batch size : {len(make_16k_batch())} bytes; {args.total_mib} MiB per run in "
          f"{results[0][2]} segments of {args.segment_mib} MiB; {args.repeat} runs")
    for name, i in (("Log.append_as_leader, fsync on roll", 0), ("  + final flush of the last segment", 1),
                     ("plain os.write + one fsync (reference)", 3)):
        values = sorted(r[i] / mb for r in results)
        print(f"{name:<40}: best {values[-1]:7.1f}  median {values[len(values) // 2]:7.1f} MB/s")


if __name__ == "__main__":
    main()
