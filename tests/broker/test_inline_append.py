"""Appends made on the event loop only when they cannot block: no roll, no flush due, no lock held."""

from __future__ import annotations

import asyncio
import concurrent.futures
import struct
import threading
import time
import uuid
from pathlib import Path

from crc32c import crc32c

from protocol.errors import ErrorCode
from protocol.record_batch import parse_batch_header
from replication.append_thread import AppendThread
from replication.partition import Partition
from replication.replica_manager import ReplicaManager
from storage.log import Log, now_ms
from storage.log_append import AppendOrigin
from storage.log_config import LogConfig
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
        assert not partition.reserve_append(make_batch(2), now_ms())
        assert log.log_end_offset == 0
    finally:
        release.set()
        holder.join()
    batch = make_batch(2)
    assert partition.reserve_append(batch, now_ms())
    info = partition.append_reserved(batch, AppendOrigin.CLIENT, now_ms())
    assert info.first_offset == 0 and log.lock.acquire(blocking=False)  # released again
    log.lock.release()
    assert log.log_end_offset == 2 and partition.high_watermark == 2
    log.close()


def test_a_batch_whose_max_timestamp_will_be_recomputed_is_not_appended_on_the_loop(tmp_path: Path) -> None:
    """The roll test cannot trust maxTimestamp -1 (or one below the first timestamp): such a batch
    goes to the append thread, whose append rolls by the records' real maximum (segment.ms)."""
    log = _log(tmp_path, **{"segment.ms": 1000})
    partition = Partition("t", 0, uuid.uuid4(), log, 0, [0])
    now = now_ms()
    partition.append_records_to_leader(make_batch(1, timestamp=now - 10_000), AppendOrigin.CLIENT, now)
    for header_max in (-1, now - 20_000):
        late = make_batch(2, timestamp=now)  # 10 s after the segment's first batch: a time roll is due
        struct.pack_into(">q", late, 35, header_max)
        struct.pack_into(">I", late, 17, crc32c(bytes(late[21:])))
        assert not partition.reserve_append(late, now)
        assert log.lock.acquire(blocking=False)  # nothing left held
        log.lock.release()
    partition.append_records_to_leader(late, AppendOrigin.CLIENT, now)
    assert len(log.log_segments()) == 2 and log.log_segments()[-1].base_offset == 1
    assert parse_batch_header(log.read(1, 1 << 20).records.read_bytes()).max_timestamp == now + 1  # type: ignore[union-attr]
    log.close()


def test_replica_manager_answers_at_once_on_the_loop_and_later_from_the_thread(tmp_path: Path) -> None:
    """append_records: a list when every append was made on the loop; an awaitable when one
    had to go to the append thread (its log locked elsewhere), completed once it is written."""
    log = _log(tmp_path)

    async def scenario() -> None:
        executor = concurrent.futures.ThreadPoolExecutor(1)
        manager = ReplicaManager(0, None, AppendThread(executor))  # type: ignore[arg-type]  # no log manager
        partition = Partition("t", 0, uuid.uuid4(), log, 0, [0])
        manager.partitions[("t", 0)] = partition
        now = manager.append_records([("t", 0, make_batch(2))], 1, 1000)
        assert isinstance(now, list) and now[0].error_code == ErrorCode.NO_ERROR and now[0].info is not None
        assert now[0].info.first_offset == 0
        unknown = manager.append_records([("u", 0, make_batch(1))], 1, 1000)
        assert isinstance(unknown, list) and unknown[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        held, release = threading.Event(), threading.Event()

        def hold() -> None:  # another thread (the cleaner, say) holds the log's lock
            with log.lock:
                held.set()
                release.wait(5)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            held.wait(5)
            later = manager.append_records([("t", 0, make_batch(3))], -1, 1000)
            assert not isinstance(later, list)
            # Queued behind it: a second request may not overtake on the loop.
            queued = manager.append_records([("t", 0, make_batch(1))], 1, 1000)
            assert not isinstance(queued, list)
        finally:
            release.set()
            holder.join()
        first, second = await later, await queued  # type: ignore[misc]
        assert [r.info.first_offset for r in first + second if r.info] == [2, 5]
        assert log.log_end_offset == 6
        executor.shutdown()

    asyncio.run(scenario())
    log.close()
