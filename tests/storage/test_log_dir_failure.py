"""A log directory whose disk fails goes offline once; the other directories keep serving."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any

import pytest

from storage.errors import KafkaStorageError
from storage.log import Log
from storage.log_config import LogConfig
from storage.log_dir_failure_channel import LogDirFailureChannel
from storage.log_manager import LogManager
from tests.storage.helpers import make_batch

NOW = 1_700_000_000_000


def test_the_channel_takes_a_dir_offline_once(caplog: pytest.LogCaptureFixture) -> None:
    channel = LogDirFailureChannel()
    told: list[Path] = []
    channel.add_listener(told.append)
    with caplog.at_level(logging.ERROR):
        assert channel.maybe_add_offline_log_dir(Path("/d1"), "write failed", OSError(errno.EIO, "I/O error"))
        assert not channel.maybe_add_offline_log_dir(Path("/d1"), "write failed again")
    assert told == [Path("/d1")] and channel.offline_dirs == {Path("/d1")}
    assert [r.getMessage() for r in caplog.records] == ["Log directory /d1 is offline: write failed ([Errno 5] I/O error)"]


def _no_space(*_: Any, **__: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_an_io_error_takes_only_its_dir_offline(checked_tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d1, d2 = checked_tmp_path / "d1", checked_tmp_path / "d2"
    manager = LogManager([d1, d2], LogConfig.model_validate({"segment.bytes": 2000}))
    manager.startup()
    first, second = manager.get_or_create_log("t", 0), manager.get_or_create_log("t", 1)
    assert manager.log_dir_of("t", 1) == d2
    with monkeypatch.context() as patch:
        patch.setattr(Log, "_append", _no_space)
        with pytest.raises(KafkaStorageError):
            second.append_as_leader(make_batch(2), 0, now=NOW)
    assert second.offline and not first.offline and manager.online_log_dirs == [d1]
    # Offline: every call answers KafkaStorageError without touching the disk, reads too.
    with pytest.raises(KafkaStorageError, match="is offline"):
        second.append_as_leader(make_batch(2), 0, now=NOW)
    with pytest.raises(KafkaStorageError, match="is offline"):
        second.read(0, 1000)
    first.append_as_leader(make_batch(2), 0, now=NOW)
    # New partitions go to the dirs left; checkpoints and background passes skip the failed one.
    manager.get_or_create_log("t", 2)
    assert manager.log_dir_of("t", 2) == d1
    manager.checkpoint_all()
    manager.flush_dirty_logs(NOW + 10**9)
    manager.cleanup_logs(NOW + 10**9)
    manager.shutdown()
    assert (d1 / ".kafka_cleanshutdown").exists() and not (d2 / ".kafka_cleanshutdown").exists()


def test_a_failed_checkpoint_takes_its_dir_offline(checked_tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d1, d2 = checked_tmp_path / "d1", checked_tmp_path / "d2"
    manager = LogManager([d1, d2], LogConfig())
    manager.startup()
    manager.get_or_create_log("t", 0)
    in_d2 = manager.get_or_create_log("t", 1)
    real_write = __import__("storage.checkpoints", fromlist=["OffsetCheckpointFile"]).OffsetCheckpointFile.write

    def failing_in_d2(self: Any, offsets: Any) -> None:
        if Path(self.path).parent == d2:
            _no_space()
        real_write(self, offsets)

    monkeypatch.setattr("storage.checkpoints.OffsetCheckpointFile.write", failing_in_d2)
    manager.checkpoint_high_watermarks()
    assert in_d2.offline and manager.online_log_dirs == [d1]
    manager.close_without_clean_shutdown()


def test_with_every_dir_offline_no_log_can_be_created(checked_tmp_path: Path) -> None:
    manager = LogManager([checked_tmp_path / "d1"], LogConfig())
    manager.startup()
    manager.failure_channel.maybe_add_offline_log_dir(checked_tmp_path / "d1", "gone")
    with pytest.raises(KafkaStorageError, match="every log directory is offline"):
        manager.get_or_create_log("t", 0)
    manager.close_without_clean_shutdown()
