"""Small real filesystems for disk-fault tests: a size-limited tmpfs the test mounts itself.

``tmpfs(path, size_mb)`` mounts one at ``path`` (root only; the tests skip elsewhere) and always
unmounts it on the way out, whatever the test did, lazily if a process still holds files there.
``grow`` frees space without touching the files (a remount with a larger size).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["can_mount", "grow", "tmpfs"]


def can_mount() -> bool:
    return os.geteuid() == 0


@contextmanager
def tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], check=False, capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def grow(path: Path, size_mb: int) -> None:
    """More room on a mounted tmpfs, its files kept."""
    subprocess.run(["mount", "-o", f"remount,size={size_mb}m", str(path)], check=True)
