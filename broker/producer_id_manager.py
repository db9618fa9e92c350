"""ProducerIdManager: hands out producer ids that are never reused.

Kafka allocates producer ids in blocks (1000 at a time) recorded durably —
in ZooKeeper's ``/latest_producer_id_block`` or the KRaft metadata log — before
any id of a block is handed out, so a crash can waste the rest of a block but
never hand an id out twice. A lone broker records its block in
``<log.dirs[0]>/producer-id-block`` (text: ``version``, ``block_start``,
``block_end`` lines), replaced atomically.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from storage.checkpoints import write_atomically

FILE_NAME = "producer-id-block"
BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, log_dir: str | os.PathLike[str], block_size: int = BLOCK_SIZE) -> None:
        self.path = Path(log_dir) / FILE_NAME
        self.block_size = block_size
        self._lock = threading.Lock()
        self._next = 0
        self._block_end = -1  # inclusive; -1: no block claimed yet

    def _read_last_block_end(self) -> int:
        try:
            lines = dict(line.split("=", 1) for line in self.path.read_text().split() if "=" in line)
        except FileNotFoundError:
            return -1
        return int(lines["block_end"])

    def _claim_block(self) -> None:
        start = max(self._read_last_block_end() + 1, self._block_end + 1)
        end = start + self.block_size - 1
        write_atomically(self.path, f"version=1\nblock_start={start}\nblock_end={end}\n")
        self._next, self._block_end = start, end

    def generate_producer_id(self) -> int:
        """A fresh id; blocks (fsync) when a new block must be claimed: call off the event loop."""
        with self._lock:
            if self._next > self._block_end:
                self._claim_block()
            producer_id = self._next
            self._next += 1
            return producer_id
