"""Coordinators move with their partitions: load on election, unload on resignation.

The group and transaction coordinators over an in-memory internal topic whose
leadership the test moves (``LedLog``): a partition not led here answers
NOT_COORDINATOR to every API, one being loaded COORDINATOR_LOAD_IN_PROGRESS,
a resignation unloads (also in the middle of a load, whose read is then
dropped), and a new election loads the partition again from its log.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

from coordinator.common.coordinator_log import LogEntry
from coordinator.common.scheduler import ManualScheduler
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.group.group_membership import GroupConfig
from coordinator.group.group_metadata import GroupState, OffsetAndMetadata
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.transaction.transaction_coordinator import TransactionCoordinator
from coordinator.transaction.transaction_marker_channel_manager import TransactionMarkerChannelManager
from coordinator.transaction.transaction_state_manager import TransactionResult, TransactionStateManager
from protocol.errors import ErrorCode
from pytest_pafka.waiting import wait_until_async
from tests.coordinator.fakes import MemoryCoordinatorLog, Outcome, heartbeat, join, join_new, leave, sync
from tests.coordinator.test_transaction_coordinator import FakeSender

NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
LOADING = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
TP = ("t", 0)
WAIT_S = 10.0


class LedLog(MemoryCoordinatorLog):
    """An internal topic of which this broker leads only ``led``; reads wait for ``gate`` (a load in progress)."""

    def __init__(self, num_partitions: int = 4) -> None:
        super().__init__(num_partitions)
        self.led: set[int] = set()
        self.gate = threading.Event()
        self.gate.set()

    def is_local_leader(self, partition: int) -> bool:
        return partition in self.led

    def read_entries(self, partition: int) -> Iterator[LogEntry]:
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        return super().read_entries(partition)

    def read_records(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        return super().read_records(partition)


# -- the group coordinator ----------------------------------------------------------------------
def _group_coordinator(log: LedLog, clock: ManualScheduler) -> GroupCoordinator:
    manager = GroupMetadataManager(0, log, clock)
    coordinator = GroupCoordinator(0, GroupConfig(group_initial_rebalance_delay_ms=0), manager, clock)
    coordinator.startup()  # leads nothing yet
    return coordinator


def _commit(coordinator: GroupCoordinator, group: str, offset: int) -> ErrorCode:
    answers = Outcome()
    coordinator.handle_commit_offsets(group, "", None, -1, {TP: OffsetAndMetadata(offset, -1, "", 1)},
                                      answers)
    return answers.result[TP]


GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "TxnOffsetCommit", "OffsetFetch",
              "DescribeGroups", "DeleteGroups", "OffsetDelete")


def _every_group_api(coordinator: GroupCoordinator, group: str) -> dict[str, ErrorCode]:
    """The error each group API answers for ``group`` right now."""
    out: dict[str, ErrorCode] = {}
    joined = join(coordinator, group, client_id="c", protocols=[("range", b"")])
    out["JoinGroup"] = joined.result.error
    out["SyncGroup"] = sync(coordinator, "m", 1, group=group).result.error
    out["Heartbeat"] = heartbeat(coordinator, group, "m", None, 1)
    out["LeaveGroup"] = leave(coordinator, group, [("m", None)])[0]
    out["OffsetCommit"] = _commit(coordinator, group, 1)
    txn_committed = Outcome()
    coordinator.handle_txn_commit_offsets(group, 5, 0, "", None, -1, {TP: OffsetAndMetadata(1, -1, "", 1)},
                                          txn_committed)
    out["TxnOffsetCommit"] = txn_committed.result[TP]
    out["OffsetFetch"] = coordinator.handle_fetch_offsets(group, False, [TP])[0]
    out["DescribeGroups"] = coordinator.handle_describe_group(group)[0]
    deleted = Outcome()
    coordinator.handle_delete_groups([group], deleted)
    out["DeleteGroups"] = deleted.result[group]
    offsets_deleted: list[ErrorCode] = []
    coordinator.handle_delete_offsets(group, [TP], lambda error, _by_tp: offsets_deleted.append(error))
    out["OffsetDelete"] = offsets_deleted[0]
    assert set(out) == set(GROUP_APIS)
    return out


def test_group_apis_answer_not_coordinator_and_load_in_progress() -> None:
    async def scenario() -> None:
        log, clock = LedLog(), ManualScheduler()
        coordinator = _group_coordinator(log, clock)
        group = "g"
        partition = coordinator.manager.partition_for(group)
        assert set(_every_group_api(coordinator, group).values()) == {NOT_COORDINATOR}

        log.led.add(partition)
        coordinator.on_election(partition)  # an empty partition: owned at once
        assert _commit(coordinator, group, 42) == ErrorCode.NO_ERROR
        coordinator.on_resignation(partition)
        log.led.discard(partition)
        assert set(_every_group_api(coordinator, group).values()) == {NOT_COORDINATOR}
        assert coordinator.manager.get_group(group) is None

        log.gate.clear()
        log.led.add(partition)
        coordinator.on_election(partition)  # holds data now: loaded in the background
        # As Kafka answers during a load: a heartbeat is accepted blindly, a sync told to rejoin.
        assert _every_group_api(coordinator, group) == {
            **dict.fromkeys(GROUP_APIS, LOADING), "Heartbeat": ErrorCode.NO_ERROR,
            "SyncGroup": ErrorCode.REBALANCE_IN_PROGRESS}
        assert coordinator.handle_list_groups(set())[0] == LOADING
        log.gate.set()
        await wait_until_async(lambda: partition in coordinator.manager.owned_partitions, WAIT_S, "the load")
        assert coordinator.handle_fetch_offsets(group, False, [TP])[1][TP].offset == 42  # type: ignore[union-attr]
        await coordinator.shutdown()

    asyncio.run(scenario())


def test_a_resignation_during_a_load_drops_what_it_read() -> None:
    async def scenario() -> None:
        log, clock = LedLog(), ManualScheduler()
        coordinator = _group_coordinator(log, clock)
        partition = coordinator.manager.partition_for("g")
        log.led.add(partition)
        coordinator.on_election(partition)
        assert _commit(coordinator, "g", 7) == ErrorCode.NO_ERROR
        coordinator.on_resignation(partition)

        log.gate.clear()
        coordinator.on_election(partition)
        assert partition in coordinator.manager.loading_partitions
        coordinator.on_resignation(partition)  # leadership leaves while the read is blocked
        log.led.discard(partition)
        log.gate.set()
        await wait_until_async(lambda: not coordinator._load_tasks, WAIT_S, "the abandoned load to end")
        assert partition not in coordinator.manager.owned_partitions
        assert partition not in coordinator.manager.loading_partitions
        assert coordinator.manager.get_group("g") is None
        assert coordinator.handle_fetch_offsets("g", False, [TP])[0] == NOT_COORDINATOR

        # Elected again: loaded again, from the log.
        log.led.add(partition)
        coordinator.on_election(partition)
        await wait_until_async(lambda: partition in coordinator.manager.owned_partitions, WAIT_S, "the second load")
        assert coordinator.handle_fetch_offsets("g", False, [TP])[1][TP].offset == 7  # type: ignore[union-attr]
        await coordinator.shutdown()

    asyncio.run(scenario())


def test_a_resignation_answers_parked_members_and_stops_their_timers() -> None:
    async def scenario() -> None:
        log, clock = LedLog(), ManualScheduler()
        coordinator = _group_coordinator(log, clock)
        partition = coordinator.manager.partition_for("g")
        log.led.add(partition)
        coordinator.on_election(partition)
        member, joined = join_new(coordinator, "g")
        clock.advance(0)
        assert joined.result.error == ErrorCode.NO_ERROR
        group = coordinator.manager.get_group("g")
        assert group is not None
        # A second member's join parks the group in PreparingRebalance, waiting for the first.
        _second, parked = join_new(coordinator, "g")
        assert not parked.done
        timers_before = clock.pending
        assert timers_before > 0

        coordinator.on_resignation(partition)
        log.led.discard(partition)
        assert parked.result.error == NOT_COORDINATOR
        assert group.is_(GroupState.DEAD)
        # Heartbeats and the join's delay are cancelled: only the coordinator's offset expiry is left.
        assert clock.pending == 1
        written = len(log.records.get(partition, []))
        clock.advance(600_000)
        assert len(log.records.get(partition, [])) == written  # nothing fires for the unloaded group
        assert heartbeat(coordinator, "g", member, None, 1) == NOT_COORDINATOR
        await coordinator.shutdown()

    asyncio.run(scenario())


def test_a_request_arriving_before_the_election_adopts_the_partition() -> None:
    """The replica manager's election hop may trail a client that already found this broker."""
    async def scenario() -> None:
        log, clock = LedLog(), ManualScheduler()
        coordinator = _group_coordinator(log, clock)
        partition = coordinator.manager.partition_for("g")
        log.led.add(partition)
        assert _commit(coordinator, "g", 3) == ErrorCode.NO_ERROR  # adopted (empty) by the request
        coordinator.on_election(partition)  # the trailing election changes nothing
        assert coordinator.handle_fetch_offsets("g", False, [TP])[1][TP].offset == 3  # type: ignore[union-attr]
        await coordinator.shutdown()

    asyncio.run(scenario())


# -- the transaction coordinator ---------------------------------------------------------------
def _txn_coordinator(log: LedLog, clock: ManualScheduler) -> tuple[TransactionCoordinator, FakeSender]:
    manager = TransactionStateManager(0, log, clock)
    sender = FakeSender()
    channel = TransactionMarkerChannelManager(0, manager, sender, lambda tp: 0, clock, retry_backoff_ms=100)
    next_pid = iter(range(1000, 2000))

    async def generate() -> int:
        return next(next_pid)

    return TransactionCoordinator(0, manager, channel, generate, clock, lambda group: 0), sender


async def _every_txn_api(coordinator: TransactionCoordinator, tid: str) -> dict[str, ErrorCode]:
    return {
        "InitProducerId": (await coordinator.handle_init_producer_id(tid, 60_000)).error,
        "AddPartitionsToTxn": await coordinator.handle_add_partitions_to_transaction(tid, 1000, 0, {TP}),
        "AddPartitionsToTxn(verify)": coordinator.verify_partitions_in_transaction(tid, 1000, 0, {TP})[TP],
        "AddOffsetsToTxn": await coordinator.handle_add_offsets_to_transaction(tid, 1000, 0, "g"),
        "EndTxn": await coordinator.handle_end_transaction(tid, 1000, 0, TransactionResult.COMMIT),
        "DescribeTransactions": coordinator.handle_describe_transactions(tid).error,
    }


def test_transaction_apis_answer_not_coordinator_and_load_in_progress() -> None:
    async def scenario() -> None:
        log, clock = LedLog(), ManualScheduler()
        coordinator, sender = _txn_coordinator(log, clock)
        manager = coordinator.txn_manager
        tid = "tid"
        partition = manager.partition_for(tid)
        assert set((await _every_txn_api(coordinator, tid)).values()) == {NOT_COORDINATOR}

        log.led.add(partition)
        manager.load_transactions_for_txn_topic_partition(partition, 5)  # empty: owned at once
        init = await coordinator.handle_init_producer_id(tid, 60_000)
        assert init.error == ErrorCode.NO_ERROR
        assert await coordinator.handle_add_partitions_to_transaction(
            tid, init.producer_id, init.producer_epoch, {TP}) == ErrorCode.NO_ERROR
        sender.hold = True  # the commit's markers stay unanswered: the transaction is PrepareCommit
        assert await coordinator.handle_end_transaction(tid, init.producer_id, init.producer_epoch,
                                                  TransactionResult.COMMIT) == \
            ErrorCode.NO_ERROR
        for _ in range(20):
            await asyncio.sleep(0)
        assert tid in coordinator.marker_channel.pending

        coordinator.on_resignation(partition)
        log.led.discard(partition)
        assert tid not in coordinator.marker_channel.pending  # the next coordinator finishes it
        assert set((await _every_txn_api(coordinator, tid)).values()) == {NOT_COORDINATOR}
        assert coordinator.handle_list_transactions([], []).transaction_states == []

        log.gate.clear()
        log.led.add(partition)
        manager.load_transactions_for_txn_topic_partition(partition, 6)
        assert set((await _every_txn_api(coordinator, tid)).values()) == {LOADING}
        assert coordinator.handle_list_transactions([], []).error_code == LOADING
        sent_before = len(sender.sent)
        log.gate.set()
        await wait_until_async(lambda: partition in manager.transaction_metadata_cache, WAIT_S, "the load")
        # Loaded at the new epoch, the prepared commit is finished by this coordinator: markers again.
        await wait_until_async(lambda: len(sender.sent) > sent_before, WAIT_S, "the markers resent at the new epoch")
        assert sender.sent[-1][1].coordinator_epoch == 6 and sender.sent[-1][1].committed
        sender.hold = False
        sender.release()
        await wait_until_async(lambda: manager.get_transaction_state(tid)[1] is not None
                    and manager.get_transaction_state(tid)[1].transaction_metadata.state.state_name  # type: ignore[union-attr]
                    == "CompleteCommit", WAIT_S, "the completion")
        await coordinator.shutdown()

    asyncio.run(scenario())


def test_a_resignation_during_a_transaction_load_installs_nothing() -> None:
    async def scenario() -> None:
        log, clock = LedLog(), ManualScheduler()
        coordinator, _sender = _txn_coordinator(log, clock)
        manager = coordinator.txn_manager
        partition = manager.partition_for("tid")
        log.led.add(partition)
        manager.load_transactions_for_txn_topic_partition(partition, 1)
        assert (await coordinator.handle_init_producer_id("tid", 60_000)).error == ErrorCode.NO_ERROR
        coordinator.on_resignation(partition)
        log.gate.clear()
        manager.load_transactions_for_txn_topic_partition(partition, 2)
        coordinator.on_resignation(partition)
        log.led.discard(partition)
        log.gate.set()
        await wait_until_async(lambda: not manager._load_tasks, WAIT_S, "the abandoned load to end")
        assert partition not in manager.transaction_metadata_cache
        assert (await coordinator.handle_init_producer_id("tid", 60_000)).error == NOT_COORDINATOR
        await coordinator.shutdown()

    asyncio.run(scenario())
