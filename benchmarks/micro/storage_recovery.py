"""Recovery time of an unflushed 1 GiB segment (no clean-shutdown marker).

    .venv/bin/python benchmarks/micro/storage_recovery.py [--mib 1024] [--drop-cache]

Writes one segment of 16 KiB batches, closes it as a crash would (no flush,
no marker), then times ``Log.open(..., recovery_point=0)``: every batch is
checked (length, magic, CRC32C over the mmapped file) and both indexes are
rebuilt. The file is normally still in the page cache; ``--drop-cache`` asks
the kernel to evict it first (needs root) to include the disk read. Uses a
temp dir that is removed.
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

from benchmarks.micro.storage_append import make_16k_batch
from storage.log import Log
from storage.log_config import LogConfig


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--drop-cache", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pafka-bench-recovery-"))
    try:
        config = LogConfig.model_validate({"segment.bytes": 2**31 - 1})
        log = Log.open(tmp / "bench-0", config)
        batch = make_16k_batch()
        now = int(time.time() * 1000)
        for _ in range((args.mib << 20) // len(batch)):
            log.append_as_leader(batch, leader_epoch=0, now=now)
        size, end = log.size, log.log_end_offset
        log.close_without_flush()
        reference = None
        if args.drop_cache:
            # The disk's own sequential read rate, for comparison.
            os.sync()
            Path("/proc/sys/vm/drop_caches").write_text("1\n")
            start = time.perf_counter()
            with open(next((tmp / "bench-0").glob("*.log")), "rb", buffering=0) as f:
                while f.read(8 << 20):
                    pass
            reference = size / (time.perf_counter() - start)
        if args.drop_cache:
            os.sync()
            Path("/proc/sys/vm/drop_caches").write_text("1\n")
        start = time.perf_counter()
        recovered = Log.open(tmp / "bench-0", config, recovery_point=0)
        elapsed = time.perf_counter() - start
        assert recovered.log_end_offset == end and recovered.size == size
        entries = recovered.active_segment.offset_index.entries
        recovered.close_without_flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"segment            : {size / 2**20:.0f} MiB, {end} records, {entries} index entries rebuilt")
    print(f"page cache dropped : {args.drop_cache}")
    print(f"recovery time      : {elapsed:.2f} s")
    print(f"scan rate          : {size / elapsed / 1e6:.0f} MB/s")
    if reference is not None:
        print(f"plain read of file : {reference / 1e6:.0f} MB/s  (reference, cold cache)")


if __name__ == "__main__":
    main()
