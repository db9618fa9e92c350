"""The in-flight records of a share partition as runs of offsets that share one state (Kafka's InFlightBatch).

A share consumer acquires and acknowledges records a batch (or a range) at a
time, so a share partition keeps one :class:`InFlightBatch` per run of offsets
in the same state, with the same delivery count, under the same lock, rather
than one entry per offset: acquiring, acknowledging or writing a run costs the
same whether it holds one record or thousands. A run is split where an
operation covers only part of it (a partial acknowledgement, a release of some
of its offsets, a record-limit acquisition); the parts then go their own way.
Offsets between runs are not in flight: done before, or absent from the log.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass

from coordinator.common.scheduler import Timer
from coordinator.share.persister import RecordState


class AcquisitionLock:
    """The lock of one acquisition: its timer, how many of its records are still held, and how many
    were acknowledged by writes not yet durable (a failed one gives them back to this lock)."""

    __slots__ = ("expired", "held", "in_write", "member_id", "timer")

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.held = 0
        self.in_write = 0
        self.expired = False
        self.timer: Timer | None = None

    def cancel_if_empty(self) -> None:
        """Nothing can come back to this lock any more: its timer goes."""
        if self.held <= 0 and self.in_write <= 0 and self.timer is not None:
            self.timer.cancel()
            self.timer = None


@dataclass(slots=True, eq=False)
class InFlightBatch:
    """Offsets ``first_offset..last_offset`` (inclusive) in one state, with one delivery count and lock;
    ``in_write``: an acknowledgement changed them and its write is not durable yet."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    lock: AcquisitionLock | None = None
    in_write: bool = False

    @property
    def size(self) -> int:
        return self.last_offset - self.first_offset + 1

    @property
    def member_id(self) -> str | None:
        return None if self.lock is None else self.lock.member_id


def _first_offset(batch: InFlightBatch) -> int:
    return batch.first_offset


class InFlightBatches:
    """The runs in offset order, none overlapping; ``record_count`` is how many offsets they hold."""

    __slots__ = ("_batches", "record_count")

    def __init__(self) -> None:
        self._batches: list[InFlightBatch] = []
        self.record_count = 0

    def __iter__(self) -> Iterator[InFlightBatch]:
        return iter(self._batches)

    def _index_after(self, offset: int) -> int:
        """The index of the first run starting after ``offset``."""
        return bisect.bisect_right(self._batches, offset, key=_first_offset)

    def find(self, offset: int) -> InFlightBatch | None:
        """The run holding ``offset``, None when it is not in flight."""
        index = self._index_after(offset) - 1
        if index >= 0 and self._batches[index].last_offset >= offset:
            return self._batches[index]
        return None

    def add(self, batch: InFlightBatch) -> None:
        """A run over offsets no run holds; it extends the run just below it when that one ends where it
        starts and is in the same state, under the same lock (an acquisition's consecutive log batches)."""
        index = self._index_after(batch.first_offset)
        self.record_count += batch.size
        below = self._batches[index - 1] if index > 0 else None
        if (below is not None and below.last_offset + 1 == batch.first_offset and below.state == batch.state
                and below.delivery_count == batch.delivery_count and below.lock is batch.lock
                and below.in_write == batch.in_write):
            below.last_offset = batch.last_offset
            return
        self._batches.insert(index, batch)

    def split_at(self, offset: int) -> None:
        """Make ``offset`` the first offset of its run (when in flight), the run's lower part a run of its own."""
        index = self._index_after(offset) - 1
        if index < 0:
            return
        batch = self._batches[index]
        if batch.first_offset == offset or batch.last_offset < offset:
            return
        upper = InFlightBatch(offset, batch.last_offset, batch.state, batch.delivery_count, batch.lock,
                              batch.in_write)
        batch.last_offset = offset - 1
        self._batches.insert(index + 1, upper)

    def overlapping(self, first: int, last: int) -> list[InFlightBatch]:
        """The runs holding any of ``first..last``, in order (the first and last may reach beyond)."""
        start = max(self._index_after(first) - 1, 0)
        end = self._index_after(last)
        return [b for b in self._batches[start:end] if b.last_offset >= first]

    def within(self, first: int, last: int) -> list[InFlightBatch]:
        """The runs of ``first..last``, split where they reach beyond it, in order."""
        self.split_at(first)
        self.split_at(last + 1)
        start = self._index_after(first - 1)
        end = self._index_after(last)
        return self._batches[start:end]

    def first_at_or_after(self, offset: int) -> InFlightBatch | None:
        """The run holding ``offset``, else the next one above it, else None."""
        index = max(self._index_after(offset) - 1, 0)
        for batch in self._batches[index:index + 2]:
            if batch.last_offset >= offset:
                return batch
        return None

    def remove(self, batch: InFlightBatch) -> None:
        index = self._index_after(batch.first_offset) - 1
        if index >= 0 and self._batches[index] is batch:
            del self._batches[index]
            self.record_count -= batch.size
