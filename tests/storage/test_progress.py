"""storage/progress.py: plain progress lines (start, every interval, end) when no one watches a terminal,
a tqdm bar when someone does; and the log recovery at start-up reporting through it."""

from __future__ import annotations

import io

import pytest

from storage.log_config import LogConfig
from storage.log_manager import LogManager
from storage.progress import Progress
from tests.storage.helpers import make_batch


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_lines_at_the_start_every_interval_and_at_the_end() -> None:
    lines: list[str] = []
    clock = FakeClock()
    with Progress("Dumping s.log", 400, "records", sink=lines.append, stream=io.StringIO(), interval_s=5,
                  clock=clock) as progress:
        for _ in range(4):
            clock.now += 2  # a line every 5 s: after the 3rd advance (6 s), not the others
            progress.advance(100)
    assert lines == ["Dumping s.log: 0 of 400 records (0.0%) started after 0.0s",
                     "Dumping s.log: 300 of 400 records (75.0%) so far after 6.0s",
                     "Dumping s.log: 400 of 400 records (100.0%) done after 8.0s"]


def test_bytes_in_mib_no_total_and_a_failure_said_so() -> None:
    lines: list[str] = []
    with pytest.raises(RuntimeError), Progress("Sending f.txt", None, "B", sink=lines.append, bar=False) as progress:
        progress.advance(3 << 20)
        raise RuntimeError("broker gone")
    assert lines[-1].startswith("Sending f.txt: 3.0 MiB failed after")


def test_a_terminal_gets_a_bar_and_no_lines() -> None:
    lines: list[str] = []
    terminal = Tty()
    with Progress("Loading", 10, "logs", sink=lines.append, stream=terminal) as progress:
        progress.advance(10)
    assert lines == []
    assert "Loading" in terminal.getvalue() and "10/10" in terminal.getvalue()


def test_recovery_after_a_crash_logs_its_progress(checked_tmp_path, caplog) -> None:
    config = LogConfig.model_validate({"segment.bytes": 2000})
    manager = LogManager([checked_tmp_path / "d"], config)
    manager.startup()
    for partition in range(3):
        manager.get_or_create_log("t", partition).append_as_leader(make_batch(2, value_size=10), 0)
    manager.close_without_clean_shutdown()
    with caplog.at_level("INFO", logger="storage"):
        again = LogManager([checked_tmp_path / "d"], config)
        again.startup()
    progress = [r.getMessage() for r in caplog.records if "logs in" in r.getMessage()]
    where = checked_tmp_path / "d"
    assert progress[0] == f"Recovering logs in {where}: 0 of 3 logs (0.0%) started after 0.0s"
    assert progress[-1].startswith(f"Recovering logs in {where}: 3 of 3 logs (100.0%) done after")
    again.shutdown()
    caplog.clear()
    with caplog.at_level("INFO", logger="storage"):
        LogManager([checked_tmp_path / "d"], config).startup()
    assert any(r.getMessage().startswith(f"Loading logs in {where}: 3 of 3 logs") for r in caplog.records)
