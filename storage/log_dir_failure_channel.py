"""LogDirFailureChannel: a log directory whose disk failed goes offline, once.

Any OSError from the filesystem under one log directory (EIO, ENOSPC, a read,
write, flush, roll, index or checkpoint) is reported here by whoever met it, on
whatever thread. The first report of a directory marks it offline and logs one
line (no traceback: the same failure would otherwise be logged by every request
that meets it); later reports of the same directory are dropped. Listeners hear
of each directory once, on the reporting thread: the log manager marks the
directory's logs offline at once (so no other write reaches the disk), and the
replica manager hands the rest (fetchers, the controller, halting) to its loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["LogDirFailureChannel"]

log = logging.getLogger(__name__)

#: Called with a directory that just went offline.
OfflineDirListener = Callable[[Path], object]


class LogDirFailureChannel:
    """The set of offline log directories, and who is told when one joins it."""

    def __init__(self) -> None:
        self._offline: set[Path] = set()
        self._listeners: list[OfflineDirListener] = []
        self._lock = threading.Lock()

    def add_listener(self, listener: OfflineDirListener) -> None:
        self._listeners.append(listener)

    def has_offline_log_dir(self, dir: Path) -> bool:
        return dir in self._offline

    @property
    def offline_dirs(self) -> frozenset[Path]:
        return frozenset(self._offline)

    def maybe_add_offline_log_dir(self, dir: Path, message: str, error: BaseException | None = None) -> bool:
        """Mark ``dir`` offline; True the first time (listeners told), False when it already was."""
        with self._lock:
            if dir in self._offline:
                return False
            self._offline.add(dir)
        log.error("Log directory %s is offline: %s%s", dir, message, f" ({error})" if error is not None else "")
        for listener in list(self._listeners):
            try:
                listener(dir)
            except Exception:
                log.exception("a listener of the offline log directory %s failed", dir)
        return True
