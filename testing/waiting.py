"""Polling for a condition another process brings about, bounded in time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, what: str = "condition", *, interval: float = 0.05,
               details: Callable[[], str] | None = None) -> T:
    """Poll until ``predicate()`` is truthy and return its value.

    After ``timeout`` seconds: TimeoutError naming ``what``, followed by ``details()`` (the brokers'
    logs, say), read only then because it may be costly.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            suffix = f"\n{details()}" if details is not None else ""
            raise TimeoutError(f"{what}: not within {timeout}s (last: {value!r}){suffix}")
        time.sleep(interval)
