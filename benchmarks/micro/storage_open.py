"""Open time of a partition log with many segments, after a clean and an unclean shutdown.

    .venv/bin/python benchmarks/micro/storage_open.py [--segments 100] [--segment-kib 1024] [--runs 7]

Writes ``--segments`` rolled segments of 16 KiB batches (default
``segment.index.bytes``: the active segment's indexes are preallocated to
10 MiB), then times ``Log.open`` in two states:

* clean: the log was closed (indexes trimmed, clean-shutdown marker); every
  segment is opened and sanity-checked, nothing is scanned;
* unclean: the log was flushed up to the active segment (as a roll does) and
  then dropped as a SIGKILL would leave it (no close, no marker), with half a
  segment of unflushed batches in the active segment; ``Log.open`` gets the
  flushed recovery point, as the ``recovery-point-offset-checkpoint`` gives
  it, so only the active segment is scanned.

Also times opening one preallocated 10 MiB ``.index`` and ``.timeindex`` pair
(the active segment's after a crash). Prints best and median of ``--runs``.
Uses a temp dir that is removed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if not __package__:  # run as a file: imports start at the repository root, not this folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from benchmarks.micro.storage_append import make_16k_batch
from storage.log import Log
from storage.log_config import LogConfig
from storage.offset_index import OffsetIndex
from storage.time_index import TimeIndex


def timed(runs: int, action: Callable[[], object], after: Callable[[object], None] = lambda _: None) -> list[float]:
    """Seconds per ``action()`` call; ``after`` (untimed) gets what it returned."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
        after(result)
    return times


def write_log(directory: Path, config: LogConfig, segments: int) -> Log:
    log = Log.open(directory, config)
    batch = make_16k_batch()
    now = int(time.time() * 1000)
    while len(log.segments) <= segments:
        log.append_as_leader(batch, leader_epoch=0, now=now)
    # Half a segment more, unflushed: what an unclean shutdown leaves to scan.
    for _ in range(config.segment_bytes // len(batch) // 2):
        log.append_as_leader(batch, leader_epoch=0, now=now)
    return log


def report(name: str, times: list[float]) -> None:
    print(f"{name:<44}: best {min(times) * 1e3:8.1f} ms   median {statistics.median(times) * 1e3:8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--segment-kib", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pafka-bench-open-"))
    try:
        config = LogConfig.model_validate({"segment.bytes": args.segment_kib << 10})
        directory = tmp / "bench-0"
        log = write_log(directory, config, args.segments)
        end, size, count = log.log_end_offset, log.size, len(log.segments)

        # Unclean: everything before the active segment is flushed (each roll
        # fsyncs), the active segment's tail is not; no marker, no close.
        recovery_point = log.recovery_point
        active = log.active_segment
        log.close_without_flush()
        index_pair = (active.offset_index.path, active.time_index.path, active.base_offset)

        def check(reopened: object, close: Callable[[Log], None]) -> None:
            assert isinstance(reopened, Log)
            assert reopened.log_end_offset == end and len(reopened.segments) == count
            close(reopened)

        unclean = timed(args.runs, lambda: Log.open(directory, config, recovery_point=recovery_point),
                        lambda reopened: check(reopened, Log.close_without_flush))

        def open_index_pair() -> tuple[OffsetIndex, TimeIndex]:
            return (OffsetIndex(index_pair[0], index_pair[2], config.segment_index_bytes),
                    TimeIndex(index_pair[1], index_pair[2], config.segment_index_bytes))

        def close_pair(pair: object) -> None:
            for index in pair:  # type: ignore[attr-defined]
                index.close_handler()

        pair = timed(args.runs, open_index_pair, close_pair)
        Log.open(directory, config, recovery_point=recovery_point).close()
        clean = timed(args.runs, lambda: Log.open(directory, config, had_clean_shutdown=True),
                      lambda reopened: check(reopened, Log.close))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"log: {count} segments, {size / 2**20:.0f} MiB, {end:,} records; "
          f"{config.segment_index_bytes >> 20} MiB preallocated active indexes")
    report("Log.open after a clean shutdown", clean)
    report("Log.open after an unclean shutdown", unclean)
    report("one preallocated .index + .timeindex pair", pair)


if __name__ == "__main__":
    main()
