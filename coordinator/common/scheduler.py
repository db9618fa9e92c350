"""Timers for the group coordinator: the clock it reads, the delays it schedules, the futures it completes.

Kafka drives the classic protocol with purgatories (delayed join, delayed
heartbeat, pending sync). Here every such delay is one timer on a
``Scheduler``: the broker passes an :class:`AsyncioScheduler` (the event loop's
``call_later``, every handle owned and cancelled at shutdown), unit tests pass
a :class:`ManualScheduler` whose clock only moves when the test says so, so
the state machine can be tested without sleeping. The futures a coordinator
hands out for requests that wait (a parked JoinGroup or SyncGroup) come from
the scheduler too: the event loop's in the broker, a loop that never runs in
tests, whose futures are completed and read synchronously.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Timer(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def now_ms(self) -> int: ...

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> Timer: ...

    def create_future(self) -> asyncio.Future[Any]: ...

    def shutdown(self) -> None: ...


class _AsyncioTimer:
    __slots__ = ("_handle", "_owner")

    def __init__(self, owner: AsyncioScheduler) -> None:
        self._owner = owner
        self._handle: asyncio.TimerHandle | None = None

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._owner._live.discard(self)
            self._handle = None


class AsyncioScheduler:
    """Timers on the running event loop; ``shutdown`` cancels every one still pending."""

    def __init__(self) -> None:
        self._live: set[_AsyncioTimer] = set()
        self._closed = False

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> Timer:
        timer = _AsyncioTimer(self)
        if self._closed:
            return timer

        def fire() -> None:
            self._live.discard(timer)
            timer._handle = None
            try:
                callback()
            except Exception:
                log.exception("group coordinator timer failed")

        timer._handle = asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, fire)
        self._live.add(timer)
        return timer

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    def shutdown(self) -> None:
        self._closed = True
        for timer in list(self._live):
            timer.cancel()


class _ManualTimer:
    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: int, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """A fake clock for tests: timers fire, in deadline order, only inside ``advance``."""

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self._now = start_ms
        self._queue: list[tuple[int, int, _ManualTimer]] = []
        self._seq = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None

    def now_ms(self) -> int:
        return self._now

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> Timer:
        timer = _ManualTimer(self._now + max(delay_ms, 0), callback)
        heapq.heappush(self._queue, (timer.deadline, next(self._seq), timer))
        return timer

    def advance(self, ms: int = 0) -> None:
        """Move the clock ``ms`` forward, firing every timer due on the way (also ones they schedule)."""
        target = self._now + ms
        while self._queue and self._queue[0][0] <= target:
            deadline, _, timer = heapq.heappop(self._queue)
            if timer.cancelled:
                continue
            self._now = max(self._now, deadline)
            timer.callback()
        self._now = target

    def create_future(self) -> asyncio.Future[Any]:
        """A future of the running loop, so an async test can await it; outside one, of a loop that
        never runs: a synchronous test reads it with ``done()`` and ``result()``."""
        try:
            return asyncio.get_running_loop().create_future()
        except RuntimeError:
            pass
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.create_future()

    @property
    def pending(self) -> int:
        return sum(1 for _, _, t in self._queue if not t.cancelled)

    def shutdown(self) -> None:
        for _, _, timer in self._queue:
            timer.cancel()
        self._queue.clear()
        if self._loop is not None:
            self._loop.close()
            self._loop = None
