"""Progress of a long command on stderr, so that stdout stays the command's output.

A bar when stderr is a terminal and the command's own output does not go to that terminal too (a bar
redrawn between printed lines would garble both); plain lines (``storage.progress.Progress``: at the
start, every few seconds, at the end) otherwise, which is what a script or a CI log keeps.
"""

from __future__ import annotations

import sys

import click

from storage.progress import Progress, describe


def _to_stderr(line: str) -> None:
    click.echo(line, err=True)


def _bar(prints_to_stdout: bool) -> bool:
    return sys.stderr.isatty() and not (prints_to_stdout and sys.stdout.isatty())


def command_progress(what: str, total: float | None, unit: str, *, prints_to_stdout: bool) -> Progress:
    """Progress of ``what`` for a command; ``prints_to_stdout``: whether the command writes lines as it goes."""
    return Progress(what, total, unit, sink=_to_stderr, bar=_bar(prints_to_stdout))


def report_progress(what: str, done: float, total: float, unit: str, *, prints_to_stdout: bool) -> None:
    """How far work that goes on elsewhere has got, once (a command that checks and exits): a bar or a line."""
    if _bar(prints_to_stdout):
        with Progress(what, total, unit, sink=_to_stderr, bar=True) as progress:
            progress.update_to(done)
    else:
        _to_stderr(f"{what}: {describe(done, total, unit)}")
