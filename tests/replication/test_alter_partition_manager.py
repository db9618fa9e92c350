"""AlterPartitionManager against a real socket server playing the controller: batching, one
request in flight, per-partition errors, retries after NOT_CONTROLLER and lost controllers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import pytest

from protocol.errors import ErrorCode
from replication.alter_partition_manager import AlterPartitionError, AlterPartitionManager
from replication.partition_state import LeaderAndIsr
from tests.in_process import run
from tests.replication.replication_rig import Controller, KafkaServer

TOPIC_ID = uuid.uuid4()


def _controller() -> Controller:
    controller = Controller()
    controller.ids[TOPIC_ID] = "t"
    for index in range(3):
        controller.states[("t", index)] = LeaderAndIsr(0, 2, (0, 1, 2), 5)
    return controller


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    run(scenario(), 30)


def test_changes_are_batched_and_answered_per_partition() -> None:
    async def scenario() -> None:
        controller = _controller()
        server = KafkaServer(None, {}, controller)
        port = await server.start()
        manager = AlterPartitionManager(0, lambda: 7, lambda: (0, "127.0.0.1", port), retry_backoff_ms=10)
        try:
            ok0 = manager.submit("t", TOPIC_ID, 0, LeaderAndIsr(0, 2, (0, 1), 5))
            ok1 = manager.submit("t", TOPIC_ID, 1, LeaderAndIsr(0, 2, (0, 2), 5))
            stale = manager.submit("t", TOPIC_ID, 2, LeaderAndIsr(0, 2, (0,), 4))
            fenced = manager.submit("t", TOPIC_ID, 2, LeaderAndIsr(0, 1, (0,), 5))  # t-2 has one in flight
            with pytest.raises(AlterPartitionError) as refused:
                await fenced
            assert refused.value.error_code == ErrorCode.OPERATION_NOT_ATTEMPTED
            assert await ok0 == LeaderAndIsr(0, 2, (0, 1), 6)
            assert await ok1 == LeaderAndIsr(0, 2, (0, 2), 6)
            with pytest.raises(AlterPartitionError) as invalid:
                await stale
            assert invalid.value.error_code == ErrorCode.INVALID_UPDATE_VERSION
            assert controller.requests == 1 and manager.pending == 0
            # A stale leader epoch is FENCED_LEADER_EPOCH.
            with pytest.raises(AlterPartitionError) as old:
                await manager.submit("t", TOPIC_ID, 2, LeaderAndIsr(0, 1, (0,), 5))
            assert old.value.error_code == ErrorCode.FENCED_LEADER_EPOCH
        finally:
            await manager.shutdown()
            await server.close()

    _run(scenario)


def test_not_controller_and_a_lost_controller_are_retried_at_the_new_one() -> None:
    async def scenario() -> None:
        controller = _controller()
        old = KafkaServer(None, {}, controller)
        new = KafkaServer(None, {}, controller)
        old_port, new_port = await old.start(), await new.start()
        where = {"node": (0, "127.0.0.1", old_port)}
        manager = AlterPartitionManager(0, lambda: 7, lambda: where["node"], retry_backoff_ms=10)
        try:
            controller.fail_next = [ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_CONTROLLER]
            answer = manager.submit("t", TOPIC_ID, 0, LeaderAndIsr(0, 2, (0, 1), 5))
            for _ in range(1000):  # at most 5 s
                if controller.requests:
                    break
                await asyncio.sleep(0.005)
            assert controller.requests, "the first AlterPartition never came"
            where["node"] = (1, "127.0.0.1", new_port)  # the controller moved
            assert await asyncio.wait_for(answer, 5) == LeaderAndIsr(0, 2, (0, 1), 6)
            assert old.requests.get(56, 0) >= 1 and new.requests.get(56, 0) >= 1
            # The controller is unreachable for a while: the change waits and goes through after.
            await new.close()
            pending = manager.submit("t", TOPIC_ID, 1, LeaderAndIsr(0, 2, (0,), 5))
            await asyncio.sleep(0.1)
            assert not pending.done()
            where["node"] = (0, "127.0.0.1", old_port)
            assert await asyncio.wait_for(pending, 5) == LeaderAndIsr(0, 2, (0,), 6)
        finally:
            await manager.shutdown()
            await old.close()
            await new.close()

    _run(scenario)


def test_shutdown_fails_what_is_unanswered() -> None:
    async def scenario() -> None:
        manager = AlterPartitionManager(0, lambda: 7, lambda: None, retry_backoff_ms=10)
        pending = manager.submit("t", TOPIC_ID, 0, LeaderAndIsr(0, 2, (0,), 5))
        await asyncio.sleep(0.05)
        await manager.shutdown()
        with pytest.raises(AlterPartitionError):
            await pending

    _run(scenario)


def test_version_2_sends_the_isr_without_epochs() -> None:
    async def scenario() -> None:
        controller = _controller()
        server = KafkaServer(None, {}, controller)
        server.max_versions[56] = 2
        port = await server.start()
        manager = AlterPartitionManager(0, lambda: 7, lambda: (0, "127.0.0.1", port), retry_backoff_ms=10)
        try:
            assert await manager.submit("t", TOPIC_ID, 0, LeaderAndIsr(0, 2, (0, 2), 5)) == LeaderAndIsr(0, 2, (0, 2), 6)
            assert (56, 2) in server.versions
            assert (56, 3) not in server.versions
        finally:
            await manager.shutdown()
            await server.close()

    _run(scenario)
