"""Polling for a condition something else brings about, bounded in time: the one way tests wait.

Two entry points share one core (``_Attempts``: the deadline, the last answer seen, the failure message):

- ``wait_until(predicate, timeout, what)`` for synchronous code: sleeps with ``time.sleep`` between polls.
- ``await wait_until_async(predicate, timeout, what)`` for coroutines: sleeps with ``asyncio.sleep`` so the
  event loop keeps running the code being waited for; ``predicate`` may be a plain function or return an
  awaitable (a coroutine that asks a broker, say), which is awaited.

Two functions rather than one that guesses from its context: a test that waits on the event loop's own work
must not block the loop, and a name that says ``async`` makes that visible where it is called (ruff's ASYNC
rules then catch a plain ``wait_until`` inside a coroutine as a blocking call).

Both return the predicate's first truthy value; given ``until``, the predicate is a probe instead: its answer is
returned once ``until(answer)`` holds, and the timeout's message shows the last answer (the ISR seen, say)
rather than ``False``. Exceptions of the types in ``ignoring`` that the predicate
raises count as "not yet" (a broker still starting refuses connections). Past the deadline they raise
``WaitTimeout``, which is both an ``AssertionError`` (a test's failed expectation, reported as such) and a
``TimeoutError`` (what callers of a bounded wait catch), naming ``what`` and the last answer, followed by
``details()`` (the brokers' logs, say), read only then because it may be costly.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

Ignored = tuple[type[BaseException], ...]


class WaitTimeout(AssertionError, TimeoutError):
    """The condition did not hold within the time allowed."""


class _Attempts:
    """One wait's deadline and last answer; raises ``WaitTimeout`` once the deadline has passed."""

    def __init__(self, timeout: float, what: str, details: Callable[[], str] | None) -> None:
        self._timeout = timeout
        self._what = what
        self._details = details
        self._deadline = time.monotonic() + timeout
        self.last: object = None

    def check_deadline(self) -> None:
        if time.monotonic() > self._deadline:
            suffix = f"\n{self._details()}" if self._details is not None else ""
            raise WaitTimeout(f"{self._what}: not within {self._timeout}s (last: {self.last!r}){suffix}")


def _holds(value: T, until: Callable[[T], object] | None) -> bool:
    return bool(until(value) if until is not None else value)


def wait_until(predicate: Callable[[], T], timeout: float, what: str = "condition", *, interval: float = 0.05,
               details: Callable[[], str] | None = None, ignoring: Ignored = (),
               until: Callable[[T], object] | None = None) -> T:
    """Poll ``predicate()`` until it is truthy and return its value (see the module docstring)."""
    attempts = _Attempts(timeout, what, details)
    while True:
        try:
            value = predicate()
        except ignoring as error:
            attempts.last = error
        else:
            if _holds(value, until):
                return value
            attempts.last = value
        attempts.check_deadline()
        time.sleep(interval)


@overload
async def wait_until_async(predicate: Callable[[], Awaitable[T]], timeout: float, what: str = ..., *,
                           interval: float = ..., details: Callable[[], str] | None = ..., ignoring: Ignored = (),
                           until: Callable[[T], object] | None = None) -> T: ...


@overload
async def wait_until_async(predicate: Callable[[], T], timeout: float, what: str = ..., *,
                           interval: float = ..., details: Callable[[], str] | None = ..., ignoring: Ignored = (),
                           until: Callable[[T], object] | None = None) -> T: ...


async def wait_until_async(predicate: Callable[[], object], timeout: float, what: str = "condition", *,
                           interval: float = 0.01, details: Callable[[], str] | None = None,
                           ignoring: Ignored = (), until: Callable[[Any], object] | None = None) -> object:
    """Poll ``predicate()`` (awaiting its answer if it is awaitable) until it is truthy, without blocking the loop."""
    attempts = _Attempts(timeout, what, details)
    while True:
        try:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
        except ignoring as error:
            attempts.last = error
        else:
            if _holds(value, until):
                return value
            attempts.last = value
        attempts.check_deadline()
        await asyncio.sleep(interval)
