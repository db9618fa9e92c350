"""What the broker holds of its clients' requests, bounded: the request memory pool and the request queue.

``queued.max.request.bytes`` is Kafka's request memory pool (``SimpleMemoryPool``): every
request read from a socket takes its size from the pool, and gives it back once its handler
has answered (or its connection is gone). While the pool is exhausted no connection reads
(Kafka mutes every channel when ``memoryPool.isOutOfMemory``); the first release that brings
it back above zero lets them read again. As in Kafka the pool is not strict: a request is
taken whenever anything is left, so usage may pass the size by at most one request
(``socket.request.max.bytes``). -1 (Kafka's default) leaves it unbounded, still counted.

``queued.max.requests`` bounds Kafka's request queue, the requests the network threads have
read and no handler thread has taken yet. Here a handler is called as its request is
decoded, except a request that arrives while an earlier one of its connection is still
running: it waits for its turn on the event loop, and those waiting requests are the queue.
While it is full no connection reads.

Both only say whether reading may go on and tell the socket server when it may again; the
connections pause and resume their own transports.
"""

from __future__ import annotations

from collections.abc import Callable


class MemoryPool:
    """Bytes of requests read and not yet answered, against ``queued.max.request.bytes``."""

    def __init__(self, capacity: int, on_available: Callable[[], None] | None = None) -> None:
        #: The pool's size in bytes; <= 0: unbounded.
        self.capacity = capacity
        self.used = 0
        #: Called when a release ends an exhaustion (the socket server resumes reading).
        self.on_available = on_available

    @property
    def bounded(self) -> bool:
        return self.capacity > 0

    @property
    def available(self) -> int:
        return self.capacity - self.used if self.bounded else 1 << 62

    @property
    def out_of_memory(self) -> bool:
        return self.bounded and self.used >= self.capacity

    def try_allocate(self, size: int) -> bool:
        """Take ``size`` bytes if anything is left (not strict, as Kafka's pool); False when exhausted."""
        if size < 0:
            raise ValueError(f"cannot allocate {size} bytes")
        if self.out_of_memory:
            return False
        self.used += size
        return True

    def allocate(self, size: int) -> None:
        """Count bytes already read (a request completed by the same read as an earlier one)."""
        self.used += size

    def release(self, size: int) -> None:
        was_out = self.out_of_memory
        self.used -= size
        if self.used < 0:
            raise ValueError(f"released {-self.used} bytes more than were allocated")
        if was_out and not self.out_of_memory and self.on_available is not None:
            self.on_available()


class RequestQueue:
    """Requests read whose handler has not started yet, against ``queued.max.requests``."""

    def __init__(self, max_requests: int, on_available: Callable[[], None] | None = None) -> None:
        self.max_requests = max_requests
        self.queued = 0
        self.on_available = on_available

    @property
    def full(self) -> bool:
        return self.queued >= self.max_requests > 0

    def put(self) -> Callable[[], None]:
        """Count one request; the call returned counts it out (once, however often it is called)."""
        self.queued += 1
        taken = False

        def take() -> None:
            nonlocal taken
            if not taken:
                taken = True
                self.taken()
        return take

    def taken(self) -> None:
        was_full = self.full
        self.queued -= 1
        if was_full and not self.full and self.on_available is not None:
            self.on_available()
