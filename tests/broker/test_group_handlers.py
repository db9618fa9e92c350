"""The group handlers' reading of the wire: each version's fields as the coordinator's request objects hold them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from broker.handlers import join_group, leave_group
from coordinator.group.group_requests import LeaveGroupResult, LeavingMember
from protocol.errors import ErrorCode
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity


def _ctx(version: int) -> Any:
    return SimpleNamespace(api_version=version, client_id="app", connection=SimpleNamespace(peer="10.0.0.7:51234"))


def _join(version: int) -> JoinGroupRequest:
    return JoinGroupRequest(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=60_000, member_id="m",
                            group_instance_id="i-1", protocol_type="consumer",
                            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")],
                            reason="poll timeout")


@pytest.mark.parametrize(("version", "rebalance_timeout_ms", "instance", "reason", "known_id", "skip"), [
    (0, 10_000, None, None, False, False),  # v0: the session timeout is the rebalance timeout
    (1, 60_000, None, None, False, False),
    (4, 60_000, None, None, True, False),  # KIP-394
    (5, 60_000, "i-1", None, True, False),  # KIP-345
    (8, 60_000, "i-1", "poll timeout", True, False),
    (9, 60_000, "i-1", "poll timeout", True, True),  # KIP-814
])
def test_join_request_per_version(version: int, rebalance_timeout_ms: int, instance: str | None,
                                  reason: str | None, known_id: bool, skip: bool) -> None:
    request = join_group.join_request(_ctx(version), _join(version))
    assert (request.rebalance_timeout_ms, request.group_instance_id, request.reason) == (
        rebalance_timeout_ms, instance, reason)
    assert (request.require_known_member_id, request.supports_skip_assignment) == (known_id, skip)
    assert request.client_id == "app" and request.client_host == "/10.0.0.7"
    assert request.protocols == (("range", b"\x00\x01"),) and request.session_timeout_ms == 10_000


def test_leave_group_v0_to_v2_carry_one_member_whose_error_is_the_responses() -> None:
    leave = leave_group.leave_request(2, LeaveGroupRequest(group_id="g", member_id="m"))
    assert leave.members == (LeavingMember("m"),)
    response = leave_group.build_response(2, leave, LeaveGroupResult(ErrorCode.NO_ERROR,
                                                                      [ErrorCode.UNKNOWN_MEMBER_ID]))
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_group_v3_answers_per_member_unless_the_group_failed() -> None:
    wire = LeaveGroupRequest(group_id="g", members=[MemberIdentity(member_id="a"),
                                                    MemberIdentity(member_id="", group_instance_id="i-1")])
    leave = leave_group.leave_request(3, wire)
    assert leave.members == (LeavingMember("a"), LeavingMember("", "i-1"))
    ok = leave_group.build_response(3, leave, LeaveGroupResult(ErrorCode.NO_ERROR,
                                                                [ErrorCode.NO_ERROR, ErrorCode.UNKNOWN_MEMBER_ID]))
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in ok.members] == [
        ("a", None, ErrorCode.NO_ERROR), ("", "i-1", ErrorCode.UNKNOWN_MEMBER_ID)]
    failed = leave_group.build_response(3, leave, LeaveGroupResult(ErrorCode.NOT_COORDINATOR,
                                                                    [ErrorCode.NOT_COORDINATOR] * 2))
    assert failed.error_code == ErrorCode.NOT_COORDINATOR and failed.members == []
