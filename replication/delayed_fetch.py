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
        self._watchers: dict[Hashable, set[asyncio.Future[bool]]] = {}
        self._closed = False

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """Wait until one of ``keys`` is notified or ``timeout`` passes; True if notified."""
        if timeout <= 0 or self._closed:
            return False
        loop = asyncio.get_running_loop()
        # The waiter's result says how it ended: True from notify, False from the timer. One
        # future and one timer handle: asyncio.wait_for would add a future and callbacks to
        # every long poll, and followers long-poll once per append.
        waiter: asyncio.Future[bool] = loop.create_future()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(waiter)
        timer = loop.call_later(timeout, _end, waiter, False)
        try:
            return await waiter
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
                _end(waiter, True)

    def shutdown(self) -> None:
        """Complete every waiting fetch now, so shutdown does not wait out long polls."""
        self._closed = True
        for watchers in self._watchers.values():
            for waiter in watchers:
                _end(waiter, True)
        self._watchers.clear()


def _end(waiter: asyncio.Future[bool], notified: bool) -> None:
    if not waiter.done():
        waiter.set_result(notified)
