"""Progress of long work: a bar when a person watches a terminal, a line every few seconds otherwise.

    with Progress("Loading logs in /data", total=len(dirs), unit="logs", sink=log.info) as progress:
        for child in dirs:
            ...
            progress.advance()

On a terminal (the stream is a TTY) it draws a tqdm bar on that stream; anywhere else (a log file, a
pipe, a container's output, a test) it writes plain lines through ``sink``: one when the work starts,
one every ``interval_s`` while it goes on, and one when it ends, each with the count done, the total
and the share, so a broker's log shows how far its log recovery got and a script's stderr shows how far
a dump or an upload is.

It lives in storage because the broker's log recovery, the lowest layer with long work to report, uses
it; the command-line tools (dump-log, console-producer from a file, reassign-partitions) use it too.
Reporting costs a clock read per :meth:`advance`, nothing more, so hot loops may call it per item.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Never, TextIO

from tqdm import tqdm

#: Seconds between two progress lines when no bar is drawn.
LINE_INTERVAL_S = 5.0


def _count(value: float, unit: str) -> str:
    if unit == "B":
        return f"{value / (1 << 20):.1f} MiB"
    return f"{value:g} {unit}"


def describe(done: float, total: float | None, unit: str) -> str:
    """``1234 of 5000 records (24.7%)``, ``1.5 MiB of 3.0 MiB (50.0%)`` or, without a total, ``1234 records``."""
    if not total:
        return _count(done, unit)
    share = f"({100 * done / total:.1f}%)"
    if unit == "B":
        return f"{_count(done, unit)} of {_count(total, unit)} {share}"
    return f"{done:g} of {_count(total, unit)} {share}"


class Progress:
    """How far one piece of work is: ``advance`` as it goes, ``close`` (or leave the ``with``) at the end."""

    def __init__(self, what: str, total: float | None, unit: str = "items", *, sink: Callable[[str], None],
                 stream: TextIO | None = None, bar: bool | None = None, interval_s: float = LINE_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``sink`` takes the plain lines; ``bar`` (default: whether ``stream``, stderr by default, is a TTY)."""
        self.what = what
        self.total = total
        self.unit = unit
        self.done = 0.0
        self._sink = sink
        self._clock = clock
        self._interval_s = interval_s
        self._started = clock()
        self._last_line = self._started
        self._closed = False
        stream = stream if stream is not None else sys.stderr
        if bar is None:
            bar = stream.isatty()
        self._bar: tqdm[Never] | None = None
        if bar:
            scale = unit == "B"
            self._bar = tqdm(desc=what, total=total, unit=unit, unit_scale=scale, unit_divisor=1024 if scale else 1000,
                             file=stream, leave=True, dynamic_ncols=True)
        else:
            self._line("started")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close("failed" if exc is not None else "done")

    def describe(self) -> str:
        """``1234 of 5000 records (24.7%)`` or, without a total, ``1234 records``."""
        return describe(self.done, self.total, self.unit)

    def _line(self, state: str) -> None:
        elapsed = self._clock() - self._started
        self._sink(f"{self.what}: {self.describe()} {state} after {elapsed:.1f}s")

    def advance(self, amount: float = 1) -> None:
        self.done += amount
        if self._bar is not None:
            self._bar.update(amount)
            return
        now = self._clock()
        if now - self._last_line >= self._interval_s:
            self._last_line = now
            self._line("so far")

    def update_to(self, done: float) -> None:
        """Where the work is now, for work measured by a position (bytes read from a file, say)."""
        self.advance(done - self.done)

    def close(self, state: str = "done") -> None:
        """Finish the bar or write the last line (once)."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        else:
            self._line(state)
