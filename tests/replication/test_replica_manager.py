"""ReplicaManager as the one way into partition data: delayed produce, fetches woken by any append."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
import uuid
from pathlib import Path

from protocol.errors import ErrorCode
from replication.append_thread import AppendThread
from replication.partition import Partition
from replication.replica_manager import FetchParams, ReplicaManager
from storage.log import Log
from storage.log_append import AppendOrigin
from storage.log_config import LogConfig
from tests.storage.helpers import make_batch


class _Wanted:
    """One partition of a fetch (the broker passes its session's CachedPartition)."""

    def __init__(self, topic: str, partition: int, fetch_offset: int, current_leader_epoch: int = -1) -> None:
        self.topic, self.partition, self.fetch_offset = topic, partition, fetch_offset
        self.max_bytes, self.current_leader_epoch = 1 << 20, current_leader_epoch
        self.last_fetched_epoch = -1


def _manager(tmp_path: Path, isr: list[int]) -> tuple[ReplicaManager, Partition, concurrent.futures.Executor]:
    log = Log.open(tmp_path / "t-0", LogConfig(), had_clean_shutdown=True)
    executor = concurrent.futures.ThreadPoolExecutor(1)
    manager = ReplicaManager(0, None, AppendThread(executor))  # type: ignore[arg-type]  # no log manager
    partition = Partition("t", 0, uuid.uuid4(), log, 0, isr)
    partition.isr = list(isr)  # a follower in the ISR: the high watermark waits for it
    manager.partitions[("t", 0)] = partition
    return manager, partition, executor


def _more_partitions(tmp_path: Path, manager: ReplicaManager, partition: Partition, count: int) -> list[Partition]:
    """Partitions 1..count of the same topic beside ``partition`` (0), led here."""
    others = []
    for index in range(1, count + 1):
        log = Log.open(tmp_path / f"t-{index}", LogConfig(), had_clean_shutdown=True)
        other = Partition("t", index, partition.topic_id, log, 0, [0])
        manager.partitions[("t", index)] = other
        others.append(other)
    return others


def _count_reads(manager: ReplicaManager) -> list[int]:
    """From now on, how many partitions each of the manager's log reads covers."""
    reads: list[int] = []
    read = manager.reader._read_from_log

    def counting(p: FetchParams, partitions: list[_Wanted]) -> object:
        reads.append(len(partitions))
        return read(p, partitions)  # type: ignore[arg-type]

    manager.reader._read_from_log = counting  # type: ignore[assignment, method-assign]
    return reads


def test_acks_all_waits_for_the_high_watermark(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager, partition, executor = _manager(tmp_path, [0, 1])
        pending = manager.append_records([("t", 0, make_batch(3))], -1, 5000)
        assert not isinstance(pending, list)  # the follower has not fetched it yet
        task = asyncio.ensure_future(pending)  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert not task.done()
        partition.log.update_high_watermark(2)  # the follower has 2 of the 3 records
        manager.on_high_watermark_advanced(("t", 0))
        await asyncio.sleep(0.05)
        assert not task.done()
        partition.log.update_high_watermark(3)
        manager.on_high_watermark_advanced(("t", 0))
        results = await asyncio.wait_for(task, 1)
        assert results[0].error_code == ErrorCode.NO_ERROR and results[0].info is not None
        # acks=1 does not wait for the follower.
        now = manager.append_records([("t", 0, make_batch(1))], 1, 5000)
        assert isinstance(now, list) and now[0].info is not None and now[0].info.first_offset == 3
        executor.shutdown()
        partition.log.close()

    asyncio.run(scenario())


def test_acks_all_times_out_with_request_timed_out(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager, partition, executor = _manager(tmp_path, [0, 1])
        pending = manager.append_records([("t", 0, make_batch(2))], -1, 100)
        results = await asyncio.wait_for(pending, 2)  # type: ignore[arg-type]
        assert results[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        executor.shutdown()
        partition.log.close()

    asyncio.run(scenario())


def test_acks_all_below_min_insync_replicas_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager, partition, executor = _manager(tmp_path, [0])
        partition.log.config = LogConfig.model_validate({"min.insync.replicas": 2})
        refused = manager.append_records([("t", 0, make_batch(1))], -1, 1000)
        assert isinstance(refused, list) and refused[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert partition.log_end_offset == 0
        executor.shutdown()
        partition.log.close()

    asyncio.run(scenario())


def test_a_parked_fetch_wakes_on_a_coordinator_append(tmp_path: Path) -> None:
    """Whoever appends (a client, a coordinator, later a follower), parked fetches wake."""
    async def scenario() -> None:
        manager, partition, executor = _manager(tmp_path, [0])
        params = FetchParams(replica_id=-1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        parked = manager.fetch_messages(params, [_Wanted("t", 0, 0)])
        assert not isinstance(parked, list)
        task = asyncio.ensure_future(parked)  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        appended = manager.append_records([("t", 0, make_batch(2))], -1, 1000, AppendOrigin.COORDINATOR)
        assert isinstance(appended, list)
        results = await asyncio.wait_for(task, 2)
        assert loop.time() - started < 1  # woken, not timed out
        assert results[0].error_code == ErrorCode.NO_ERROR and results[0].info is not None
        assert results[0].info.size > 0 and results[0].high_watermark == 2
        executor.shutdown()
        partition.log.close()

    asyncio.run(scenario())


def test_an_append_on_the_thread_wakes_fetches_though_its_request_was_cancelled(tmp_path: Path) -> None:
    """The records landed, so parked fetches wake, whatever became of the produce (its client went away)."""
    async def scenario() -> None:
        manager, partition, executor = _manager(tmp_path, [0])
        params = FetchParams(replica_id=-1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        parked = asyncio.ensure_future(manager.fetch_messages(params, [_Wanted("t", 0, 0)]))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        busy = manager.append_thread.run(time.sleep, 0.1)  # the thread is busy: the append queues behind it
        produce = manager.append_records([("t", 0, make_batch(2))], 1, 1000)
        assert not isinstance(produce, list)
        request = asyncio.ensure_future(produce)  # type: ignore[arg-type]
        await asyncio.sleep(0)
        request.cancel()  # the producer's connection closed
        results = await asyncio.wait_for(parked, 3)
        assert loop.time() - started < 1  # woken by the append, not at max_wait_ms
        assert results[0].info is not None and results[0].high_watermark == 2
        await busy
        executor.shutdown()
        partition.log.close()

    asyncio.run(scenario())


def test_fetch_is_fenced_by_leader_epoch(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager, partition, executor = _manager(tmp_path, [0])
        partition.leader_epoch = 5
        params = FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        results = manager.fetch_messages(params, [_Wanted("t", 0, 0, 4), _Wanted("t", 0, 0, 6), _Wanted("x", 0, 0)])
        assert isinstance(results, list)
        assert [r.error_code for r in results] == [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
                                                   ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        executor.shutdown()
        partition.log.close()

    asyncio.run(scenario())


def test_a_woken_fetch_reads_again_every_partition_appended_to_and_only_those(tmp_path: Path) -> None:
    """A fetch parked on many idle partitions wakes to read the ones appended to since it parked:
    both, when two appends land before it runs; the others keep their (empty) first answer."""
    async def scenario() -> None:
        manager, partition, executor = _manager(tmp_path, [0])
        others = _more_partitions(tmp_path, manager, partition, 3)
        params = FetchParams(replica_id=-1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        wanted = [_Wanted("t", index, 0) for index in range(4)]
        parked = manager.fetch_messages(params, wanted)
        assert not isinstance(parked, list)
        task = asyncio.ensure_future(parked)  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        reads = _count_reads(manager)
        for index in (1, 3):  # both land before the parked fetch runs again
            appended = manager.append_records([("t", index, make_batch(2 + index))], 1, 1000)
            assert isinstance(appended, list)
        results = await asyncio.wait_for(task, 2)
        assert reads == [2]  # one read, of the two partitions appended to
        sizes = [0 if r.info is None else r.info.size for r in results]
        assert sizes[0] == sizes[2] == 0 and sizes[1] > 0 and sizes[3] > 0
        assert [r.high_watermark for r in results] == [0, 3, 0, 5]
        executor.shutdown()
        for p in (partition, *others):
            p.log.close()

    asyncio.run(scenario())


def test_a_fetch_parks_in_the_step_of_its_read(tmp_path: Path) -> None:
    """The answering task runs later than the read: an append in between wakes it at once, and
    the idle partitions are read once in all (the fetch parked with its first read, it does not
    read every partition again when its task starts)."""
    async def scenario() -> None:
        manager, partition, executor = _manager(tmp_path, [0])
        others = _more_partitions(tmp_path, manager, partition, 3)
        reads = _count_reads(manager)
        params = FetchParams(replica_id=-1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        parked = manager.fetch_messages(params, [_Wanted("t", index, 0) for index in range(4)])
        assert not isinstance(parked, list) and reads == [4]
        # Before the task that answers it first runs:
        appended = manager.append_records([("t", 2, make_batch(3))], 1, 1000)
        assert isinstance(appended, list)
        loop = asyncio.get_running_loop()
        started = loop.time()
        results = await asyncio.wait_for(parked, 2)  # type: ignore[arg-type]
        assert loop.time() - started < 1  # the append was not missed
        assert reads == [4, 1]  # every partition once, then the one appended to
        assert [0 if r.info is None else r.info.size for r in results][2] > 0
        assert not manager.fetch_purgatory.watching  # the registration ended with the wait
        executor.shutdown()
        for p in (partition, *others):
            p.log.close()

    asyncio.run(scenario())


def test_a_parked_fetch_whose_task_never_runs_leaves_the_purgatory_at_its_deadline(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager, partition, executor = _manager(tmp_path, [0])
        params = FetchParams(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        parked = manager.fetch_messages(params, [_Wanted("t", 0, 0)])
        assert not isinstance(parked, list) and manager.fetch_purgatory.watching
        parked.close()  # type: ignore[attr-defined]  # e.g. its connection closed before the task ran
        await asyncio.sleep(0.3)
        assert not manager.fetch_purgatory.watching
        executor.shutdown()
        partition.log.close()

    asyncio.run(scenario())


def test_an_append_wakes_followers_and_a_high_watermark_move_wakes_consumers(tmp_path: Path) -> None:
    """Kafka's DelayedFetch: a follower reads to the log end, a consumer to the high watermark.
    An acks=all append wakes the follower's long poll and leaves the consumer's parked (its read
    would stop at the same high watermark); the high watermark's move wakes the consumer and not
    a follower that already has the bytes."""
    async def scenario() -> None:
        manager, partition, executor = _manager(tmp_path, [0, 1])
        reads: list[str] = []
        read = manager.reader._read_from_log

        def counting(p: FetchParams, partitions: list[_Wanted]) -> object:
            reads.append("follower" if p.is_from_follower else "consumer")
            return read(p, partitions)  # type: ignore[arg-type]

        manager.reader._read_from_log = counting  # type: ignore[assignment, method-assign]
        consumer = FetchParams(replica_id=-1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        follower = FetchParams(replica_id=1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        consumer_task = asyncio.ensure_future(manager.fetch_messages(consumer, [_Wanted("t", 0, 0)]))  # type: ignore[arg-type]
        follower_task = asyncio.ensure_future(manager.fetch_messages(follower, [_Wanted("t", 0, 0)]))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        reads.clear()
        produce = asyncio.ensure_future(manager.append_records([("t", 0, make_batch(3))], -1, 5000))  # type: ignore[arg-type]
        fetched = await asyncio.wait_for(follower_task, 1)
        assert fetched[0].info is not None and fetched[0].info.size > 0
        await asyncio.sleep(0.05)
        assert reads == ["follower"]  # the consumer was not woken to read nothing
        assert not consumer_task.done() and not produce.done()
        # The follower fetches again from the log end (3): the high watermark moves to 3 and the
        # consumer wakes with the records.
        follower_again = asyncio.ensure_future(manager.fetch_messages(follower, [_Wanted("t", 0, 3)]))  # type: ignore[arg-type]
        assert partition.high_watermark == 3
        consumed = await asyncio.wait_for(consumer_task, 1)
        assert consumed[0].info is not None and consumed[0].info.size > 0 and consumed[0].high_watermark == 3
        assert (await asyncio.wait_for(produce, 1))[0].error_code == ErrorCode.NO_ERROR
        await asyncio.sleep(0.05)
        # Another high watermark notification (an ISR change, say) leaves the parked follower be.
        reads.clear()
        manager.on_high_watermark_advanced(("t", 0))
        await asyncio.sleep(0.05)
        assert reads == [] and not follower_again.done()
        follower_again.cancel()
        executor.shutdown()
        partition.log.close()

    asyncio.run(scenario())
