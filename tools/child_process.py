"""Stopping a child process this tool started: by its PID, SIGTERM first, SIGKILL after a grace period."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable


def stop_child(proc: subprocess.Popen[bytes] | None, grace_s: float,
               on_kill: Callable[[], None] | None = None) -> None:
    """SIGTERM ``proc`` and wait ``grace_s``; SIGKILL it if it is still there (``on_kill`` says so
    first). Nothing to do when it never started or has exited."""
    if proc is None or proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        if on_kill is not None:
            on_kill()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace_s)
