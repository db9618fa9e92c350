"""Incremental fetch sessions (KIP-227).

A consumer or follower fetching many partitions sends the full list once
(session epoch 0) and receives a session id; later requests (epoch 1, 2, ...)
carry only changes (new fetch offsets, added partitions, forgotten ones), and
responses carry only partitions with something new: records, an error, or a
moved high watermark, last stable offset or log start offset.

Epochs: -1 (FINAL) is a sessionless full fetch and closes the named session;
0 (INITIAL) starts a new session; N > 0 must match the session's next epoch,
else INVALID_FETCH_SESSION_EPOCH; an unknown id is FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import collections
import random
import time
import uuid
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.request_constants import MAX_SESSION_EPOCH

#: (topic name, partition) or, from Fetch v13, (topic id, partition)
PartitionKey = tuple[object, int]


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session and what its last response told the client."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # the follower's, when a follower fetches
    high_watermark: int = -1
    last_stable_offset: int = -1
    leader_log_start_offset: int = -1

    def needs_response(self, error_code: int, has_records: bool, hw: int, lso: int, log_start: int) -> bool:
        """Whether an incremental response must carry this partition; updates what was sent."""
        changed = error_code != 0 or has_records
        if hw != self.high_watermark:
            self.high_watermark = hw
            changed = True
        if lso != self.last_stable_offset:
            self.last_stable_offset = lso
            changed = True
        if log_start != self.leader_log_start_offset:
            self.leader_log_start_offset = log_start
            changed = True
        return changed


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    uses_topic_ids: bool
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)
    last_used: float = 0.0


class FetchSessionError(Exception):
    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


class FetchSessionCache:
    """Sessions by id, bounded by ``max.incremental.fetch.session.cache.slots``.

    When full, the least recently used session makes room (Kafka prefers
    evicting stale or small sessions; LRU is the simple case of that).
    """

    def __init__(self, max_slots: int) -> None:
        self.max_slots = max_slots
        self._sessions: collections.OrderedDict[int, FetchSession] = collections.OrderedDict()
        self._rng = random.Random()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, uses_topic_ids: bool, partitions: dict[PartitionKey, CachedPartition]) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        while len(self._sessions) >= self.max_slots:
            self._sessions.popitem(last=False)
        session_id = self._new_id()
        session = FetchSession(session_id, 1, uses_topic_ids, partitions, time.monotonic())
        self._sessions[session_id] = session
        return session

    def _new_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, 2**31 - 1)
            if candidate not in self._sessions:
                return candidate

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def lookup(self, session_id: int, epoch: int) -> FetchSession:
        """The session an incremental request names, with its epoch checked and advanced."""
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            raise FetchSessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session.epoch = session.epoch + 1 if session.epoch < MAX_SESSION_EPOCH else 1
        session.last_used = time.monotonic()
        self._sessions.move_to_end(session_id)
        return session
