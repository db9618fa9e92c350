"""The fetch purgatory: long polls that end as soon as data arrives.

A fetch that finds fewer than ``min_bytes`` waits up to ``max_wait_ms``. Kafka
parks it in a purgatory keyed by partition and completes it when an append to
one of its partitions (or a high-watermark move) could satisfy it; it must not
simply sleep out the wait, or end-to-end latency becomes half the wait.

What can satisfy a fetch depends on who fetches, as in Kafka's DelayedFetch: a
follower reads to the log end, so only an append brings it bytes; a consumer
reads to the high watermark (or the last stable offset), so only a move of that
does. Each waits on its own side: an acks=all append wakes the followers and not
the consumers (whose read would stop at the unmoved high watermark), and the high
watermark's move then wakes the consumers and not the followers (who have those
bytes already; Kafka's followers learn the high watermark with their next data).
``notify`` wakes both: a leadership change ends every wait.

Appends finish on the event loop (the append thread's future resolves there),
so notifications and ``wait`` never race: between a fetch's read and its
registration there is no await.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class FetchPurgatory:
    def __init__(self) -> None:
        #: Fetches bound by the log end (followers) and by the high watermark (consumers).
        self._log_end: dict[Hashable, set[_Waiter]] = {}
        self._high_watermark: dict[Hashable, set[_Waiter]] = {}
        self._closed = False

    def park(self, keys: Iterable[Hashable], timeout: float, to_log_end: bool = False) -> ParkedFetch:
        """Register a fetch now, in the step of its read, and wait later: ``ParkedFetch.wait`` answers
        the keys notified meanwhile (at least one), or an empty list when ``timeout`` ran out.
        ``to_log_end``: the fetch reads to the log end (a follower's), else to the high watermark.

        A fetch answered by a task reads, then runs only once the loop schedules it: parked at
        once, it misses no append in between and need not read every partition again when it
        starts (a follower's fetch of dozens of idle partitions parks once per append).
        The registration ends when the wait does, or at the timeout if the wait never runs.
        """
        if timeout <= 0 or self._closed:
            return ParkedFetch(None, self._log_end, [], None)
        loop = asyncio.get_running_loop()
        # One future and one timer handle: asyncio.wait_for would add a future and callbacks to
        # every long poll, and followers long-poll once per append. Every key notified before the
        # waiter resumes is recorded, so the fetch can read just those partitions again.
        waiter = _Waiter(loop.create_future())
        side = self._log_end if to_log_end else self._high_watermark
        keys = list(keys)
        for key in keys:
            side.setdefault(key, set()).add(waiter)
        parked = ParkedFetch(waiter, side, keys, None)
        parked.timer = loop.call_later(timeout, parked.expire)
        return parked

    @property
    def watching(self) -> bool:
        """Some fetch is waiting (appends skip notifying when none is)."""
        return bool(self._log_end) or bool(self._high_watermark)

    def notify_log_end(self, key: Hashable) -> None:
        """An append to ``key``: the fetches reading to the log end may now find bytes."""
        _wake(self._log_end, key)

    def notify_high_watermark(self, key: Hashable) -> None:
        """``key``'s high watermark (or last stable offset) moved: consumers may now find bytes."""
        _wake(self._high_watermark, key)

    def notify(self, key: Hashable) -> None:
        """Something else changed for ``key`` (leadership, an append whose effect on the high
        watermark is not known here): every fetch waiting on it reads again."""
        _wake(self._log_end, key)
        _wake(self._high_watermark, key)

    def shutdown(self) -> None:
        """Complete every waiting fetch now, so shutdown does not wait out long polls."""
        self._closed = True
        for side in (self._log_end, self._high_watermark):
            for watchers in side.values():
                for waiter in watchers:
                    _end(waiter.future)
            side.clear()


def _wake(side: dict[Hashable, set[_Waiter]], key: Hashable) -> None:
    if not side:  # every appended partition notifies; usually nobody waits
        return
    watchers = side.pop(key, None)
    if watchers:
        for waiter in watchers:
            waiter.notified.append(key)
            _end(waiter.future)


class ParkedFetch:
    """A fetch registered in the purgatory: ``wait`` for a notification or the timeout, once."""

    __slots__ = ("keys", "side", "timer", "waiter")

    def __init__(self, waiter: _Waiter | None, side: dict[Hashable, set[_Waiter]], keys: list[Hashable],
                 timer: asyncio.TimerHandle | None) -> None:
        self.waiter = waiter
        self.side = side
        self.keys = keys
        self.timer = timer

    async def wait(self) -> list[Hashable]:
        """The keys notified since parking (at least one), or an empty list when the time ran out."""
        waiter = self.waiter
        if waiter is None:
            return []
        try:
            await waiter.future
            return waiter.notified
        finally:
            self.expire()

    def expire(self) -> None:
        """End the wait and leave the purgatory (idempotent)."""
        waiter = self.waiter
        if waiter is None:
            return
        self.waiter = None
        if self.timer is not None:
            self.timer.cancel()
        _end(waiter.future)
        side = self.side
        for key in self.keys:
            watchers = side.get(key)
            if watchers is not None:
                watchers.discard(waiter)
                if not watchers:
                    del side[key]


class _Waiter:
    """One parked fetch: its future, and the keys notified since it parked."""

    __slots__ = ("future", "notified")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.notified: list[Hashable] = []


def _end(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
