"""LogSegment: one ``.log`` file with its ``.index`` and ``.timeindex``.

Files are named by the segment's base offset, zero-padded to 20 digits
(``00000000000000000000.log``), optionally followed by a suffix while the
segment is being cleaned (``.cleaned``), swapped in (``.swap``) or deleted
(``.deleted``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from protocol.errors import CorruptRecordError, ProtocolError
from protocol.record_batch import RecordBatchHeader, iter_batch_headers
from storage.file_records import FileRecords, FileSlice
from storage.log_config import LogConfig
from storage.offset_index import OffsetIndex
from storage.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from storage.transaction_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

log = logging.getLogger(__name__)

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
DELETED_FILE_SUFFIX = ".deleted"
INT32_MAX = 0x7FFFFFFF

BatchCallback = Callable[[RecordBatchHeader], None]


def now_ms() -> int:
    """The wall clock in milliseconds, as segments and logs stamp their times."""
    return int(time.time() * 1000)


def filename_prefix_from_offset(offset: int) -> str:
    return f"{offset:020d}"


def offset_from_file_name(name: str) -> int:
    return int(name.split(".", 1)[0])


def log_file(dir: Path, base_offset: int, suffix: str = "") -> Path:
    return dir / f"{filename_prefix_from_offset(base_offset)}{LOG_FILE_SUFFIX}{suffix}"


def offset_index_file(dir: Path, base_offset: int, suffix: str = "") -> Path:
    return dir / f"{filename_prefix_from_offset(base_offset)}{INDEX_FILE_SUFFIX}{suffix}"


def time_index_file(dir: Path, base_offset: int, suffix: str = "") -> Path:
    return dir / f"{filename_prefix_from_offset(base_offset)}{TIME_INDEX_FILE_SUFFIX}{suffix}"


def txn_index_file(dir: Path, base_offset: int, suffix: str = "") -> Path:
    return dir / f"{filename_prefix_from_offset(base_offset)}{TXN_INDEX_FILE_SUFFIX}{suffix}"


class LogOffsetMetadata(NamedTuple):
    """Where an offset lives: the offset, its segment and the batch position in it."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@dataclass(frozen=True)
class FetchDataInfo:
    """The answer to a read: whole batches of one segment as a file range (or none)."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice | None
    #: The offset after the last batch returned (what bounds the aborted transactions).
    next_offset: int | None = None
    #: READ_COMMITTED fetches: aborted transactions overlapping the returned batches.
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def size(self) -> int:
        return 0 if self.records is None else self.records.size

    def file_ranges(self) -> list[FileSlice]:
        return [] if self.records is None else [self.records]


class LogSegment:
    # Slots sit in memory in the order named: the measured layout is kept, not sorted (see Log).
    __slots__ = (  # noqa: RUF023
        'dir', 'base_offset', 'index_interval_bytes', 'max_index_size', 'rolling_jitter_ms', 'log',
        'offset_index', 'time_index', 'txn_index', 'created_ms', 'bytes_since_last_index_entry',
        'recovery_scan_start', '_rolling_based_timestamp', '_read_end', '_max_timestamp_and_offset',
        '_next_offset',
    )

    def __init__(
        self,
        dir: Path,
        base_offset: int,
        config: LogConfig,
        file_suffix: str = "",
        create: bool = False,
        rolling_jitter_ms: int = 0,
        now_ms: int | None = None,
    ) -> None:
        self.dir = Path(dir)
        self.base_offset = base_offset
        self.index_interval_bytes = config.index_interval_bytes
        self.max_index_size = config.segment_index_bytes
        self.rolling_jitter_ms = rolling_jitter_ms
        self.log = FileRecords(log_file(self.dir, base_offset, file_suffix), create=create)
        self.offset_index = OffsetIndex(offset_index_file(self.dir, base_offset, file_suffix), base_offset, self.max_index_size)
        self.time_index = TimeIndex(time_index_file(self.dir, base_offset, file_suffix), base_offset, self.max_index_size)
        self.txn_index = TransactionIndex(txn_index_file(self.dir, base_offset, file_suffix), base_offset)
        self.created_ms = int(time.time() * 1000) if now_ms is None else now_ms
        self.bytes_since_last_index_entry = 0
        self.recovery_scan_start = 0  # where the last recover() began scanning
        self._rolling_based_timestamp: int | None = None
        #: (offset, position) where the last read ended: a consumer's next fetch
        #: starts there, and finds its batch without an index lookup.
        self._read_end: tuple[int, int] | None = None
        self._max_timestamp_and_offset: TimestampOffset | None = None
        self._next_offset: int | None = base_offset if self.log.size == 0 else None

    @classmethod
    def open(cls, dir: Path, base_offset: int, config: LogConfig, file_suffix: str = "", **kwargs: Any) -> LogSegment:
        return cls(dir, base_offset, config, file_suffix=file_suffix, **kwargs)

    # --- properties -------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.log.size

    def __repr__(self) -> str:
        return f"LogSegment(baseOffset={self.base_offset}, size={self.size}, path={self.log.path.name})"

    @property
    def max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        if self._max_timestamp_and_offset is None:
            self._max_timestamp_and_offset = self._load_largest_timestamp()
        return self._max_timestamp_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self.max_timestamp_and_offset_so_far.timestamp

    @property
    def largest_timestamp(self) -> int:
        """The segment's largest record timestamp, or its file's mtime if it has none."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.log.last_modified_ms()

    def _load_largest_timestamp(self) -> TimestampOffset:
        # The time index is sparse: batches after its last entry may carry larger timestamps.
        best = self.time_index.last_entry
        start = self.offset_index.lookup(best.offset).position
        for _, header in self.log.batch_headers(start):
            if header.max_timestamp > best.timestamp:
                best = TimestampOffset(header.max_timestamp, header.last_offset)
        return best

    def read_next_offset(self) -> int:
        """The offset after the last batch of this segment (base offset when empty)."""
        if self._next_offset is None:
            nxt = self.base_offset
            start = self.offset_index.lookup(self.offset_index.last_offset).position
            for _, header in self.log.batch_headers(start):
                nxt = header.next_offset
            self._next_offset = nxt
        return self._next_offset

    # --- append -----------------------------------------------------------------------
    def should_roll(self, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int, config: LogConfig) -> bool:
        # Asked once per partition batch: the cheap tests first, each attribute read once.
        size = self.log.size
        if size > config.segment_bytes - messages_size:
            return True
        if size > 0 and self.time_waited_for_roll(now_ms, max_timestamp) > config.segment_ms - self.rolling_jitter_ms:
            return True
        offset_index = self.offset_index
        return (
            offset_index.is_full()
            or self.time_index.is_full()
            or not offset_index.can_append_offset(max_offset)
        )

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """As Kafka: by record timestamps when the first batch has one, else by wall clock."""
        if self._rolling_based_timestamp is None and self.size > 0:
            first = next(self.log.batch_headers(0, None), None)
            self._rolling_based_timestamp = first[1].max_timestamp if first else NO_TIMESTAMP
        if self._rolling_based_timestamp is not None and self._rolling_based_timestamp >= 0:
            return message_timestamp - self._rolling_based_timestamp
        return now_ms - self.created_ms

    def append(self, buf: bytes | bytearray | memoryview, batches: Sequence[tuple[int, RecordBatchHeader]]) -> None:
        """Write ``buf`` (whole batches with offsets assigned) and index them.

        ``batches`` are the (position in buf, header) pairs of ``buf``.
        """
        if not batches:
            return
        # Once per partition batch of every produce: header fields are read once.
        records = self.log
        physical_position = records.size
        last = batches[-1][1]
        last_offset = last.base_offset + last.last_offset_delta
        if physical_position == 0:
            self._rolling_based_timestamp = batches[0][1].max_timestamp
        if not self.offset_index.can_append_offset(last_offset):
            raise CorruptRecordError(f"offset {last_offset} does not fit segment {self.base_offset}")
        records.append(buf)
        max_so_far = self.max_timestamp_and_offset_so_far
        for pos, header in batches:
            if header.max_timestamp > max_so_far.timestamp:
                max_so_far = TimestampOffset(header.max_timestamp, header.last_offset)
            self._maybe_index(header, physical_position + pos, max_so_far)
        self._max_timestamp_and_offset = max_so_far
        self._next_offset = last_offset + 1

    def _maybe_index(self, header: RecordBatchHeader, position: int, max_so_far: TimestampOffset) -> None:
        # Runs after the bytes are written, so it must not fail: a full index (only
        # possible within one many-batch append) just skips the entry; reads scan on.
        if (self.bytes_since_last_index_entry > self.index_interval_bytes
                and not self.offset_index.is_full() and not self.time_index.is_full()):
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(max_so_far.timestamp, max_so_far.offset)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += header.size_in_bytes

    def append_batches(self, buf: bytes | bytearray | memoryview) -> None:
        """Append whole batches whose offsets are already set (the cleaner's path)."""
        self.append(buf, list(iter_batch_headers(buf)))

    # --- read -------------------------------------------------------------------------
    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, RecordBatchHeader] | None:
        """(position, header) of the batch containing ``offset`` or the first one after it."""
        position = max(self.offset_index.lookup(offset).position, start_position)
        return self.log.search_for_offset(offset, position)

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False,
        max_position_offset: int | None = None,
    ) -> FetchDataInfo | None:
        """Whole batches from the one containing ``start_offset``; None past this segment.

        ``max_position_offset``, when given, is the offset of the batch that starts at
        ``max_position``: a read reaching that bound then needs no walk over headers.
        """
        found = self._batch_at_read_end(start_offset)
        if found is None:
            found = self.translate_offset(start_offset)
            if found is None:
                return None
        position, header = found
        metadata = LogOffsetMetadata(start_offset, self.base_offset, position)
        limit = self.size if max_position is None else min(max_position, self.size)
        first_size = header.size_in_bytes
        if min_one_message:
            max_size = max(max_size, first_size)
        if position >= limit or max_size < first_size:
            return FetchDataInfo(metadata, self.log.slice(position, 0))
        end = min(position + max_size, limit)
        if end == limit and max_position_offset is not None and max_position == limit:
            # Everything up to the bound fits, and the offset there is known.
            self._read_end = (max_position_offset, limit)
            return FetchDataInfo(metadata, self.log.slice(position, limit - position), max_position_offset)
        # Jump close to the byte limit via the index, then walk whole batches to it.
        hint = self.offset_index.lookup_by_position(end).position
        walk_from = hint if hint > position else position  # noqa: FURB136 -- a fetch's read path: no call to max()
        last_end, next_offset = self.log.last_batch_end_within(walk_from, end)
        if last_end <= position + first_size:
            last_end, next_offset = position + first_size, header.next_offset
        elif next_offset is None:  # the batch at the index hint did not fit: it is the next one
            following = next(self.log.batch_headers(last_end), None)
            next_offset = following[1].base_offset if following else self.read_next_offset()
        if next_offset is not None:
            self._read_end = (next_offset, last_end)
        return FetchDataInfo(metadata, self.log.slice(position, last_end - position), next_offset)

    def _batch_at_read_end(self, offset: int) -> tuple[int, RecordBatchHeader] | None:
        """The batch holding ``offset`` if it starts where the last read ended (checked)."""
        read_end = self._read_end
        if read_end is None or read_end[0] != offset:
            return None
        found = next(self.log.batch_headers(read_end[1]), None)
        if found is None or not found[1].base_offset <= offset <= found[1].last_offset:
            return None
        return found

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, RecordBatchHeader] | None:
        """(position, header) of the first batch with maxTimestamp >= ``timestamp``."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    def update_txn_index(self, producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int) -> None:
        """Record an aborted transaction whose ABORT marker is in this segment."""
        self.txn_index.append(AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, RecordBatchHeader]]:
        """(position, header) of every batch; the cleaner and dump-log iterate this."""
        return self.log.batch_headers(start_position)

    def read_batch(self, position: int, header: RecordBatchHeader) -> bytes:
        return self.log.read(position, header.size_in_bytes)

    # --- recovery and truncation ------------------------------------------------------
    def recover(self, on_batch: BatchCallback | None = None, recovery_point: int = -1) -> int:
        """Rebuild the indexes from the log, checking every batch (length, magic, CRC32C).

        The log is cut at the first batch that fails; returns the bytes removed.
        ``on_batch`` sees each valid batch (leader-epoch cache, producer state).
        ``recovery_point``: offsets below it were flushed (log and indexes), so the
        batches below it are walked by header only, from the last index entry below
        it, and only the rest is checked: a crash costs a scan of what was not
        flushed, not of whole segments.
        """
        # Aborted transactions come back when the loader replays producer state.
        self.txn_index.reset()
        self.bytes_since_last_index_entry = 0
        self._read_end = None
        resumed = self._walk_flushed(recovery_point, on_batch) if recovery_point > self.base_offset else None
        if resumed is None:
            self.offset_index.reset()
            self.time_index.reset()
            resumed = 0, self.base_offset, TimestampOffset(NO_TIMESTAMP, self.base_offset)
        valid_bytes, next_offset, max_so_far = resumed
        self.recovery_scan_start = valid_bytes
        for position, scanned in self.log.scan_batches(start_position=valid_bytes):
            if isinstance(scanned, ProtocolError):  # corrupt, torn, or garbage that looks like magic 0/1
                log.warning("Found invalid batch at position %d in %s: %s", position, self.log.path, scanned)
                break
            header = scanned
            if header.last_offset < next_offset or not self.offset_index.can_append_offset(header.last_offset):
                log.warning(
                    "Found batch with out-of-order or out-of-range offsets %d..%d at position %d in %s",
                    header.base_offset, header.last_offset, position, self.log.path,
                )
                break
            max_so_far = self._index_recovered(header, position, max_so_far, on_batch)
            valid_bytes = position + header.size_in_bytes
            next_offset = header.next_offset
        truncated = self.log.size - valid_bytes
        if truncated > 0:
            log.warning("Truncating %s to %d bytes (%d invalid bytes removed)", self.log.path, valid_bytes, truncated)
            self.log.truncate_to(valid_bytes)
        if max_so_far.timestamp >= 0:
            self.time_index.maybe_append(max_so_far.timestamp, max_so_far.offset, skip_full_check=True)
        self._max_timestamp_and_offset = max_so_far
        self._next_offset = next_offset
        self._rolling_based_timestamp = None
        return truncated

    def _index_recovered(self, header: RecordBatchHeader, position: int, max_so_far: TimestampOffset,
                         on_batch: BatchCallback | None) -> TimestampOffset:
        if header.max_timestamp > max_so_far.timestamp:
            max_so_far = TimestampOffset(header.max_timestamp, header.last_offset)
        self._maybe_index(header, position, max_so_far)
        if on_batch is not None:
            on_batch(header)
        return max_so_far

    def _walk_flushed(self, recovery_point: int, on_batch: BatchCallback | None
                      ) -> tuple[int, int, TimestampOffset] | None:
        """Walk the batches below ``recovery_point`` by header, from the last index entry below
        it (index entries after it are dropped: they may point at lost data).

        Returns (position, next offset, max timestamp so far) where checking must begin, or
        None when the flushed part is not as the index says (then everything is checked).
        """
        entry = self.offset_index.lookup(recovery_point - 1)
        indexed = entry.position > 0
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        if indexed:
            self.offset_index.truncate_to(entry.offset + 1)
            self.time_index.truncate_to(entry.offset + 1)
            max_so_far = (self.time_index.last_entry if self.time_index.entries
                          else TimestampOffset(NO_TIMESTAMP, self.base_offset))
        else:
            self.offset_index.reset()
            self.time_index.reset()
            max_so_far = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        position, next_offset = entry.position, self.base_offset
        try:
            for pos, header in self.log.batch_headers(entry.position):
                if indexed and pos == entry.position and header.last_offset != entry.offset:
                    break  # the batch the index names is not there
                if header.last_offset >= recovery_point:
                    return position, next_offset, max_so_far
                max_so_far = self._index_recovered(header, pos, max_so_far, on_batch)
                position, next_offset = pos + header.size_in_bytes, header.next_offset
            else:
                if position > entry.position or not indexed:
                    return position, next_offset, max_so_far
        except ProtocolError:
            pass
        log.warning("%s does not hold the flushed batches its index names below offset %d; checking it all",
                    self.log.path, recovery_point)
        return None

    def sanity_check(self) -> None:
        """Raises CorruptIndexError when an index cannot be trusted (the loader rebuilds)."""
        self.offset_index.sanity_check(self.log.size)
        self.time_index.sanity_check()
        self.txn_index.sanity_check()

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after the one containing ``offset``; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        removed = self.log.truncate_to(position)
        if self.log.size == 0:
            self.created_ms = int(time.time() * 1000)
            self._rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        self._max_timestamp_and_offset = None
        self._next_offset = None
        self._read_end = None
        return removed

    # --- lifecycle --------------------------------------------------------------------
    def on_become_inactive_segment(self) -> None:
        """On roll: record the final max timestamp and trim the preallocated indexes."""
        max_so_far = self.max_timestamp_and_offset_so_far
        if max_so_far.timestamp >= 0:
            self.time_index.maybe_append(max_so_far.timestamp, max_so_far.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self.log.closed:
            return
        max_so_far = self.max_timestamp_and_offset_so_far
        if max_so_far.timestamp >= 0:
            self.time_index.maybe_append(max_so_far.timestamp, max_so_far.offset, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self.log.close()

    def close_handlers(self) -> None:
        """Release files without trimming (the directory is going away)."""
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.log.close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        for f in (self.log, self.offset_index, self.time_index, self.txn_index):
            name = f.path.name
            base = name[: -len(old_suffix)] if old_suffix and name.endswith(old_suffix) else name
            f.rename_to(f.path.with_name(base + new_suffix))

    def has_suffix(self, suffix: str) -> bool:
        return self.log.path.name.endswith(suffix)

    def delete_if_exists(self) -> None:
        self.offset_index.delete_if_exists()
        self.time_index.delete_if_exists()
        self.txn_index.delete_if_exists()
        self.log.delete_if_exists()

    def last_modified_ms(self) -> int:
        return self.log.last_modified_ms()

