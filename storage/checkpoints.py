"""Kafka's text checkpoint files, written atomically.

Format (``OffsetCheckpointFile``)::

    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- topic partition offset
    my-topic 1 99

Writes go to ``<name>.tmp``, are fsynced, renamed over the file, and the
directory is fsynced, so a crash leaves either the old or the new content.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from storage.errors import KafkaStorageError

log = logging.getLogger(__name__)

CHECKPOINT_VERSION = 0

RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

T = TypeVar("T")


def fsync_dir(path: Path) -> None:
    """Make a rename or file creation in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, content: str | bytes, mode: int = 0o666) -> None:
    """Write ``<name>.tmp``, fsync it, rename it over ``path``, fsync the directory:
    a crash leaves the old content or the new, never a mix (text is UTF-8).

    ``mode`` (before the umask) is given to the new file from its creation on,
    so a file holding secrets is never readable by others, not even briefly.
    """
    tmp = path.with_name(path.name + ".tmp")
    if mode != 0o666:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()  # a leftover from a crash would keep its old mode
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
        f.write(content.encode("utf-8") if isinstance(content, str) else content)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class CheckpointFile:
    """A versioned list of text entries; subclasses say how an entry is formatted."""

    def __init__(self, path: Path | str, version: int = CHECKPOINT_VERSION) -> None:
        self.path = Path(path)
        self.version = version

    def write_lines(self, lines: list[str]) -> None:
        body = f"{self.version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        write_atomically(self.path, body)

    def read_lines(self) -> list[str]:
        """The entry lines; [] if the file does not exist. Malformed files raise."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        lines = text.splitlines()
        if len(lines) < 2:
            raise KafkaStorageError(f"malformed checkpoint file {self.path}: missing header")
        try:
            version, count = int(lines[0]), int(lines[1])
        except ValueError as exc:
            raise KafkaStorageError(f"malformed checkpoint file {self.path}: {exc}") from None
        if version != self.version:
            raise KafkaStorageError(f"unrecognized version {version} in checkpoint file {self.path}")
        entries = [line for line in lines[2:] if line.strip()]
        if len(entries) != count:
            raise KafkaStorageError(
                f"checkpoint file {self.path} announces {count} entries but holds {len(entries)}"
            )
        return entries


def _parse_entries(file: CheckpointFile, parse: Callable[[list[str]], T], width: int) -> list[T]:
    out = []
    for line in file.read_lines():
        fields = line.split()
        if len(fields) != width:
            raise KafkaStorageError(f"malformed line {line!r} in checkpoint file {file.path}")
        try:
            out.append(parse(fields))
        except ValueError:
            raise KafkaStorageError(f"malformed line {line!r} in checkpoint file {file.path}") from None
    return out


class OffsetCheckpointFile(CheckpointFile):
    """``topic partition offset`` per line: recovery points, log start offsets, HWs, cleaner."""

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        lines = [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
        self.write_lines(lines)

    def read(self) -> dict[tuple[str, int], int]:
        entries = _parse_entries(self, lambda f: ((f[0], int(f[1])), int(f[2])), 3)
        return dict(entries)

    def read_or_empty(self) -> dict[tuple[str, int], int]:
        """``read()``, but a malformed or unreadable file is logged and read as empty, as
        Kafka does at start-up and in the cleaner (the next write replaces the file)."""
        try:
            return self.read()
        except KafkaStorageError as exc:
            log.error("Ignoring unreadable checkpoint file %s, reading it as empty: %s", self.path, exc)
            return {}


class LeaderEpochCheckpointFile(CheckpointFile):
    """``epoch startOffset`` per line (the ``leader-epoch-checkpoint`` file)."""

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        self.write_lines([f"{epoch} {start_offset}" for epoch, start_offset in entries])

    def read(self) -> list[tuple[int, int]]:
        return _parse_entries(self, lambda f: (int(f[0]), int(f[1])), 2)
