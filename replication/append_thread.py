"""The append thread: where appends that may block run, in arrival order.

Storage is synchronous. An append that may fsync (a roll, or ``flush.messages``)
must not run on the event loop, so it goes to one thread; an append that cannot
block may run on the loop itself, but only while that thread has nothing
queued, or it could overtake an earlier append to the same partition. The
broker creates the executor and hands it in; duties that mutate logs
(retention, segment deletion, flushes, producer expiry) and admin changes that
write files run here too, so they never race an append.

Work queued here always runs to its end: cancelling the future ``run`` returns
stops its waiter waiting, never the work. (A cancelled executor future used to
drop work still queued, and to count running work as finished, so an append on
the loop could start beside it.)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class AppendThread:
    __slots__ = ('_backlog', '_executor')

    def __init__(self, executor: concurrent.futures.Executor) -> None:
        self._executor = executor
        self._backlog = 0

    def run(self, fn: Callable[..., T], *args: Any,
            on_done: Callable[[asyncio.Future[T]], None] | None = None) -> asyncio.Future[T]:
        """Queue ``fn(*args)`` now (not when a task first runs); await the future for its result.

        ``on_done`` is called on the loop once the work has finished, whether or
        not anyone still waits for it (the replica manager wakes fetches there).
        """
        work = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        self._backlog += 1
        work.add_done_callback(self._finished)
        if on_done is not None:
            work.add_done_callback(on_done)
        return asyncio.shield(work)

    def _finished(self, _: asyncio.Future[Any]) -> None:
        self._backlog -= 1

    @property
    def idle(self) -> bool:
        """Nothing queued: an append made on the loop now cannot overtake an earlier one."""
        return self._backlog == 0

    def shutdown(self) -> None:
        """Wait for everything queued, then stop the thread."""
        self._executor.shutdown(wait=True)
