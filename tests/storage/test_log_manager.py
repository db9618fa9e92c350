"""LogManager: log dir layout, lock, meta.properties, checkpoints, clean-shutdown marker."""

from __future__ import annotations

import subprocess
import sys

import pytest

from storage.errors import KafkaStorageError
from storage.log_config import LogConfig
from storage.log_manager import LogManager
from tests.storage.helpers import make_batch

NOW = 1_700_000_000_000


def _manager(dirs, **kwargs) -> LogManager:
    manager = LogManager(dirs, LogConfig.model_validate({"segment.bytes": 2000}), **kwargs)
    manager.startup()
    return manager


def test_layout_checkpoints_and_clean_restart(checked_tmp_path) -> None:
    d1, d2 = checked_tmp_path / "d1", checked_tmp_path / "d2"
    manager = _manager([d1, d2], cluster_id="abc")
    for partition in range(4):
        log = manager.get_or_create_log("orders", partition)
        for i in range(10):
            log.append_as_leader(make_batch(2, value_size=100, timestamp=NOW + i), 0, now=NOW)
        log.update_high_watermark(log.log_end_offset - 2)
    manager.get_log("orders", 1).delete_records(4, now=NOW)
    # Partitions spread over the dirs, Kafka-style names.
    assert sorted(p.name for p in d1.iterdir() if p.is_dir()) == ["orders-0", "orders-2"]
    assert sorted(p.name for p in d2.iterdir() if p.is_dir()) == ["orders-1", "orders-3"]
    assert (d1 / "meta.properties").read_text().splitlines()[1:] == ["version=0", "broker.id=0", "cluster.id=abc"]
    manager.shutdown()
    for d in (d1, d2):
        assert (d / ".kafka_cleanshutdown").exists()
        assert (d / "recovery-point-offset-checkpoint").read_text().splitlines()[:2] == ["0", "2"]
    assert "orders 1 4" in (d2 / "log-start-offset-checkpoint").read_text()
    assert "orders 1 18" in (d2 / "replication-offset-checkpoint").read_text()
    assert "orders 1 20" in (d2 / "recovery-point-offset-checkpoint").read_text()

    again = _manager([d1, d2])
    assert not (d1 / ".kafka_cleanshutdown").exists()  # a crash from now on is detected
    log = again.get_log("orders", 1)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (4, 20, 18, 20)
    assert again.cluster_id == "abc"
    again.shutdown()


def test_the_lock_keeps_a_second_broker_out(checked_tmp_path) -> None:
    manager = _manager([checked_tmp_path / "d"])
    with pytest.raises(KafkaStorageError, match="lock"):
        _manager([checked_tmp_path / "d"])
    code = ("from storage.log_manager import LogManager\n"
            f"LogManager([{str(checked_tmp_path / 'd')!r}]).startup()\n")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert other.returncode != 0 and "KafkaStorageError" in other.stderr
    manager.shutdown()
    _manager([checked_tmp_path / "d"]).shutdown()  # released at shutdown


def test_broker_id_mismatch_is_refused(checked_tmp_path) -> None:
    _manager([checked_tmp_path / "d"], broker_id=1).shutdown()
    with pytest.raises(KafkaStorageError, match=r"broker\.id"):
        _manager([checked_tmp_path / "d"], broker_id=2)


def test_unclean_restart_recovers_past_the_checkpointed_recovery_point(checked_tmp_path, caplog) -> None:
    manager = _manager([checked_tmp_path / "d"])
    log = manager.get_or_create_log("t", 0)
    for i in range(30):
        log.append_as_leader(make_batch(2, value_size=100, timestamp=NOW + i), 0, now=NOW)
    manager.checkpoint_log_recovery_offsets()
    recovery_point = log.recovery_point
    assert recovery_point > 0
    manager.close_without_clean_shutdown()
    with caplog.at_level("INFO", logger="storage"):
        again = _manager([checked_tmp_path / "d"])
    scanned = [r.getMessage() for r in caplog.records if "recovering unflushed segment" in r.getMessage()]
    assert scanned == [f"t-0: recovering unflushed segment {recovery_point}"]
    assert again.get_log("t", 0).log_end_offset == 60
    again.shutdown()


def test_topic_overrides_retention_pass_and_delete(checked_tmp_path) -> None:
    manager = _manager([checked_tmp_path / "d"], topic_configs={"short": {"retention.ms": 1000}})
    short, long = manager.get_or_create_log("short", 0), manager.get_or_create_log("long", 0)
    assert short.config.retention_ms == 1000 and long.config.retention_ms == 604800000
    for log in (short, long):
        for _ in range(20):
            log.append_as_leader(make_batch(1, value_size=100, timestamp=NOW), 0, now=NOW)
        log.update_high_watermark(log.log_end_offset)
    assert manager.cleanup_logs(now=NOW + 2000) > 0
    assert short.log_start_offset == short.log_end_offset and long.log_start_offset == 0
    assert manager.delete_pending_segments(now=NOW + 2000 + 60_000) > 0
    manager.update_topic_config("long", {"retention.ms": 1000})
    assert long.config.retention_ms == 1000
    manager.delete_log("short", 0)
    assert not any(p.name.startswith("short-0") for p in (checked_tmp_path / "d").iterdir())
    manager.shutdown()
