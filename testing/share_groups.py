"""A share group member's heartbeats until the coordinator has assigned it partitions.

A share group assigns a partition only once its share state is initialized through the share coordinator
(InitializeShareGroupState), so a member's first answers may carry an empty assignment; the assignment comes
in a later heartbeat's answer (and is left out of the answers after it while it does not change)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode
from pytest_pafka.waiting import wait_until


def assigned_partitions(response: Any) -> list[list[int]]:
    """The partitions of each topic in a heartbeat answer's (or a described member's) assignment."""
    return [] if response.assignment is None else [tp.partitions for tp in response.assignment.topic_partitions]


def until_assigned(heartbeat: Callable[[int], Any], joined: Any, assigned: Callable[[Any], bool],
                   what: str, timeout_s: float = 30.0) -> Any:
    """Send ``heartbeat(member epoch)`` until an answer's assignment satisfies ``assigned``; starting from the
    answer the member ``joined`` with. The answer that carried the assignment."""
    last = [joined]

    def beat() -> Any:
        response = heartbeat(last[-1].member_epoch)
        if response.error_code == ErrorCode.NO_ERROR and response.assignment is not None:
            last.append(response)
        return last[-1]

    def done(response: Any) -> bool:
        return response.assignment is not None and assigned(response)

    return joined if done(joined) else wait_until(beat, timeout_s, what, until=done)
