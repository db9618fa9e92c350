"""Log cleaner throughput: one compaction pass over a freshly written log (in-process).

    .venv/bin/python benchmarks/micro/log_cleaner.py [--records 500000] [--keys 50000] [--codec 0]

Writes ``--records`` records (8-byte keys drawn at random from ``--keys``,
100-byte values, batches of 100 records, 1 in 10 a tombstone) into a log with
64 MiB segments, then times, separately:

* building the key -> offset map over the whole dirty section;
* a full cleaning pass (map + rewrite of every segment + swap + checkpoint);
* a second pass with nothing dirty (the tombstone-expiry re-clean).

Figures are records read per second and MB of input per second. Uses a temp
dir that is removed.
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
from storage.compaction import aborted_transactions, build_offset_map
from storage.log import Log
from storage.log_cleaner import LogCleaner
from storage.log_config import LogConfig
from storage.offset_map import OffsetMap

NOW = 1_700_000_000_000


def write_log(directory: Path, records: int, keys: int, codec: int) -> Log:
    config = LogConfig.model_validate({
        "cleanup.policy": "compact", "segment.bytes": 64 * 1024 * 1024, "file.delete.delay.ms": 0,
    })
    log = Log.open(directory, config)
    rnd = random.Random(1)
    value = bytes(rnd.getrandbits(8) for _ in range(100))
    for start in range(0, records, 100):
        batch = [
            Record(i, NOW + start, b"k%07d" % rnd.randrange(keys), None if rnd.random() < 0.1 else value)
            for i in range(100)
        ]
        log.append_as_leader(build_batch(batch, compression=codec), leader_epoch=0, now=NOW)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    return log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--codec", type=int, default=0, help="0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pafka-cleaner-bench-"))
    try:
        directory = root / "bench-0"
        directory.mkdir()
        log = write_log(directory, args.records, args.keys, args.codec)
        size = log.size
        segments = log.log_segments()

        started = time.perf_counter()
        offset_map = OffsetMap()
        build_offset_map(segments[:-1], 0, log.log_end_offset, offset_map,
                         aborted_transactions(log, 0, log.log_end_offset))
        map_s = time.perf_counter() - started

        cleaner = LogCleaner(time_ms=lambda: NOW)
        started = time.perf_counter()
        result = cleaner.clean_log(log)
        pass_s = time.perf_counter() - started
        assert result is not None
        started = time.perf_counter()
        again = cleaner.clean_log(log)
        reclean_s = time.perf_counter() - started
        assert again is not None

        mb = size / 1e6
        print(f"log: {args.records:,} records, {args.keys:,} keys, codec {args.codec}, {mb:.1f} MB")
        print(f"offset map:  {map_s:6.2f} s  {args.records / map_s:>10,.0f} rec/s  {mb / map_s:6.1f} MB/s")
        print(f"full pass:   {pass_s:6.2f} s  {args.records / pass_s:>10,.0f} rec/s  {mb / pass_s:6.1f} MB/s"
              f"  -> {result.stats.records_written:,} records, {result.stats.bytes_written / 1e6:.1f} MB kept")
        kept = result.stats.records_written
        print(f"clean re-pass: {reclean_s:4.2f} s  {kept / reclean_s:>10,.0f} rec/s (nothing dirty)")
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
