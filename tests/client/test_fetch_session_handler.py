"""FetchSessionHandler (KIP-227's fetching side): full, then incremental, then full again after errors."""

from __future__ import annotations

import uuid

from client.fetch_session_handler import FetchSessionHandler, SessionPartition
from protocol.errors import ErrorCode

TOPIC_ID = uuid.uuid4()


def _wanted(*offsets: int, topic_id: uuid.UUID = TOPIC_ID) -> dict[tuple[str, int], SessionPartition]:
    return {("t", p): SessionPartition(topic_id, offset, 0, 3, -1, 1 << 20) for p, offset in enumerate(offsets)}


def test_full_then_only_what_changed_then_forgotten() -> None:
    handler = FetchSessionHandler()
    first = handler.build(_wanted(10, 20, 30), True)
    assert first.is_full and first.epoch == 0 and first.session_id == 0 and len(first.to_send) == 3
    assert handler.handle_response(first, ErrorCode.NO_ERROR, 77)
    second = handler.build(_wanted(10, 25, 30), True)
    assert not second.is_full and (second.session_id, second.epoch) == (77, 1)
    assert list(second.to_send) == [("t", 1)] and not second.to_forget
    assert handler.handle_response(second, ErrorCode.NO_ERROR, 77)
    idle = handler.build(_wanted(10, 25, 30), True)
    assert idle.epoch == 2 and not idle.to_send and not idle.to_forget  # a long poll on the session
    assert handler.handle_response(idle, ErrorCode.NO_ERROR, 77)
    fewer = handler.build(dict(list(_wanted(10, 25, 30).items())[:2]), True)
    assert fewer.to_forget == {("t", 2): TOPIC_ID} and not fewer.to_send
    assert handler.handle_response(fewer, ErrorCode.NO_ERROR, 77)
    back = handler.build(_wanted(10, 25, 31), True)
    assert list(back.to_send) == [("t", 2)] and back.epoch == 4


def test_errors_and_failures_start_over_with_a_full_request() -> None:
    handler = FetchSessionHandler()
    first = handler.build(_wanted(1, 2), True)
    handler.handle_response(first, ErrorCode.NO_ERROR, 5)
    incremental = handler.build(_wanted(1, 3), True)
    # An epoch the broker did not expect: a full request that also closes session 5.
    assert not handler.handle_response(incremental, ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    again = handler.build(_wanted(1, 3), True)
    assert again.is_full and (again.session_id, again.epoch) == (5, 0) and len(again.to_send) == 2
    handler.handle_response(again, ErrorCode.NO_ERROR, 6)
    # An unknown session: nothing to close.
    lost = handler.build(_wanted(1, 4), True)
    assert not handler.handle_response(lost, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert handler.build(_wanted(1, 4), True).session_id == 0
    handler.handle_response(handler.build(_wanted(1, 4), True), ErrorCode.NO_ERROR, 8)
    # No answer at all (a connection failure): start over.
    handler.handle_error()
    assert handler.build(_wanted(1, 4), True).is_full


def test_no_session_from_the_broker_and_a_change_of_naming_mean_full_requests() -> None:
    handler = FetchSessionHandler()
    first = handler.build(_wanted(1), True)
    assert handler.handle_response(first, ErrorCode.NO_ERROR, 0)  # the broker's cache is full
    assert handler.build(_wanted(1), True).is_full
    handler.handle_response(handler.build(_wanted(1), True), ErrorCode.NO_ERROR, 9)
    assert not handler.build(_wanted(1), True).is_full
    # Topic ids appear or vanish with the Fetch version: the broker keys sessions by them.
    assert handler.build(_wanted(1), False).is_full
    # A topic recreated under the same name: forgotten under its old id, sent under the new.
    handler.handle_response(handler.build(_wanted(1), True), ErrorCode.NO_ERROR, 9)
    new_id = uuid.uuid4()
    recreated = handler.build(_wanted(1, topic_id=new_id), True)
    assert recreated.to_forget == {("t", 0): TOPIC_ID} and recreated.to_send[("t", 0)].topic_id == new_id
