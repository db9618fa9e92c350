"""FetchSessionHandler: the fetching side of an incremental fetch session (KIP-227).

Kafka's ``FetchSessionHandler``, sans I/O. A fetcher names every partition it
wants in each round; the handler turns that into what the request must carry:

* the first request (or the first after an error) is full: every partition,
  session epoch 0, which asks the broker to open a session;
* once the broker answered with a session id, requests are incremental (epoch
  1, 2, ...): only partitions added or changed since the last request (a new
  fetch offset, log start offset, leader epoch or size limit), and the ones no
  longer wanted as forgotten. The broker keeps the rest, and its responses carry
  only partitions with something new;
* an error answer, or a failed request, starts over with a full request (one
  that also closes the old session on the broker, when the error allows).

A follower fetching dozens of partitions from one leader then sends and reads
back only the few that moved, where a sessionless fetch encodes, decodes and
answers every partition on every round.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import NamedTuple

from protocol.errors import ErrorCode
from protocol.request_constants import INITIAL_EPOCH, INVALID_SESSION_ID, MAX_SESSION_EPOCH

TopicPartition = tuple[str, int]
#: The first Fetch version with sessions.
SESSIONS_MIN_VERSION = 7


class SessionPartition(NamedTuple):
    """What one partition of a fetch asks: the fields whose change the broker must hear of.
    (A named tuple: each round makes and compares one per partition fetched.)"""

    topic_id: uuid.UUID
    fetch_offset: int
    log_start_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """One request's share of the session: what to send, what to forget, and its session fields."""

    to_send: dict[TopicPartition, SessionPartition]
    #: Partitions the broker's session holds that this fetch no longer wants, with their topic ids.
    to_forget: dict[TopicPartition, uuid.UUID]
    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        return self.epoch == INITIAL_EPOCH or self.session_id == INVALID_SESSION_ID


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.next_epoch = INITIAL_EPOCH
        #: The partitions the broker's session holds, as last sent.
        self._session: dict[TopicPartition, SessionPartition] = {}
        #: Whether the session's requests name topics by id (Fetch v13+): the broker keys the
        #: session's partitions that way, so a change of version starts a new session.
        self._uses_topic_ids: bool | None = None

    def build(self, wanted: dict[TopicPartition, SessionPartition], uses_topic_ids: bool) -> FetchRequestData:
        """The next request's partitions, given every partition this round fetches."""
        if uses_topic_ids != self._uses_topic_ids:
            self._uses_topic_ids = uses_topic_ids
            self.next_epoch = INITIAL_EPOCH
        if self.next_epoch == INITIAL_EPOCH:
            self._session = dict(wanted)
            return FetchRequestData(dict(wanted), {}, self.session_id, INITIAL_EPOCH)
        session = self._session
        to_forget: dict[TopicPartition, uuid.UUID] = {}
        for tp, sent in list(session.items()):
            now = wanted.get(tp)
            if now is None or now.topic_id != sent.topic_id:  # a recreated topic is forgotten, then added
                to_forget[tp] = sent.topic_id
                del session[tp]
        to_send: dict[TopicPartition, SessionPartition] = {}
        for tp, now in wanted.items():
            if session.get(tp) != now:
                to_send[tp] = session[tp] = now
        return FetchRequestData(to_send, to_forget, self.session_id, self.next_epoch)

    def handle_response(self, sent: FetchRequestData, error_code: int, session_id: int) -> bool:
        """Move the session on after an answer; False when the answer was an error and the
        next request starts over (its partitions are fetched again then)."""
        if error_code != ErrorCode.NO_ERROR:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID  # nothing to close
            self.next_epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:
            # The broker opened no session (or closed it): full requests until one opens.
            self.session_id, self.next_epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            return True
        if sent.is_full:
            self.session_id, self.next_epoch = session_id, 1
        else:
            self.next_epoch = self.next_epoch + 1 if self.next_epoch < MAX_SESSION_EPOCH else 1
        return True

    def handle_error(self) -> None:
        """The request failed (no answer): start over with a full request that closes the session."""
        self.next_epoch = INITIAL_EPOCH
