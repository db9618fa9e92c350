"""Which partition of a coordinator's internal topic holds a key (a group id, a transactional id).

Kafka places both with ``Utils.abs(key.hashCode()) % partitionCount``; every
broker and every client-side tool must agree on the result, so Java's
``String.hashCode`` (over UTF-16 code units, int32 overflow) and
``Utils.abs`` (Integer.MIN_VALUE maps to 0) are reproduced exactly.
"""

from __future__ import annotations

import functools


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, int32 overflow."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except that Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


@functools.lru_cache(maxsize=65536)
def partition_for(key: str, num_partitions: int) -> int:
    """Cached: a coordinator asks this for the same few group and transactional ids on every request,
    and the hash is a Python loop over the key's characters (about 10 us for a 40-character id)."""
    return kafka_abs(java_string_hash(key)) % num_partitions
