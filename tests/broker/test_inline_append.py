"""Appends made on the event loop only when they cannot block: no roll, no flush due, no lock held."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.record_batch import parse_batch_header
from replication.partition import Partition
from replication.replica_manager import ReplicaManager
from storage.log_config import LogConfig
from storage.log import Log
from tests.storage.helpers import make_batch


def _log(tmp_path: Path, **props: object) -> Log:
    return Log.open(tmp_path / "t-0", LogConfig.model_validate(props), had_clean_shutdown=True)


def _would_block(log: Log, batch: bytearray) -> bool:
    header = parse_batch_header(batch, 0)
    return log.append_would_block(len(batch), header.max_timestamp, header.last_offset_delta,
                                  now=int(time.time() * 1000))


def test_plain_appends_do_not_block(tmp_path: Path) -> None:
    log = _log(tmp_path)
    try:
        assert not _would_block(log, make_batch(3))
    finally:
        log.close()


def test_flush_messages_makes_an_append_blocking(tmp_path: Path) -> None:
    log = _log(tmp_path, **{"flush.messages": 1})
    try:
        assert _would_block(log, make_batch(1))
    finally:
        log.close()


def test_an_append_that_rolls_the_segment_is_blocking(tmp_path: Path) -> None:
    log = _log(tmp_path, **{"segment.bytes": 2048})
    try:
        batch = make_batch(5)
        while not _would_block(log, batch):
            log.append_as_leader(bytearray(batch), leader_epoch=0)
        segments_before = len(log.log_segments())
        log.append_as_leader(bytearray(batch), leader_epoch=0)  # this one rolls
        assert len(log.log_segments()) == segments_before + 1
    finally:
        log.close()


def test_a_log_locked_by_another_thread_is_appended_from_a_thread(tmp_path: Path) -> None:
    log = _log(tmp_path)
    manager = ReplicaManager(0, None)  # type: ignore[arg-type]  # no log manager needed here
    partition = Partition("t", 0, uuid.uuid4(), log, 0, [0])
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with log.lock:
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait(5)
        assert manager.try_append_without_blocking([(partition, make_batch(2))]) is None
        assert log.log_end_offset == 0
    finally:
        release.set()
        holder.join()
    results = manager.try_append_without_blocking([(partition, make_batch(2))])
    assert results is not None and results[0].error_code == ErrorCode.NO_ERROR
    assert log.log_end_offset == 2
    log.close()
