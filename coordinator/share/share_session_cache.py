"""Share sessions (KIP-932): the partitions a share consumer fetches from one broker, and its session epoch.

As a fetch session, a share session lets a consumer send only what changed:
ShareFetch at epoch 0 opens a session (replacing the member's previous one)
with the partitions it names; each later request names the next epoch and adds
or forgets partitions; epoch -1 closes it. ShareAcknowledge uses the same
epochs but never opens a session. One session per (group, member) on a broker.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

#: Opens a share session (Kafka's ShareFetchMetadata.INITIAL_EPOCH).
INITIAL_EPOCH = 0
#: Closes a share session (Kafka's ShareFetchMetadata.FINAL_EPOCH).
FINAL_EPOCH = -1

TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``; after the largest int32 the count restarts at 1 (0 and -1 are reserved)."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareSessionError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    #: The epoch the next request must carry.
    epoch: int
    #: The partitions in the session, in the order they were added.
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShareFetchContext:
    """What a ShareFetch's epoch resolved to: the partitions to fetch now, and those whose acquired
    records the member gives up (forgotten, or in a session that closed or was replaced)."""

    partitions: tuple[TopicIdPartition, ...]
    released: tuple[TopicIdPartition, ...]
    is_final: bool


class ShareSessionCache:
    """The share sessions of this broker, keyed by (group id, member id)."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def __len__(self) -> int:
        return len(self._sessions)

    def for_fetch(self, group_id: str, member_id: str, epoch: int, added: Iterable[TopicIdPartition],
                  forgotten: Iterable[TopicIdPartition]) -> ShareFetchContext:
        """Resolve a ShareFetch's session epoch; raises SHARE_SESSION_NOT_FOUND or INVALID_SHARE_SESSION_EPOCH."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            previous = self._sessions.pop(key, None)
            session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), dict.fromkeys(added))
            self._sessions[key] = session
            released = () if previous is None else tuple(p for p in previous.partitions if p not in session.partitions)
            return ShareFetchContext(tuple(session.partitions), released, is_final=False)
        session = self._current(key, epoch)
        if epoch == FINAL_EPOCH:
            del self._sessions[key]
            return ShareFetchContext((), tuple(session.partitions), is_final=True)
        # Added first, then forgotten (as Kafka updates a session): a request that acknowledges in a
        # partition and forgets it leaves it out of the session.
        for p in added:
            session.partitions.setdefault(p, None)
        gone = [p for p in dict.fromkeys(forgotten) if p in session.partitions]
        for p in gone:
            del session.partitions[p]
        session.epoch = next_epoch(epoch)
        return ShareFetchContext(tuple(session.partitions), tuple(gone), is_final=False)

    def for_acknowledge(self, group_id: str, member_id: str, epoch: int) -> ShareFetchContext:
        """Resolve a ShareAcknowledge's session epoch: epoch 0 is invalid (an acknowledgement needs a
        session), -1 closes the session after the acknowledgements, any other must be the session's."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    "a share acknowledgement cannot open a share session")
        key = (group_id, member_id)
        session = self._current(key, epoch)
        if epoch == FINAL_EPOCH:
            del self._sessions[key]
            return ShareFetchContext((), tuple(session.partitions), is_final=True)
        session.epoch = next_epoch(epoch)
        return ShareFetchContext(tuple(session.partitions), (), is_final=False)

    def _current(self, key: tuple[str, str], epoch: int) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND,
                                    f"no share session for member {key[1]} of group {key[0]}")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    f"share session epoch {epoch} is not the expected {session.epoch}")
        return session

    def remove_member(self, group_id: str, member_id: str) -> tuple[TopicIdPartition, ...]:
        """Drop the member's session (it left the group); the partitions whose records it gives up."""
        session = self._sessions.pop((group_id, member_id), None)
        return () if session is None else tuple(session.partitions)
