"""confluent-kafka's documented handling of a transactional call's error, shared by the transaction tests."""

from __future__ import annotations

import time
from collections.abc import Callable


def retrying(call: Callable[[float], None], timeout_s: float) -> None:
    """``call(timeout)`` made again while its error is retriable, for ``timeout_s`` at most; any other error
    (abortable, fatal) or a retriable one past the time is raised for the caller to handle."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            call(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise
