"""Moving a replica between log dirs (AlterReplicaLogDirs): the answers, the copy, the swap, a restart."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from replication.append_thread import AppendThread
from replication.partition import Partition
from replication.replica_manager import ReplicaManager
from storage.log import FetchIsolation, Log
from storage.log_append import AppendOrigin
from storage.log_config import LogConfig
from storage.log_manager import LogManager
from tests.storage.helpers import make_batch

TP = ("t", 0)
PRODUCER_ID = 7


class _Broker:
    """A log manager over two dirs and a replica manager leading t-0 (in ``a``, the first)."""

    def __init__(self, root: Path) -> None:
        self.a, self.b = root / "a", root / "b"
        self.executor = concurrent.futures.ThreadPoolExecutor(1)
        self.log_manager = LogManager([self.a, self.b], LogConfig(segment_bytes=4096, file_delete_delay_ms=0))
        self.log_manager.startup()
        self.manager = ReplicaManager(0, self.log_manager, AppendThread(self.executor))
        self.topic_id = uuid.uuid4()

    def lead(self, topic: str = "t", index: int = 0) -> Partition:
        return self.manager.make_leader(topic, index, self.topic_id, [0])

    def stop(self) -> None:
        self.log_manager.shutdown()
        self.executor.shutdown()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[_Broker]:
    made = _Broker(tmp_path)
    yield made
    if made.log_manager.started:
        made.stop()


def _append(partition: Partition, first: int, count: int) -> None:
    for seq in range(first, first + count):
        partition.append_records_to_leader(
            make_batch(1, value_size=200, seed=seq, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=seq),
            AppendOrigin.CLIENT)


def _batches(log: Log) -> list[bytes]:
    info = log.read(log.log_start_offset, 1 << 30, isolation=FetchIsolation.LOG_END)
    return [] if info.records is None else [info.records.read_bytes()]


def _all_bytes(log: Log) -> bytes:
    out, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20, isolation=FetchIsolation.LOG_END)
        assert info.records is not None and info.next_offset is not None
        out += info.records.read_bytes()
        offset = info.next_offset
    return out


async def _until_moved(broker: _Broker) -> None:
    deadline = time.monotonic() + 10
    while broker.manager.alter_log_dirs.is_moving(TP):
        assert time.monotonic() < deadline, "the move did not finish"
        await asyncio.sleep(0.01)


def test_the_answers(broker: _Broker) -> None:
    partition = broker.lead()
    assert partition.log.dir.parent == broker.a

    async def ask(dirs: dict[tuple[str, int], str]) -> dict[tuple[str, int], int]:
        return await broker.manager.alter_replica_log_dirs(dirs)

    answers = asyncio.run(ask({TP: str(broker.a / "nowhere"), ("t", 1): str(broker.b), ("t", 2): str(broker.a)}))
    assert answers == {TP: ErrorCode.LOG_DIR_NOT_FOUND, ("t", 1): ErrorCode.REPLICA_NOT_AVAILABLE,
                       ("t", 2): ErrorCode.REPLICA_NOT_AVAILABLE}
    assert asyncio.run(ask({TP: str(broker.a)})) == {TP: ErrorCode.NO_ERROR}  # already there
    # A replica created later goes where it was asked to, whatever the dirs' counts say.
    assert broker.lead("t", 1).log.dir.parent == broker.b
    assert broker.lead("t", 2).log.dir.parent == broker.a
    broker.log_manager.failure_channel.maybe_add_offline_log_dir(broker.b, "test", OSError(5, "EIO"))
    assert asyncio.run(ask({TP: str(broker.b)})) == {TP: ErrorCode.KAFKA_STORAGE_ERROR}


def test_a_move_copies_then_swaps(broker: _Broker) -> None:
    partition = broker.lead()
    _append(partition, 0, 60)  # 4 KB segments: several of them
    before = _all_bytes(partition.log)
    old_dir = partition.log.dir

    async def move() -> None:
        assert await broker.manager.alter_replica_log_dirs({TP: str(broker.b.resolve())}) == {TP: ErrorCode.NO_ERROR}
        future = broker.log_manager.get_future_log(*TP)
        assert future is not None and future.dir.name.endswith("-future") and future.dir.parent == broker.b
        described = {d.path: d.partitions for d in broker.manager.describe_log_dirs(None)}
        assert [p.is_future for p in described[str(broker.b.resolve())]] == [True]
        _append(partition, 60, 5)  # appends during the copy reach the new log too
        await _until_moved(broker)

    asyncio.run(move())
    log = partition.log
    assert log.dir == broker.b / "t-0" and not old_dir.exists()
    assert broker.log_manager.log_dir_of(*TP) == broker.b and broker.log_manager.get_log(*TP) is log
    assert broker.log_manager.get_future_log(*TP) is None
    assert _all_bytes(log).startswith(before) and log.log_end_offset == 65 and log.high_watermark == 65
    # The producer state came along: the next sequence is accepted, a duplicate is not appended again.
    _append(partition, 65, 1)
    _append(partition, 65, 1)
    assert log.log_end_offset == 66
    broker.log_manager.delete_pending_segments()  # file.delete.delay.ms is 0: the old log goes
    assert [p.name for p in broker.a.iterdir() if p.is_dir()] == []


def test_a_restart_resumes_the_move(broker: _Broker, tmp_path: Path) -> None:
    partition = broker.lead()
    _append(partition, 0, 40)
    broker.manager.quotas.alter_log_dirs.update_quota(1)  # one chunk, then held back

    async def start_moving() -> None:
        await broker.manager.alter_replica_log_dirs({TP: str(broker.b)})
        await asyncio.sleep(0.2)
        await broker.manager.alter_log_dirs.close()

    asyncio.run(start_moving())
    future = broker.log_manager.get_future_log(*TP)
    assert future is not None and 0 < future.log_end_offset < 40
    broker.stop()

    again = _Broker(tmp_path)
    assert set(again.log_manager.future_logs) == {TP}
    partition = again.lead()
    assert partition.log.dir.parent == again.a

    async def resume() -> None:
        again.manager.alter_log_dirs.resume()
        await _until_moved(again)

    asyncio.run(resume())
    assert partition.log.dir == again.b / "t-0" and partition.log.log_end_offset == 40
    again.stop()


def test_a_crash_between_the_renames_keeps_the_future_log(broker: _Broker, tmp_path: Path) -> None:
    partition = broker.lead()
    _append(partition, 0, 10)
    future = broker.log_manager.create_future_log("t", 0, broker.b)
    for data in _batches(partition.log):
        future.append_as_follower(data)
    current_dir = partition.log.dir
    broker.stop()
    current_dir.rename(current_dir.with_name(f"t-0.{uuid.uuid4().hex}-delete"))  # the first rename only

    again = _Broker(tmp_path)
    log = again.log_manager.get_log(*TP)
    assert log is not None and log.dir == again.b / "t-0" and log.log_end_offset == 10
    assert again.log_manager.future_logs == {}
    assert not [p for p in again.a.iterdir() if p.is_dir()]  # the renamed current log was removed at load
    again.stop()
