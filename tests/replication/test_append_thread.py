"""AppendThread: work queued runs to its end in arrival order, whatever becomes of its waiters."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

from replication.append_thread import AppendThread


def test_cancelling_a_waiter_neither_drops_nor_ends_its_work() -> None:
    """Work still queued runs; work running keeps the thread busy until it ends, so no append on
    the loop can start beside it; ``on_done`` hears of it though nobody waits any more."""
    async def scenario() -> tuple[list[str], list[bool], list[str]]:
        executor = concurrent.futures.ThreadPoolExecutor(1)
        thread = AppendThread(executor)
        gate = threading.Event()
        ran: list[str] = []
        idle_while_running: list[bool] = []
        heard: list[str] = []
        try:
            running = thread.run(lambda: (gate.wait(5), ran.append("first")))
            queued = thread.run(ran.append, "second", on_done=lambda f: heard.append("second"))
            await asyncio.sleep(0.05)
            running.cancel()
            queued.cancel()
            await asyncio.sleep(0.05)
            idle_while_running.append(thread.idle)
            gate.set()
            for _ in range(100):
                if thread.idle:
                    break
                await asyncio.sleep(0.01)
            idle_while_running.append(thread.idle)
            return ran, idle_while_running, heard
        finally:
            gate.set()
            executor.shutdown()

    ran, idle, heard = asyncio.run(scenario())
    assert ran == ["first", "second"]
    assert idle == [False, True]
    assert heard == ["second"]
