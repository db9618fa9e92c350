"""GroupRebalance on its own, and the futures the coordinator answers group requests with."""

from __future__ import annotations

import asyncio

from coordinator.common.scheduler import AsyncioScheduler, ManualScheduler
from coordinator.group.group_coordinator import GroupCoordinator
from coordinator.group.group_metadata import GroupMetadata, GroupState, MemberMetadata
from coordinator.group.group_metadata_manager import GroupMetadataManager
from coordinator.group.group_rebalance import CoordinatorLogger, GroupConfig, GroupRebalance
from coordinator.group.group_requests import JoinGroupRequest
from protocol.errors import ErrorCode
from tests.coordinator.fakes import PROTOCOLS, MemoryCoordinatorLog, join_new, join_request, make_coordinator


def _rebalance(clock: ManualScheduler) -> tuple[GroupRebalance, GroupMetadataManager]:
    manager = GroupMetadataManager(0, MemoryCoordinatorLog(), clock)
    manager.owned_partitions.update(range(50))
    return GroupRebalance(GroupConfig(), manager, clock, CoordinatorLogger(0)), manager


def _stable_group_of_one(clock: ManualScheduler, manager: GroupMetadataManager) -> GroupMetadata:
    group = manager.add_group(GroupMetadata("g", GroupState.EMPTY, clock.now_ms()))
    group.add(MemberMetadata("m", None, "c", "/h", 30_000, 10_000, "consumer", list(PROTOCOLS)), None)
    group.transition_to(GroupState.PREPARING_REBALANCE, clock.now_ms())
    group.init_next_generation(clock.now_ms())
    group.transition_to(GroupState.STABLE, clock.now_ms())
    return group


def test_an_expired_heartbeat_removes_the_member_and_empties_the_group() -> None:
    clock = ManualScheduler()
    rebalance, manager = _rebalance(clock)
    group = _stable_group_of_one(clock, manager)
    rebalance.on_group_loaded(group)  # a heartbeat timer per member, as after a load
    clock.advance(9_999)
    assert group.has("m")
    clock.advance(1)
    # The rebalance it starts completes at once: nobody is left to wait for.
    assert not group.has("m") and group.is_(GroupState.EMPTY) and group.generation_id == 2


def test_a_heartbeat_pushes_the_expiry_back_and_shutdown_cancels_every_timer() -> None:
    clock = ManualScheduler()
    rebalance, manager = _rebalance(clock)
    group = _stable_group_of_one(clock, manager)
    rebalance.schedule_heartbeat(group, "m", 10_000)
    clock.advance(9_000)
    rebalance.schedule_heartbeat(group, "m", 10_000)
    clock.advance(9_000)
    assert group.has("m") and clock.pending == 1
    rebalance.shutdown()
    assert clock.pending == 0


def test_join_request_reads_the_kafka_defaults() -> None:
    request = JoinGroupRequest("g", "", None, "client", "/127.0.0.1", 30_000, 10_000, "consumer", tuple(PROTOCOLS))
    assert request.is_unknown_member and request.protocol_names == ["range", "roundrobin"]
    assert request.client_reason == "not provided"
    assert request.require_known_member_id and request.supports_skip_assignment


def test_a_parked_join_whose_connection_closed_does_not_stop_the_rebalance() -> None:
    coordinator = make_coordinator()
    _, gone = join_new(coordinator)
    _, stays = join_new(coordinator)
    gone.future.cancel()  # what the handler's task being cancelled does to the future it awaits
    coordinator.scheduler.advance(0)
    assert gone.future.cancelled()
    assert stays.result.error == ErrorCode.NO_ERROR and stays.result.generation_id == 1


def test_the_handler_awaits_the_future_the_coordinator_answers_with() -> None:
    async def scenario() -> tuple[ErrorCode, ErrorCode, int]:
        scheduler = AsyncioScheduler()
        manager = GroupMetadataManager(0, MemoryCoordinatorLog(), scheduler)
        coordinator = GroupCoordinator(0, GroupConfig(group_initial_rebalance_delay_ms=20), manager, scheduler)
        coordinator.startup(load_partitions=range(50))
        first = await coordinator.join_group(join_request())
        parked = coordinator.join_group(join_request(member_id=first.member_id))
        assert not parked.done()  # waits out group.initial.rebalance.delay.ms
        joined = await asyncio.wait_for(parked, 5)
        await coordinator.shutdown()
        return first.error, joined.error, joined.generation_id

    assert asyncio.run(scenario()) == (ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.NO_ERROR, 1)
