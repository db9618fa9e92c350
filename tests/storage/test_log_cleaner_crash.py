"""SIGKILL a real cleaner process at every step of a pass and at random moments.

After each crash the partition is reopened (recovery drops ``.cleaned``
files and completes ``.swap`` files) and must read as before the crash:
every key's latest record is the same, each visible record is one the log
held before cleaning, every record a finished pass keeps is visible, nothing
is duplicated, every batch passes kafka-python's CRC check, and a new pass
finishes the job with the same result as an uninterrupted one.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.log import Log
from storage.log_cleaner import LogCleaner
from tests.storage.cleaner_crash_child import CRASH_CONFIG
from tests.storage.cleaner_support import (
    BASE_TIMESTAMP,
    Written,
    compact_config,
    kafka_python_records,
    latest_per_key,
    pafka_records,
    write_workload,
)

REPO = Path(__file__).resolve().parents[2]
NOW = BASE_TIMESTAMP + 10_000
CONFIG = CRASH_CONFIG


def run_child(directory: Path, kill_at: int | None = None, kill_after_s: float | None = None) -> str:
    """Run the cleaner child; returns its stdout. Kills it after ``kill_after_s`` if given."""
    args = [sys.executable, "-m", "tests.storage.cleaner_crash_child", str(directory), str(NOW)]
    if kill_at is not None:
        args.append(str(kill_at))
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if kill_after_s is not None:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(kill_after_s)
            proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if kill_at is None and kill_after_s is None:
        assert proc.returncode == 0, err
    else:
        assert proc.returncode in (0, -signal.SIGKILL), err
    return out


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Written]]:
    """A closed log of 10,000 records on 1,000 keys in ~16 segments."""
    directory = tmp_path_factory.mktemp("original") / "data" / "topic-0"
    directory.mkdir(parents=True)
    log = Log.open(directory, compact_config(**CONFIG))
    written = write_workload(log, keys=1_000, total=10_000, seed=11)
    log.roll()
    log.close()
    return directory, written


@pytest.fixture(scope="module")
def finished(original: tuple[Path, list[Written]], tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Written], int]:
    """What an uninterrupted pass leaves, and how many file mutations it makes."""
    directory = copy_partition(original[0], tmp_path_factory.mktemp("finished"))
    out = run_child(directory)
    ops = int(out.split("ops=")[1])
    return pafka_records(directory), ops


def copy_partition(source: Path, target_root: Path) -> Path:
    target = target_root / "data" / source.name
    shutil.copytree(source, target)
    return target


def check_reads_as_before(directory: Path, written: list[Written], after: list[Written]) -> None:
    before = set(written)
    log = Log.open(directory, compact_config(**CONFIG))
    try:
        visible = pafka_records(directory)
        offsets = [w.offset for w in visible]
        assert offsets == sorted(set(offsets)), "records duplicated or out of order"
        assert set(visible) <= before, "a record appeared that was never written"
        assert set(after) <= set(visible), "a record the cleaner keeps was lost"
        assert latest_per_key(visible) == latest_per_key(written)
        assert kafka_python_records(directory) == visible
        assert not [p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
        # The next pass completes the work with the uninterrupted result.
        log.update_high_watermark(log.log_end_offset)
        LogCleaner(time_ms=lambda: NOW).clean_log(log)
        assert pafka_records(directory) == after
    finally:
        log.close()


@pytest.mark.slow
def test_sigkill_at_every_kind_of_step_leaves_a_readable_log(
    original: tuple[Path, list[Written]], finished: tuple[list[Written], int], tmp_path: Path
) -> None:
    source, written = original
    after, ops = finished
    assert ops > 50 and len(after) < len(written)
    # Every mutation of the first two groups (rewrite, .cleaned -> .swap, old -> .deleted,
    # .swap -> live, directory fsyncs), then points spread
    # over the rest of the pass.
    first_group = list(range(1, 25))
    spread = sorted(set(range(25, ops + 1, max(1, (ops - 25) // 6))) | {ops})
    for n, kill_at in enumerate(first_group + spread):
        directory = copy_partition(source, tmp_path / f"kill-{n}")
        run_child(directory, kill_at=kill_at)
        check_reads_as_before(directory, written, after)
        shutil.rmtree(directory.parent.parent)


@pytest.mark.slow
def test_sigkill_at_random_moments_leaves_a_readable_log(
    original: tuple[Path, list[Written]], finished: tuple[list[Written], int], tmp_path: Path
) -> None:
    source, written = original
    after, _ = finished
    rnd = random.Random(7)
    killed_mid_pass = 0
    for n in range(6):
        directory = copy_partition(source, tmp_path / f"random-{n}")
        out = run_child(directory, kill_after_s=rnd.uniform(0.0, 0.25))
        killed_mid_pass += "ops=" not in out
        check_reads_as_before(directory, written, after)
        shutil.rmtree(directory.parent.parent)
    assert killed_mid_pass >= 1, "no random kill landed inside a cleaning pass"
