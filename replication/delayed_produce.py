"""The produce purgatory: ``acks=all`` appends waiting for the high watermark.

Kafka's DelayedProduce: a produce with ``acks=-1`` is answered once every
partition it appended to has a high watermark past its append (the ISR has
it), or with REQUEST_TIMED_OUT for the partitions still short when the
request's ``timeout_ms`` passes. A partition is also done, with an error, when
its leadership moved (NOT_LEADER_OR_FOLLOWER) or its ISR shrank below
``min.insync.replicas`` while it waited (NOT_ENOUGH_REPLICAS_AFTER_APPEND): the
partition's ``check_enough_replicas_reach_offset`` decides. With the leader as
the only in-sync replica the high watermark passes the append as it is made,
so nothing waits here; a follower's fetch that advances a high watermark, or a
leadership change, calls ``check_and_complete``.

Event loop only. A produce registers, then checks once more before it waits:
the high watermark may have moved between the append and the registration.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable

from protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
#: (partition, required high watermark) → (done, error code); (True, NO_ERROR) once acknowledged.
CheckReplicas = Callable[[TopicPartition, int], tuple[bool, int]]


class DelayedProduce:
    __slots__ = ('errors', 'future', 'required')

    def __init__(self, required: dict[TopicPartition, int]) -> None:
        #: Partition → the high watermark that acknowledges the append (its last offset + 1).
        self.required = required
        #: Partitions done with an error.
        self.errors: dict[TopicPartition, int] = {}
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class ProducePurgatory:
    def __init__(self, check: CheckReplicas) -> None:
        self._check = check
        #: Per partition, (high watermark needed, produce), in order of what they need.
        self._watchers: dict[TopicPartition, list[tuple[int, DelayedProduce]]] = {}

    @property
    def watching(self) -> bool:
        return bool(self._watchers)

    def is_watched(self, tp: TopicPartition) -> bool:
        return tp in self._watchers

    async def wait(self, required: dict[TopicPartition, int], timeout: float) -> dict[TopicPartition, int]:
        """Wait until every partition is done or ``timeout`` (s) passes; the error of each
        partition not acknowledged (REQUEST_TIMED_OUT for those still short), empty when all were."""
        delayed = DelayedProduce(dict(required))
        for tp, needed in required.items():
            watchers = self._watchers.get(tp)
            if watchers is None:
                self._watchers[tp] = [(needed, delayed)]
            elif watchers[-1][0] <= needed:  # appends to a partition usually register in offset order
                watchers.append((needed, delayed))
            else:
                bisect.insort(watchers, (needed, delayed), key=_needed)
        for tp in list(required):
            self.check_and_complete(tp)
        # A timer ends the wait (REQUEST_TIMED_OUT for what is still short): one handle, where
        # asyncio.wait_for and shield would add two futures to every acks=all produce.
        timer = None
        try:
            if not delayed.future.done():
                timer = asyncio.get_running_loop().call_later(max(timeout, 0.0), _time_out, delayed.future)
                await delayed.future
        finally:
            if timer is not None:
                timer.cancel()
            # Partitions completed were removed by check_and_complete; only the ones still short
            # (a timeout, a cancelled request) are in the watcher lists.
            for tp in delayed.required:
                self._unwatch(tp, delayed)
        errors = dict(delayed.errors)
        for tp in delayed.required:
            errors[tp] = ErrorCode.REQUEST_TIMED_OUT
        return errors

    def check_and_complete(self, tp: TopicPartition) -> None:
        """The high watermark, ISR or leadership of ``tp`` may have changed: complete what it settles.

        The watchers are in order of the high watermark they need, and a check that is not
        done without an error (the high watermark is below what it needs) is not done for any
        later watcher either: the scan stops there, so an append or a follower's fetch costs
        what it completes, not what waits.
        """
        watchers = self._watchers.get(tp)
        if not watchers:
            return
        check = self._check
        settled = 0
        for needed, delayed in watchers:
            done, error = check(tp, needed)
            if not done and error == ErrorCode.NO_ERROR:
                break
            settled += 1
            del delayed.required[tp]
            if error != ErrorCode.NO_ERROR:
                delayed.errors[tp] = error
            if not delayed.required and not delayed.future.done():
                delayed.future.set_result(None)
        if settled == len(watchers):
            del self._watchers[tp]
        elif settled:
            del watchers[:settled]

    def _unwatch(self, tp: TopicPartition, delayed: DelayedProduce) -> None:
        watchers = self._watchers.get(tp)
        if watchers is None:
            return
        for i, (_, watcher) in enumerate(watchers):
            if watcher is delayed:
                del watchers[i]
                break
        if not watchers:
            del self._watchers[tp]

    def shutdown(self) -> None:
        """Answer every waiting produce now (with what it has): shutdown does not wait them out."""
        for watchers in self._watchers.values():
            for _, delayed in watchers:
                if not delayed.future.done():
                    delayed.future.set_result(None)
        self._watchers.clear()


def _needed(entry: tuple[int, DelayedProduce]) -> int:
    return entry[0]


def _time_out(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
