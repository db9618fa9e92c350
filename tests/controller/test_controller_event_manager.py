"""The controller's event queue: one event at a time, in order; results and errors to the caller; preemption."""

from __future__ import annotations

import asyncio

import pytest

from controller.controller_event_manager import ControllerEventManager, ControllerEventPreemptedError


def test_events_run_one_at_a_time_in_order_and_answer_their_callers() -> None:
    async def run() -> None:
        manager = ControllerEventManager(1)
        manager.start()
        running = 0
        order: list[int] = []

        def event(n: int):  # type: ignore[no-untyped-def]
            async def process() -> int:
                nonlocal running
                running += 1
                assert running == 1, "two events ran at once"
                await asyncio.sleep(0.01)
                order.append(n)
                running -= 1
                return n * 10
            return process

        futures = [manager.put(f"e{n}", event(n)) for n in range(5)]
        assert await asyncio.gather(*futures) == [0, 10, 20, 30, 40]
        assert order == [0, 1, 2, 3, 4]

        async def failing() -> None:
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            await manager.put("bad", failing)
        assert await manager.put("after", event(7)) == 70  # the queue survives a failed event
        await manager.close()

    asyncio.run(run())


def test_clear_and_put_preempts_queued_events_and_close_preempts_the_rest() -> None:
    async def run() -> None:
        manager = ControllerEventManager(1)
        manager.start()
        gate = asyncio.Event()

        async def blocked() -> str:
            await gate.wait()
            return "first"

        async def later() -> str:
            return "later"

        first = manager.put("first", blocked)
        queued = manager.put("queued", later)
        await asyncio.sleep(0.01)
        expire = manager.clear_and_put("Expire", later)
        with pytest.raises(ControllerEventPreemptedError):
            await queued
        gate.set()
        assert await first == "first"  # the running event finishes
        assert await expire == "later"
        gate.clear()
        running = manager.put("running", blocked)
        pending = manager.put("pending", later)
        await asyncio.sleep(0.01)
        await manager.close()
        for future in (running, pending):
            with pytest.raises(ControllerEventPreemptedError):
                await future
        assert not manager.running

    asyncio.run(run())
