"""Offset and timestamp lookup cost as a log grows from 1 to 1,000 segments.

    .venv/bin/python benchmarks/micro/storage_lookup.py [--segments 1000] [--segment-kib 128]

A lookup is ``Log.read(offset, 1)`` (find the segment by binary search over base
offsets, the index entry by binary search over the mmapped ``.index``, then
scan at most ``index.interval.bytes`` of batch headers), and
``fetch_offset_by_timestamp`` for ListOffsets. Offsets are drawn uniformly over
the whole log. Uses a temp dir that is removed.
"""

from __future__ import annotations

import argparse
import random
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

T0 = 1_700_000_000_000
RECORDS_PER_BATCH = 4


def batch(k: int) -> bytearray:
    return build_batch([Record(j, T0 + k * 4 + j, b"k%d" % k, b"v" * 230) for j in range(RECORDS_PER_BATCH)])


def measure(log: Log, rng: random.Random, lookups: int) -> tuple[float, float]:
    end = log.log_end_offset
    offsets = [rng.randrange(end) for _ in range(lookups)]
    start = time.perf_counter()
    for offset in offsets:
        log.read(offset, 1)
    per_read = (time.perf_counter() - start) / lookups
    stamps = [T0 + rng.randrange(end) for _ in range(lookups // 4)]
    start = time.perf_counter()
    for ts in stamps:
        log.fetch_offset_by_timestamp(ts)
    per_ts = (time.perf_counter() - start) / len(stamps)
    return per_read, per_ts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", type=int, default=1000)
    parser.add_argument("--segment-kib", type=int, default=128)
    parser.add_argument("--lookups", type=int, default=20000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pafka-bench-lookup-"))
    rng = random.Random(1)
    checkpoints = [n for n in (1, 10, 100, 1000, 10000) if n <= args.segments]
    try:
        config = LogConfig.model_validate({"segment.bytes": args.segment_kib << 10})
        log = Log.open(tmp / "bench-0", config)
        k = 0
        print(f"{'segments':>9} {'log MiB':>8} {'read(offset) us':>16} {'by timestamp us':>16}")
        for target in checkpoints:
            while len(log.segments) < target or (target == 1 and log.active_segment.size < (args.segment_kib << 10) - 2000):
                log.append_as_leader(batch(k), leader_epoch=0, now=T0)
                k += 1
                if len(log.segments) > target:
                    break
            log.update_high_watermark(log.log_end_offset)
            per_read, per_ts = measure(log, rng, args.lookups)
            print(f"{len(log.segments):>9} {log.size / 2**20:>8.1f} {per_read * 1e6:>16.1f} {per_ts * 1e6:>16.1f}")
        log.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
