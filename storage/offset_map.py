"""The log cleaner's key -> latest offset map (Kafka's OffsetMap / SkimpyOffsetMap).

Keys are stored as their 16-byte MD5 digest, as Kafka does, so the memory a
key costs does not depend on its length and the map's capacity can be derived
from ``log.cleaner.dedupe.buffer.size``. Two keys with the same digest would
be treated as one key; with MD5 that is as unlikely for us as it is for Kafka.

Kafka sizes its map at 24 bytes a slot (digest + offset) and fills it to
``log.cleaner.io.buffer.load.factor`` (0.9); we keep those numbers so the
configured buffer size means the same number of keys per cleaning pass, even
though a Python dict entry costs more memory than a slot.
"""

from __future__ import annotations

import hashlib

HASH_SIZE = 16
BYTES_PER_ENTRY = HASH_SIZE + 8
#: ``log.cleaner.dedupe.buffer.size`` default (128 MiB).
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
#: ``log.cleaner.io.buffer.load.factor`` default.
DEFAULT_LOAD_FACTOR = 0.9


def key_digest(key: bytes | bytearray | memoryview) -> bytes:
    return hashlib.md5(key).digest()


class OffsetMap:
    """Bounded map from a key's digest to the highest offset seen for it."""

    def __init__(self, memory: int = DEFAULT_DEDUPE_BUFFER_SIZE, load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        self.slots = max(1, memory // BYTES_PER_ENTRY)
        self.load_factor = load_factor
        self._offsets: dict[bytes, int] = {}
        #: Highest offset covered by the map (not necessarily a keyed record's).
        self.latest_offset = -1

    @property
    def max_desired_size(self) -> int:
        """How many keys a pass may map before it stops (slots x load factor)."""
        return max(1, int(self.slots * self.load_factor))

    @property
    def size(self) -> int:
        return len(self._offsets)

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_desired_size

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.slots

    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        """Record ``offset`` as the latest for ``key``; offsets arrive in increasing order."""
        self._offsets[key_digest(key)] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The latest offset for ``key``, or -1 when the key is not in the map."""
        return self._offsets.get(key_digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1
