"""Transactional offset commits in the group coordinator, over a real __consumer_offsets on disk:
pending until the transaction's marker is written to the group's partition (COMMIT makes them
visible, ABORT drops them), unstable for OffsetFetch with require_stable, and the same after a
restart of the log dir (markers in the log replayed, open transactions still pending)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.common.coordinator_log import RecordEntry, ReplicaCoordinatorLog, TxnMarkerEntry
from coordinator.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from coordinator.common.scheduler import ManualScheduler
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.group.group_membership import GroupConfig
from coordinator.group.group_metadata import OffsetAndMetadata, TopicPartition
from coordinator.group.group_metadata_manager import GroupMetadataManager
from protocol.errors import ErrorCode
from replication.append_thread import AppendThread
from replication.replica_manager import ReplicaManager, TxnMarker
from storage.log import now_ms
from storage.log_manager import LogManager
from tests.coordinator.fakes import Outcome, join_new, sync

NUM_PARTITIONS = 3
PID, EPOCH = 7000, 2
T0, T1 = ("in", 0), ("in", 1)


class Node:
    """A broker's log dir, replica manager and group coordinator; ``restart`` reopens them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.executor = concurrent.futures.ThreadPoolExecutor(1)
        self.topic_id = uuid.uuid4()
        self.log_manager = LogManager([root])
        self.rm = ReplicaManager(0, self.log_manager, AppendThread(self.executor))
        self.coordinator = self._start()

    def _start(self) -> GroupCoordinator:
        self.log_manager.startup()
        for index in range(NUM_PARTITIONS):
            self.rm.make_leader(GROUP_METADATA_TOPIC_NAME, index, self.topic_id, [0])
        log = ReplicaCoordinatorLog(GROUP_METADATA_TOPIC_NAME, NUM_PARTITIONS, self.rm, 5000)
        scheduler = ManualScheduler(start_ms=now_ms())
        coordinator = GroupCoordinator(0, GroupConfig(group_initial_rebalance_delay_ms=0),
                                       GroupMetadataManager(0, log, scheduler), scheduler)
        with_data = [p for p in range(NUM_PARTITIONS) if log.log_end_offset(p)]
        coordinator.startup(load_partitions=[p for p in range(NUM_PARTITIONS) if p not in with_data])
        for partition in with_data:  # what the broker does off the loop, done inline
            coordinator.load_partition(partition)
        # As broker.coordinator_wiring.follow_leadership wires it: markers reach the coordinator.
        self.rm.add_txn_marker_listener(GROUP_METADATA_TOPIC_NAME, coordinator.on_transaction_completed)
        return coordinator

    def restart(self, clean: bool) -> None:
        self.coordinator.shutdown_timers()
        if clean:
            self.log_manager.shutdown()
        else:
            self.log_manager.close_without_clean_shutdown()
        self.log_manager = LogManager([self.root])
        self.rm = ReplicaManager(0, self.log_manager, AppendThread(self.executor))
        self.coordinator = self._start()

    def partition_of(self, group: str) -> int:
        return self.coordinator.manager.partition_for(group)

    def close(self) -> None:
        self.coordinator.shutdown_timers()
        if self.log_manager.started:
            self.log_manager.shutdown()
        self.executor.shutdown()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "logs")
    try:
        yield n
    finally:
        n.close()


async def _settled(outcome: Outcome) -> dict[TopicPartition, ErrorCode]:
    for _ in range(200):  # appends call back on a later turn of the loop (or from the append thread)
        if outcome.done:
            return outcome.result  # type: ignore[no-any-return]
        await asyncio.sleep(0.005)
    raise AssertionError("the commit was never answered")


def _om(node: Node, offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, f"at {offset}", node.coordinator.scheduler.now_ms())


async def txn_commit(node: Node, offsets: dict[TopicPartition, int], group: str = "g", pid: int = PID,
                     epoch: int = EPOCH, member_id: str = "", generation: int = -1) -> dict[TopicPartition, ErrorCode]:
    outcome = Outcome()
    node.coordinator.handle_txn_commit_offsets(group, pid, epoch, member_id, None, generation,
                                               {tp: _om(node, o) for tp, o in offsets.items()}, outcome)
    return await _settled(outcome)


async def commit(node: Node, offsets: dict[TopicPartition, int], group: str = "g") -> dict[TopicPartition, ErrorCode]:
    outcome = Outcome()
    node.coordinator.handle_commit_offsets(group, "", None, -1, {tp: _om(node, o) for tp, o in offsets.items()},
                                           outcome)
    return await _settled(outcome)


async def marker(node: Node, committed: bool, partitions: list[int], pid: int = PID,
                 epoch: int = EPOCH) -> dict[TopicPartition, int]:
    """What the transaction coordinator's WriteTxnMarkers does on this broker."""
    entry = TxnMarker(pid, epoch, 0, committed, [(GROUP_METADATA_TOPIC_NAME, p) for p in partitions])
    outcome = node.rm.write_txn_markers([entry], 5000)
    return (outcome if isinstance(outcome, list) else await outcome)[0]


def fetch(node: Node, partitions: list[TopicPartition] | None = None, group: str = "g",
          require_stable: bool = False) -> tuple[dict[TopicPartition, int | None], set[TopicPartition]]:
    error, offsets, unstable = node.coordinator.handle_fetch_offsets(group, require_stable, partitions)
    assert error == ErrorCode.NO_ERROR
    return {tp: None if om is None else om.offset for tp, om in offsets.items()}, unstable


OK = ErrorCode.NO_ERROR


def test_offsets_are_pending_until_the_commit_marker(node: Node) -> None:
    async def scenario() -> None:
        assert await commit(node, {T0: 5}) == {T0: OK}
        assert await txn_commit(node, {T0: 10, T1: 20}) == {T0: OK, T1: OK}
        # Invisible: the committed offsets are the earlier ones...
        assert fetch(node, [T0, T1]) == ({T0: 5, T1: None}, set())
        assert fetch(node) == ({T0: 5}, set())
        # ... and a consumer that wants stable offsets is told to retry.
        assert fetch(node, [T0, T1, ("in", 2)], require_stable=True) == (
            {T0: None, T1: None, ("in", 2): None}, {T0, T1})
        # Written in the producer's transaction, in Kafka's formats.
        partition = node.partition_of("g")
        entries = list(node.coordinator.coordinator_log.read_entries(partition))
        assert [e.transactional_producer_id for e in entries if isinstance(e, RecordEntry)] == [-1, PID, PID]
        log = node.rm.get_partition(GROUP_METADATA_TOPIC_NAME, partition)
        assert log is not None and log.last_stable_offset == 1  # the open transaction holds the LSO

        # A marker on another partition of __consumer_offsets ends nothing of this group's.
        other = (partition + 1) % NUM_PARTITIONS
        assert await marker(node, True, [other]) == {(GROUP_METADATA_TOPIC_NAME, other): OK}
        assert fetch(node, [T0, T1]) == ({T0: 5, T1: None}, set())

        assert await marker(node, True, [partition]) == {(GROUP_METADATA_TOPIC_NAME, partition): OK}
        assert fetch(node, [T0, T1], require_stable=True) == ({T0: 10, T1: 20}, set())
        assert log.last_stable_offset == log.log_end_offset
        assert isinstance(list(node.coordinator.coordinator_log.read_entries(partition))[-1], TxnMarkerEntry)
        assert node.coordinator.manager.open_groups_for_producer == {}

    asyncio.run(scenario())


def test_abort_marker_drops_them(node: Node) -> None:
    async def scenario() -> None:
        await commit(node, {T0: 5})
        await txn_commit(node, {T0: 10, T1: 20})
        await marker(node, False, [node.partition_of("g")])
        assert fetch(node, [T0, T1], require_stable=True) == ({T0: 5, T1: None}, set())
        group = node.coordinator.manager.get_group("g")
        assert group is not None and group.pending_txn_offset_commits == {}

    asyncio.run(scenario())


def test_a_commit_appended_after_the_transactional_one_wins(node: Node) -> None:
    async def scenario() -> None:
        await txn_commit(node, {T0: 10, T1: 20})
        await commit(node, {T0: 7})  # after the transaction's offsets in the log
        await marker(node, True, [node.partition_of("g")])
        assert fetch(node, [T0, T1]) == ({T0: 7, T1: 20}, set())

    asyncio.run(scenario())
    node.restart(clean=True)
    assert fetch(node, [T0, T1]) == ({T0: 7, T1: 20}, set())  # the reload keeps the log's order


def test_a_fenced_producer_epoch_is_refused_by_the_partition(node: Node) -> None:
    async def scenario() -> None:
        await txn_commit(node, {T0: 10})
        await marker(node, False, [node.partition_of("g")], epoch=EPOCH + 1)  # the coordinator fenced EPOCH
        assert await txn_commit(node, {T0: 11}) == {T0: ErrorCode.INVALID_PRODUCER_EPOCH}
        group = node.coordinator.manager.get_group("g")
        assert group is not None and group.pending_txn_offset_commits == {}
        assert node.coordinator.manager.open_groups_for_producer == {}
        assert fetch(node, [T0], require_stable=True) == ({T0: None}, set())

    asyncio.run(scenario())


def test_member_and_generation_are_checked_when_given(node: Node) -> None:
    async def scenario() -> None:
        assert await txn_commit(node, {T0: 1}, group="") == {T0: ErrorCode.INVALID_GROUP_ID}
        member_id, joined = join_new(node.coordinator, "g")
        node.coordinator.scheduler.advance(0)  # type: ignore[attr-defined]
        generation = joined.result.generation_id
        await asyncio.sleep(0.05)  # the group's metadata write
        sync(node.coordinator, member_id, generation, {member_id: b""})
        await asyncio.sleep(0.05)
        assert await txn_commit(node, {T0: 1}, member_id="stranger", generation=generation) == {
            T0: ErrorCode.UNKNOWN_MEMBER_ID}
        assert await txn_commit(node, {T0: 1}, member_id=member_id, generation=generation + 1) == {
            T0: ErrorCode.ILLEGAL_GENERATION}
        assert await txn_commit(node, {T0: 2}, member_id=member_id, generation=generation) == {T0: OK}
        # Before TxnOffsetCommit v3 a producer names no member: accepted for a group with members.
        assert await txn_commit(node, {T1: 3}, pid=PID + 1) == {T1: OK}
        await marker(node, True, [node.partition_of("g")])
        await marker(node, True, [node.partition_of("g")], pid=PID + 1)
        assert fetch(node, [T0, T1]) == ({T0: 2, T1: 3}, set())

    asyncio.run(scenario())


@pytest.mark.parametrize("clean", [True, False], ids=["clean-shutdown", "crash"])
def test_a_restart_replays_markers_and_keeps_open_transactions_pending(node: Node, clean: bool) -> None:
    committed, aborted, open_ = PID, PID + 1, PID + 2

    async def before() -> None:
        await commit(node, {T0: 1, T1: 1})
        await txn_commit(node, {T0: 10}, pid=committed)
        await txn_commit(node, {T1: 20}, pid=aborted)
        await txn_commit(node, {T0: 30, T1: 30}, group="h", pid=open_)
        await txn_commit(node, {T1: 40}, group="only-pending", pid=open_)  # a group known only by them
        await marker(node, True, [node.partition_of("g")], pid=committed)
        await marker(node, False, [node.partition_of("g")], pid=aborted)

    asyncio.run(before())
    expected_g = ({T0: 10, T1: 1}, set())
    assert fetch(node, [T0, T1], require_stable=True) == expected_g
    node.restart(clean)

    async def after() -> None:
        assert fetch(node, [T0, T1], require_stable=True) == expected_g
        # The open transaction's offsets came back pending, for the marker that will end them.
        assert fetch(node, [T0, T1], group="h") == ({T0: None, T1: None}, set())
        assert fetch(node, [T0, T1], group="h", require_stable=True)[1] == {T0, T1}
        assert fetch(node, [T1], group="only-pending", require_stable=True)[1] == {T1}
        groups = {node.partition_of("h"), node.partition_of("only-pending")}
        assert await marker(node, True, sorted(groups), pid=open_) == dict.fromkeys(
            [(GROUP_METADATA_TOPIC_NAME, p) for p in sorted(groups)], OK)
        assert fetch(node, [T0, T1], group="h", require_stable=True) == ({T0: 30, T1: 30}, set())
        assert fetch(node, [T1], group="only-pending") == ({T1: 40}, set())

    asyncio.run(after())
    node.restart(clean)
    assert fetch(node, [T0, T1], group="h") == ({T0: 30, T1: 30}, set())
    assert fetch(node, [T0, T1]) == expected_g


def test_a_marker_written_while_the_partition_loads_is_applied_after_the_load(node: Node) -> None:
    async def write() -> None:
        await txn_commit(node, {T0: 10})

    asyncio.run(write())
    node.restart(clean=True)
    partition = node.partition_of("g")
    coordinator = node.coordinator

    async def load_racing_a_marker() -> None:
        coordinator.on_resignation(partition)
        coordinator.manager.begin_loading([partition])
        entries = list(coordinator.coordinator_log.read_entries(partition))  # the load's read, before the marker
        await marker(node, True, [partition])
        coordinator._apply_loaded(partition, entries)
        assert fetch(node, [T0], require_stable=True) == ({T0: 10}, set())

    asyncio.run(load_racing_a_marker())
