"""The controller's event queue: Kafka's ControllerEventManager and its event thread.

Everything the controller does (a ZooKeeper watch firing, a broker's ControlledShutdown
or AlterPartition, ElectLeaders, the rebalance timer) becomes an event on one queue,
and one asyncio task (owned by the controller) processes them one at a time, so the
controller's state is only ever touched by one event at once even though processing
awaits ZooKeeper and the network. ZooKeeper watch callbacks only enqueue.

An event's result (or exception) goes to the future :meth:`put` returns, for callers
that answer a request with it. Events dropped by :meth:`clear_and_put` or at shutdown
fail with :class:`ControllerEventPreemptedError`, as Kafka's events' ``preempt`` answers
their callers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ControllerEvent", "ControllerEventManager", "ControllerEventPreemptedError"]

log = logging.getLogger(__name__)


class ControllerEventPreemptedError(Exception):
    """The event was dropped before it ran (controller resigning or shutting down)."""


@dataclass(slots=True)
class ControllerEvent:
    """One unit of controller work: ``process`` runs on the event task."""

    name: str
    process: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]
    enqueued_at: float = field(default_factory=time.monotonic)


class ControllerEventManager:
    """One queue, one processing task."""

    def __init__(self, controller_id: int) -> None:
        self.controller_id = controller_id
        self._queue: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.current: ControllerEvent | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-{self.controller_id}-events")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def put(self, name: str, process: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]:
        """Queue an event; the future gets what ``process`` returns (or raises)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(ControllerEvent(name, process, future))
        return future

    def clear_and_put(self, name: str, process: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]:
        """Drop every queued event (preempting it) and queue this one: Kafka's clearAndPut for Expire."""
        self._preempt_queued()
        return self.put(name, process)

    def queue_size(self) -> int:
        return self._queue.qsize()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._preempt_queued()

    def _preempt_queued(self) -> None:
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if not event.future.done():
                event.future.set_exception(ControllerEventPreemptedError(event.name))
                event.future.exception()  # retrieved: nobody may be waiting

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            self.current = event
            try:
                result = await event.process()
            except asyncio.CancelledError:
                if not event.future.done():
                    event.future.set_exception(ControllerEventPreemptedError(event.name))
                    event.future.exception()
                raise
            except Exception as exc:
                log.exception("controller %d: error processing event %s", self.controller_id, event.name)
                if not event.future.done():
                    event.future.set_exception(exc)
                    event.future.exception()
            else:
                if not event.future.done():
                    event.future.set_result(result)
            finally:
                self.current = None
