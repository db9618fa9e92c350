"""Child process for the cleaner crash tests: open a log, clean it, maybe die on the way.

Usage: ``python -m tests.storage.cleaner_crash_child PARTITION_DIR NOW_MS [KILL_AT_OP]``

Every file-system mutation the cleaner and the log make (pwrite, fsync,
fdatasync, ftruncate, rename, replace, unlink) is counted. With KILL_AT_OP =
n the process SIGKILLs itself just before the n-th one: every step of the
``.cleaned`` -> ``.swap`` -> rename protocol is a possible crash point. The
process prints ``ready`` when the log is open and cleaning starts (the parent
may also kill it at a random moment after that) and ``ops=<count>`` when it
finishes normally.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storage.log import Log
from tests.storage.cleaner_support import compact_config

#: Small segments (many groups, many swaps) and small preallocated indexes
#: (reopening a killed log scans them).
CRASH_CONFIG = {"segment.bytes": 16 * 1024, "segment.index.bytes": 8 * 1024}

_MUTATIONS = ("pwrite", "write", "fsync", "fdatasync", "ftruncate", "rename", "replace", "unlink", "remove")


def install_kill_switch(kill_at: int | None) -> Callable[[], int]:
    """Wrap os-level mutations with a counter; returns a function giving the count."""
    count = 0

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal count
            count += 1
            if kill_at is not None and count >= kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)

        return counted

    for name in _MUTATIONS:
        setattr(os, name, wrap(getattr(os, name)))
    return lambda: count


def main(argv: list[str]) -> int:
    directory = Path(argv[0])
    now = int(argv[1])
    kill_at = int(argv[2]) if len(argv) > 2 else None
    # Imported here so the cleaner module binds nothing before the switch is set.
    from storage.log_cleaner import LogCleaner

    # The parent closed this log cleanly; a recovery scan would only slow the test.
    log = Log.open(directory, compact_config(**CRASH_CONFIG), had_clean_shutdown=True)
    log.update_high_watermark(log.log_end_offset)
    ops = install_kill_switch(kill_at)
    print("ready", flush=True)
    LogCleaner(time_ms=lambda: now).clean_log(log)
    log.delete_pending_segments(now=2**62)
    log.close()
    print(f"ops={ops()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
