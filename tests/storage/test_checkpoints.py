"""Kafka's text checkpoint files and the leader epoch cache."""

from __future__ import annotations

import pytest

from storage.checkpoints import LeaderEpochCheckpointFile, OffsetCheckpointFile
from storage.errors import KafkaStorageError
from storage.leader_epoch_cache import LeaderEpochFileCache


def test_offset_checkpoint_format_and_round_trip(tmp_path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write({("orders", 1): 99, ("orders", 0): 1234, ("my-topic", 3): 7})
    assert path.read_text() == "0\n3\nmy-topic 3 7\norders 0 1234\norders 1 99\n"
    assert OffsetCheckpointFile(path).read() == {("orders", 0): 1234, ("orders", 1): 99, ("my-topic", 3): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_missing_checkpoint_reads_empty_and_empty_round_trips(tmp_path) -> None:
    file = OffsetCheckpointFile(tmp_path / "x")
    assert file.read() == {}
    file.write({})
    assert (tmp_path / "x").read_text() == "0\n0\n"
    assert file.read() == {}


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "garbage", "0\n"])
def test_malformed_checkpoints_are_rejected(tmp_path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(KafkaStorageError):
        OffsetCheckpointFile(path).read()


def test_leader_epoch_checkpoint_format(tmp_path) -> None:
    LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint").write([(0, 0), (3, 120)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 120\n"


def test_leader_epoch_cache(tmp_path) -> None:
    cache = LeaderEpochFileCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(0, 50)     # same epoch later: nothing new
    cache.assign(2, 100)
    cache.assign(5, 300)
    assert [tuple(e) for e in cache.entries] == [(0, 0), (2, 100), (5, 300)]
    assert LeaderEpochFileCache(tmp_path).entries == []  # appends' epochs wait for the log's flush
    cache.sync()
    assert LeaderEpochFileCache(tmp_path).entries == cache.entries  # persisted
    assert cache.epoch_for_offset(99) == 0 and cache.epoch_for_offset(100) == 2
    assert cache.end_offset_for(5, 400) == (5, 400)
    assert cache.end_offset_for(2, 400) == (2, 300)
    assert cache.end_offset_for(3, 400) == (2, 300)   # unknown epoch: the one below it
    assert cache.end_offset_for(0, 400) == (0, 100)
    assert cache.end_offset_for(6, 400) == (-1, -1)   # above the latest: Kafka answers UNDEFINED
    assert cache.end_offset_for(-1, 400) == (-1, -1)
    cache.truncate_from_end(300)
    assert cache.latest_epoch == 2
    cache.truncate_from_start(150)
    assert [tuple(e) for e in cache.entries] == [(2, 150)]
    assert cache.end_offset_for(1, 400) == (1, 150)   # below every epoch left: the first one's start
    cache.assign(1, 200)  # an older epoch at a later offset replaces what conflicts
    assert [tuple(e) for e in cache.entries] == [(1, 200)]


def test_read_or_empty_logs_a_malformed_checkpoint_and_reads_it_as_empty(tmp_path, caplog) -> None:
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_text("0\n2\norders 0 5\n")  # announces two entries, holds one
    with pytest.raises(KafkaStorageError):
        OffsetCheckpointFile(path).read()
    with caplog.at_level("ERROR", logger="storage.checkpoints"):
        assert OffsetCheckpointFile(path).read_or_empty() == {}
    assert [r.levelname for r in caplog.records] == ["ERROR"] and str(path) in caplog.records[0].getMessage()
    assert OffsetCheckpointFile(tmp_path / "missing").read_or_empty() == {}
    OffsetCheckpointFile(path).write({("orders", 0): 6})
    assert OffsetCheckpointFile(path).read_or_empty() == {("orders", 0): 6}


def test_an_epoch_assigned_by_an_append_is_written_and_fsynced_by_the_next_flush(tmp_path, monkeypatch) -> None:
    import os

    import storage.checkpoints as checkpoints
    from storage.log import Log
    from storage.log_config import LogConfig
    from tests.storage.helpers import make_batch

    synced: list[str] = []
    real = os.fsync
    monkeypatch.setattr(checkpoints.os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")) or real(fd))
    log = Log.open(tmp_path / "t-0", LogConfig())
    synced.clear()
    log.append_as_leader(make_batch(2, timestamp=1_700_000_000_000), leader_epoch=3)
    checkpoint = checkpoints.LeaderEpochCheckpointFile(tmp_path / "t-0" / "leader-epoch-checkpoint")
    assert log.leader_epoch_cache.entries == [(3, 0)]
    assert checkpoint.read() == []  # no file write, no disk sync on the append path
    assert not [p for p in synced if "leader-epoch-checkpoint" in p]
    log.flush()
    assert checkpoint.read() == [(3, 0)]
    assert [p for p in synced if "leader-epoch-checkpoint" in p]
    synced.clear()
    log.append_as_leader(make_batch(2, timestamp=1_700_000_000_000), leader_epoch=3)
    log.flush()
    assert not [p for p in synced if "leader-epoch-checkpoint" in p]  # unchanged: nothing to sync
    log.close()
