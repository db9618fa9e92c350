"""TransactionIndex: the ``.txnindex`` file listing the aborted transactions of a segment.

Each 34-byte entry (big-endian) is Kafka's AbortedTxn::

    version           int16   0
    producerId        int64
    firstOffset       int64   the transaction's first offset (may be in an earlier segment)
    lastOffset        int64   the offset of its ABORT marker (in this segment)
    lastStableOffset  int64   the LSO once the abort was written

A READ_COMMITTED fetch collects the entries overlapping the fetched range so
the consumer can drop the aborted records. As in Kafka the file only exists
once a segment holds an abort marker.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from storage.checkpoints import write_atomically
from storage.errors import CorruptIndexError

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: list[AbortedTxn]
    #: True once an entry's LSO reaches the upper bound: later segments cannot add any.
    is_complete: bool


class TransactionIndex:
    def __init__(self, path: Path | str, base_offset: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._load_error: CorruptIndexError | None = None
        try:
            self._entries: list[AbortedTxn] = self._read() if self.path.exists() else []
        except CorruptIndexError as exc:  # reported by sanity_check; the loader rebuilds
            self._load_error, self._entries = exc, []

    def _read(self) -> list[AbortedTxn]:
        data = self.path.read_bytes()
        entries = []
        for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, pos)
            if version != VERSION:
                raise CorruptIndexError(f"unexpected version {version} in transaction index {self.path}")
            entries.append(AbortedTxn(*fields))
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"transaction index {self.path} has a partial entry")
        return entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def append(self, txn: AbortedTxn) -> None:
        if self._entries and txn.last_offset < self._entries[-1].last_offset:
            raise CorruptIndexError(
                f"transaction index {self.path}: last offset {txn.last_offset} below {self._entries[-1].last_offset}"
            )
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(VERSION, *txn))
        self._entries.append(txn)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        found = []
        for txn in self._entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        kept = [txn for txn in self._entries if txn.last_offset < offset]
        if len(kept) != len(self._entries):
            self._rewrite(kept)

    def reset(self) -> None:
        self._load_error = None
        self._rewrite([])

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        self._entries = entries
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        # Written aside and renamed over: a full disk mid-rewrite leaves the old index, never half a new one.
        write_atomically(self.path, b"".join(_ENTRY.pack(VERSION, *txn) for txn in entries))

    def flush(self) -> None:
        if self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete_if_exists(self) -> None:
        self.path.unlink(missing_ok=True)

    def sanity_check(self) -> None:
        if self._load_error is not None:
            raise self._load_error
        for txn in self._entries:
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"transaction index {self.path}: last offset {txn.last_offset} below the base offset {self.base_offset}"
                )
