"""The produce purgatory: ``acks=all`` appends waiting for the high watermark.

Kafka's DelayedProduce: a produce with ``acks=-1`` is answered once every
partition it appended to has a high watermark past its append (the ISR has
it), or with REQUEST_TIMED_OUT for the partitions still short when the
request's ``timeout_ms`` passes. With the leader as the only in-sync replica
the high watermark passes the append as it is made, so nothing waits here; a
follower's fetch that advances a high watermark calls ``check_and_complete``.

Event loop only: registration and completion never race (no await between the
replica manager's check of the high watermark and the registration).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

TopicPartition = tuple[str, int]


class DelayedProduce:
    __slots__ = ('future', 'required')

    def __init__(self, required: dict[TopicPartition, int]) -> None:
        #: Partition → the high watermark that acknowledges the append (its last offset + 1).
        self.required = required
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class ProducePurgatory:
    def __init__(self, high_watermark: Callable[[TopicPartition], int | None]) -> None:
        #: Reads a partition's current high watermark (None once the partition is gone).
        self._high_watermark = high_watermark
        self._watchers: dict[TopicPartition, list[DelayedProduce]] = {}

    async def wait(self, required: dict[TopicPartition, int], timeout: float) -> set[TopicPartition]:
        """Wait until every partition's high watermark reaches its required offset, or
        ``timeout`` (s) passes; the partitions still short (empty when all made it)."""
        delayed = DelayedProduce(dict(required))
        for tp in required:
            self._watchers.setdefault(tp, []).append(delayed)
        try:
            await asyncio.wait_for(asyncio.shield(delayed.future), timeout)
        except TimeoutError:
            pass
        finally:
            for tp in required:
                watchers = self._watchers.get(tp)
                if watchers is not None and delayed in watchers:
                    watchers.remove(delayed)
                    if not watchers:
                        del self._watchers[tp]
        return set(delayed.required)

    def check_and_complete(self, tp: TopicPartition) -> None:
        """The high watermark of ``tp`` may have moved: complete what it acknowledges."""
        watchers = self._watchers.get(tp)
        if not watchers:
            return
        hw = self._high_watermark(tp)
        for delayed in list(watchers):
            needed = delayed.required.get(tp)
            if needed is not None and hw is not None and hw >= needed:
                del delayed.required[tp]
                watchers.remove(delayed)
                if not delayed.required and not delayed.future.done():
                    delayed.future.set_result(None)
        if not watchers:
            self._watchers.pop(tp, None)

    def shutdown(self) -> None:
        """Answer every waiting produce now (with what it has): shutdown does not wait them out."""
        for watchers in self._watchers.values():
            for delayed in watchers:
                if not delayed.future.done():
                    delayed.future.set_result(None)
        self._watchers.clear()
