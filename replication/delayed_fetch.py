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
        self._watchers: dict[Hashable, set[asyncio.Future[None]]] = {}
        self._closed = False

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """Wait until one of ``keys`` is notified or ``timeout`` passes; True if notified."""
        if timeout <= 0 or self._closed:
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
            return True
        except TimeoutError:
            return False
        finally:
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
                if not waiter.done():
                    waiter.set_result(None)

    def shutdown(self) -> None:
        """Complete every waiting fetch now, so shutdown does not wait out long polls."""
        self._closed = True
        for watchers in self._watchers.values():
            for waiter in watchers:
                if not waiter.done():
                    waiter.set_result(None)
        self._watchers.clear()
