"""The chaos run's disks: each broker's only log dir on a filesystem the run can break.

Each broker gets a size-limited tmpfs (``testing.disk_faults``) and, over a directory of it, the
FUSE passthrough that answers EIO on demand (``testing.eio_fs``); the broker's ``log.dirs`` is the
passthrough's mount point. So every broker can be given either disk fault:

- full: a ballast file beside the passthrough's backing directory (on the same tmpfs, out of the
  broker's sight) takes every free byte, so the broker's next write fails with ENOSPC;
- EIO: the passthrough's switch file makes every operation answer EIO.

Mounting needs root, mfusepy and /dev/fuse (``disks_available``). Everything mounted is unmounted
on the way out, whatever happened, lazily if a process still holds files there.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from contextlib import ExitStack
from pathlib import Path

from testing.disk_faults import can_mount, tmpfs
from testing.eio_fs import eio_mount, fuse_available

__all__ = ["BrokerDisks", "disks_available"]

#: Room for a broker's share of a 100-fault run (about 50 MB of log per replica) with a wide margin.
DISK_MB = 256
#: The ballast is written in chunks this size, then smaller ones down to a page, to leave no byte free.
_CHUNK = 1 << 20
_PAGE = 4096


def disks_available() -> str | None:
    """Why the disk faults cannot run here (None: they can)."""
    if not can_mount():
        return "the disk faults mount a tmpfs and a FUSE filesystem per broker, which needs root"
    if not fuse_available():
        return "the disk faults need mfusepy (libfuse) and /dev/fuse"
    return None


class BrokerDisks:
    """Brokers 1..``brokers``' log dirs, mounted for the duration of a ``with`` block."""

    def __init__(self, brokers: int, size_mb: int = DISK_MB) -> None:
        self.brokers = brokers
        self.size_mb = size_mb
        self.root = Path(tempfile.mkdtemp(prefix="pafka-chaos-disks-"))
        self._stack = ExitStack()

    def _tmpfs(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}-tmpfs"

    def _ballast(self, broker_id: int) -> Path:
        return self._tmpfs(broker_id) / "ballast"

    def _switch(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}-eio-on"

    def log_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}-disk"

    def broker_overrides(self) -> dict[int, list[str]]:
        return {b: [f"log.dirs={self.log_dir(b)}"] for b in range(1, self.brokers + 1)}

    def __enter__(self) -> BrokerDisks:
        try:
            for b in range(1, self.brokers + 1):
                disk = self._stack.enter_context(tmpfs(self._tmpfs(b), self.size_mb))
                self._stack.enter_context(eio_mount(disk / "log", self.log_dir(b), self._switch(b)))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.heal_all()
            self._stack.close()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- the faults --------------------------------------------------------------------------
    def fill(self, broker_id: int) -> int:
        """Take every free byte of the broker's filesystem; the ballast's size in bytes."""
        written, chunk = 0, _CHUNK
        with open(self._ballast(broker_id), "ab", buffering=0) as ballast:
            while chunk >= _PAGE:
                try:
                    written += ballast.write(b"\0" * chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    chunk //= 2
        return written

    def free(self, broker_id: int) -> None:
        self._ballast(broker_id).unlink(missing_ok=True)

    def fail(self, broker_id: int) -> None:
        """Every operation on the broker's log dir answers EIO from now on."""
        self._switch(broker_id).touch()

    def mend(self, broker_id: int) -> None:
        self._switch(broker_id).unlink(missing_ok=True)

    def heal_all(self) -> None:
        for b in range(1, self.brokers + 1):
            self.free(b)
            self.mend(b)
