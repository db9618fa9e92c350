"""The fetch purgatory: long polls that end as soon as data arrives.

A fetch that finds fewer than ``min_bytes`` waits up to ``max_wait_ms``. Kafka
parks it in a purgatory keyed by partition and completes it when an append to
one of its partitions (or a high-watermark move) could satisfy it; it must not
simply sleep out the wait, or end-to-end latency becomes half the wait.

Appends finish on the event loop (the append thread's future resolves there),
so ``notify`` and ``wait`` never race: between a fetch's read and its
registration there is no await.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class FetchPurgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[_Waiter]] = {}
        self._closed = False

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> list[Hashable]:
        """Wait until one of ``keys`` is notified or ``timeout`` passes: the keys notified
        meanwhile (at least one), or an empty list when the wait ran out."""
        if timeout <= 0 or self._closed:
            return []
        loop = asyncio.get_running_loop()
        # One future and one timer handle: asyncio.wait_for would add a future and callbacks to
        # every long poll, and followers long-poll once per append. Every key notified before the
        # waiter resumes is recorded, so the fetch can read just those partitions again.
        waiter = _Waiter(loop.create_future())
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(waiter)
        timer = loop.call_later(timeout, _end, waiter.future)
        try:
            await waiter.future
            return waiter.notified
        finally:
            timer.cancel()
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(waiter)
                    if not watchers:
                        del self._watchers[key]

    @property
    def watching(self) -> bool:
        """Some fetch is waiting (appends skip notifying when none is)."""
        return bool(self._watchers)

    def notify(self, key: Hashable) -> None:
        if not self._watchers:  # every appended partition notifies; usually nobody waits
            return
        watchers = self._watchers.pop(key, None)
        if watchers:
            for waiter in watchers:
                waiter.notified.append(key)
                _end(waiter.future)

    def shutdown(self) -> None:
        """Complete every waiting fetch now, so shutdown does not wait out long polls."""
        self._closed = True
        for watchers in self._watchers.values():
            for waiter in watchers:
                _end(waiter.future)
        self._watchers.clear()


class _Waiter:
    """One parked fetch: its future, and the keys notified since it parked."""

    __slots__ = ("future", "notified")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.notified: list[Hashable] = []


def _end(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
