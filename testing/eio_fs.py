"""A FUSE passthrough filesystem (mfusepy) that a test switches to answer EIO.

``python -m testing.eio_fs BACKING MOUNTPOINT SWITCH`` mounts BACKING at MOUNTPOINT; while the
file SWITCH exists, every operation answers EIO (a disk that died), and once it is gone they pass
through again. ``eio_mount`` runs it as a child process for a test and always unmounts.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["eio_mount", "fuse_available"]

MOUNT_TIMEOUT_S = 20.0


def fuse_available() -> bool:
    """mfusepy imports (it loads libfuse) and the kernel offers /dev/fuse."""
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError):
        return False
    return os.path.exists("/dev/fuse")


class EioPassthrough:
    """Each call on ``path`` works on ``backing + path`` unless the switch is on (mixed with
    mfusepy's Operations in ``main``, so this module imports without mfusepy)."""

    use_ns = True

    def __init__(self, backing: str, switch: str) -> None:
        self.backing = backing
        self.switch = switch

    def _real(self, path: str) -> str:
        if os.path.exists(self.switch):
            from mfusepy import FuseOSError

            raise FuseOSError(errno.EIO)
        return self.backing + path

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.lstat(self._real(path))
        found = {k: getattr(st, k) for k in ("st_gid", "st_mode", "st_nlink", "st_size", "st_uid", "st_blocks")}
        # Times in nanoseconds (``use_ns``).
        return found | {k: getattr(st, f"{k}_ns") for k in ("st_atime", "st_ctime", "st_mtime")}

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def access(self, path: str, amode: int) -> None:
        if not os.access(self._real(path), amode):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES))

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._real(path))
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                             "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def mkdir(self, path: str, mode: int) -> None:
        os.mkdir(self._real(path), mode)

    def rmdir(self, path: str) -> None:
        os.rmdir(self._real(path))

    def unlink(self, path: str) -> None:
        os.unlink(self._real(path))

    def rename(self, old: str, new: str) -> None:
        os.rename(self._real(old), self._real(new))

    def chmod(self, path: str, mode: int) -> None:
        os.chmod(self._real(path), mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        os.chown(self._real(path), uid, gid)

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        os.utime(self._real(path), ns=times)

    def open(self, path: str, flags: int) -> int:
        # A write-only open still serves the kernel's page reads (a shared mapping).
        flags = (flags & ~(os.O_WRONLY | os.O_RDONLY | os.O_RDWR)) | os.O_RDWR if flags & os.O_WRONLY else flags
        return os.open(self._real(path), flags & ~os.O_APPEND)

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        # Read-write whatever the caller asked: the kernel reads pages back through this handle too.
        return os.open(self._real(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        self._real(path)
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._real(path)
        return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        if fh is None:
            os.truncate(self._real(path), length)
        else:
            self._real(path)
            os.ftruncate(fh, length)

    def flush(self, path: str, fh: int) -> None:
        self._real(path)

    def fsync(self, path: str, datasync: int, fh: int) -> None:
        self._real(path)
        os.fsync(fh)

    def fsyncdir(self, path: str, datasync: int, fh: int) -> None:
        self._real(path)

    def release(self, path: str, fh: int) -> None:
        os.close(fh)



def main(argv: list[str]) -> None:
    from mfusepy import FUSE, Operations

    backing, mountpoint, switch = argv
    operations = type("EioPassthroughOperations", (EioPassthrough, Operations), {})(os.path.abspath(backing), switch)
    try:
        FUSE(operations, mountpoint, foreground=True, nothreads=False, allow_other=True)
    except RuntimeError:
        # libfuse's loop ends in an error when the mount is taken away (``eio_mount``'s umount):
        # that is the way this filesystem is meant to end.
        if os.path.ismount(mountpoint):
            raise


def _unmount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], check=False, capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


@contextmanager
def eio_mount(backing: Path, mountpoint: Path, switch: Path) -> Iterator[Path]:
    """Mount the passthrough for the duration; ``switch.touch()`` makes it fail, ``unlink`` heals it."""
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen([sys.executable, "-m", "testing.eio_fs", str(backing), str(mountpoint), str(switch)],
                             cwd=Path(__file__).resolve().parent.parent)
    try:
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not os.path.ismount(mountpoint):
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the EIO passthrough did not mount at {mountpoint}")
            time.sleep(0.05)
        yield mountpoint
    finally:
        _unmount(mountpoint)
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


if __name__ == "__main__":
    main(sys.argv[1:])
