"""A history checker for share groups: from what the members saw (the records they acquired, with their delivery
counts, and the acknowledgements the broker answered without error), check the share group's guarantees:

* no record is ACCEPTed twice, and none is delivered again once accepted or rejected;
* no record is acquired while another member's lock on it can still hold;
* a record's delivery count grows with each delivery, and never passes the delivery count limit;
* in the end every record is accepted, rejected or archived at the delivery count limit (none lost).

The same checker serves the share-partition manager's model tests (a fake clock, broker restarts) and real
share consumers in other processes (wall-clock milliseconds from their logs, merged in time order).

A record is named by any hashable key: an offset in one partition, or ``(partition, offset)``."""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
#: what names a record
K = TypeVar("K", bound=Hashable)


class HistoryError(AssertionError):
    """A history that breaks one of the share group's guarantees."""


@dataclass
class ShareHistory(Generic[K]):
    """What the members saw, fed in time order.

    ``slack_ms`` is how much earlier the broker may have acquired a record than a member's log says (a real
    client may fetch ahead of its poll); a second member's acquisition is a broken lock only if it comes more
    than the lock duration minus the slack after the first's."""

    lock_ms: int
    delivery_limit: int
    slack_ms: int = 0
    #: counts broker restarts: no lock survives one, and delivery counts not yet written may be lost
    generation: int = 0
    #: key -> (member, lock deadline, broker generation) of the live acquisition, as the member believes it
    held: dict[K, tuple[str, int, int]] = field(default_factory=dict)
    accepted: set[K] = field(default_factory=set)
    rejected: set[K] = field(default_factory=set)
    delivery: dict[K, int] = field(default_factory=dict)
    #: key -> the broker generation its last delivery count was seen in
    seen_in: dict[K, int] = field(default_factory=dict)
    #: key -> how many times it was delivered, whatever the counts the broker reported
    deliveries: dict[K, int] = field(default_factory=dict)

    def acquired(self, member: str, key: K, count: int, at: int) -> None:
        """``member`` acquired ``key`` with delivery count ``count`` at time ``at`` (ms)."""
        if key in self.accepted or key in self.rejected:
            raise HistoryError(f"{key} delivered to {member} after it was acknowledged")
        holder = self.held.get(key)
        if holder is not None and holder[2] == self.generation and at < holder[1] - self.slack_ms:
            raise HistoryError(f"{key} acquired by {member} at {at} while {holder[0]}'s lock holds "
                               f"until {holder[1]}")
        if self.seen_in.get(key) == self.generation and count <= self.delivery[key]:
            raise HistoryError(f"{key}: delivery count {count} did not grow from {self.delivery[key]}")
        if not 1 <= count <= self.delivery_limit:
            raise HistoryError(f"{key} delivered to {member} with count {count}")
        self.delivery[key] = count
        self.seen_in[key] = self.generation
        self.deliveries[key] = self.deliveries.get(key, 0) + 1
        self.held[key] = (member, at + self.lock_ms, self.generation)

    def acknowledged(self, member: str, key: K, kind: int, at: int) -> None:
        """The broker answered ``member``'s acknowledgement of ``key`` (sent at ``at``) without error."""
        if kind == RENEW:  # still the member's, for a whole lock duration from the renewal
            holder, _, generation = self.held[key]
            self.held[key] = (holder, at + self.lock_ms, generation)
            return
        self.held.pop(key, None)
        if kind == ACCEPT:
            if key in self.accepted or key in self.rejected:
                raise HistoryError(f"{key} acknowledged twice (by {member} at {at})")
            self.accepted.add(key)
        elif kind == REJECT:
            self.rejected.add(key)

    def gave_up(self, key: K) -> None:
        """A member's acknowledgement failed: it holds the record no more, the broker gives it out again."""
        self.held.pop(key, None)

    def left(self, member: str) -> None:
        """``member`` closed: the broker gives back whatever it still held."""
        for key in [k for k, (m, _, _) in self.held.items() if m == member]:
            del self.held[key]

    def restart(self) -> None:
        """The broker restarted: what is not persisted is gone, no lock survives."""
        self.generation += 1

    def archived(self, key: K) -> bool:
        return self.delivery.get(key, 0) >= self.delivery_limit and key not in self.accepted

    def check_complete(self, keys: Iterable[K]) -> None:
        """Every one of ``keys`` ended accepted, rejected, or archived at the delivery count limit."""
        lost = [k for k in keys if k not in self.accepted and k not in self.rejected and not self.archived(k)]
        if lost:
            raise HistoryError(f"{len(lost)} records never acknowledged, first {sorted(lost, key=str)[:5]}")


# -- consumers' logs ---------------------------------------------------------------------------
#: A log line is a JSON list: ["acquired", member, partition, offset, delivery count, time ms],
#: ["acknowledged", member, partition, offset, type, time ms], ["failed", member, partition, offset, time ms]
#: or ["left", member, time ms]; times are wall-clock milliseconds.


def read_events(paths: Iterable[Path]) -> list[list[object]]:
    """Every member's events, merged in time order (a member's own events keep their order). A last line
    cut short by a killed process is left out."""
    events: list[tuple[int, int, list[object]]] = []
    for path in paths:
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            events.append((int(event[-1]), len(events), event))
    return [event for _, _, event in sorted(events, key=lambda e: (e[0], e[1]))]


def check_logs(paths: Iterable[Path], lock_ms: int, delivery_limit: int, slack_ms: int) -> ShareHistory[tuple[int, int]]:
    """Replay the members' logs through a :class:`ShareHistory`; the history, for the caller's own checks."""
    history: ShareHistory[tuple[int, int]] = ShareHistory(lock_ms, delivery_limit, slack_ms)
    for event in read_events(paths):
        kind, member = str(event[0]), str(event[1])
        at = int(event[-1])  # type: ignore[call-overload]
        if kind == "left":
            history.left(member)
            continue
        key = (int(event[2]), int(event[3]))  # type: ignore[call-overload]
        if kind == "acquired":
            history.acquired(member, key, int(event[4]), at)  # type: ignore[call-overload]
        elif kind == "acknowledged":
            history.acknowledged(member, key, int(event[4]), at)  # type: ignore[call-overload]
        else:
            history.gave_up(key)
    return history
