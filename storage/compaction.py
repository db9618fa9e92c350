"""Kafka's Cleaner: compact one log (the record-level half of the log cleaner).

One pass over a log, as Kafka does it:

1. Map every key of the dirty section [first dirty, first uncleanable) to its
   latest offset (``build_offset_map``); records of aborted transactions are
   not mapped. The map is bounded, so a pass may stop early; the pass then
   cleans up to the last offset the map covers.
2. Group the segments from the start of the log up to that offset so each
   group's log and index data fit ``segment.bytes`` / ``segment.index.bytes``
   and its offset range fits a relative offset (``group_segments_by_size``).
3. Rewrite each group into one ``.cleaned`` segment (``clean_segments``) and
   swap it in through ``Log.replace_segments`` (``.cleaned`` -> ``.swap`` ->
   live, crash-safe by the log's recovery).

Which records survive (``BatchFilter``), following Kafka 4:

* a keyed record survives if its offset is the map's latest for its key, or
  is past the map's coverage; keyless records are dropped (Kafka counts them
  as invalid: a compacted topic refuses them at produce time);
* a tombstone (null value) survives until its batch's delete horizon has
  passed. KIP-534: the first pass that keeps a tombstone rewrites its batch
  with attributes bit 6 set and baseTimestamp = now + ``delete.retention.ms``
  (record timestamps keep their values; their deltas are re-based); a later
  pass after that time drops it;
* records of aborted transactions are dropped; an ABORT marker stays while
  any batch of its transaction was seen in this pass, a COMMIT marker while
  any data of its transaction is left; after that the marker gets a delete
  horizon like a tombstone and is removed once it has passed;
* a batch left with no records disappears, except the last batch of each
  active producer (it holds the producer's last sequence and epoch) and the
  last batch of the cleaned range (it holds the range's last offset): those
  stay as empty batches (recordsCount 0, lastOffsetDelta kept), as Kafka's
  RETAIN_EMPTY does;
* a rewritten batch keeps its base offset, last offset delta, producer id,
  epoch, base sequence, transactional/control flags, timestamp type, partition
  leader epoch and compression codec; an untouched batch is copied verbatim.

The aborted transactions come from the log's transaction indexes
(``Log.collect_aborted_transactions``, Kafka's ``collectAbortedTransactions``).
An ABORT marker kept because batches of its transaction remain keeps its entry:
it is written to the cleaned segment's ``.txnindex``, so READ_COMMITTED readers
still learn about the transaction. The active producers come from the log's
producer state; a log opened without one has them replayed from its batch
headers (``active_producers_from_headers``).
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from protocol.control_records import parse_control_key
from protocol.record_batch import (
    CONTROL_FLAG,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    RecordBatchHeader,
    build_batch_header,
)
from protocol.records import Record, build_batch, read_batch
from storage.log_config import LogConfig
from storage.log_segment import CLEANED_FILE_SUFFIX, LogSegment
from storage.offset_map import OffsetMap
from storage.producer_state import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, ProducerStateManager
from storage.transaction_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

_INT32_MAX = 0x7FFFFFFF
#: Cleaned batches are written to the new segment in chunks of about this size.
WRITE_CHUNK_BYTES = 1 << 20


class CleanerLog(Protocol):
    """What the cleaner needs from a Log (storage.log.Log provides it)."""

    dir: Path
    config: LogConfig

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]: ...

    def replace_segments(self, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]) -> None: ...


# ---------------------------------------------------------------- transactions


def control_type_of(batch: bytes) -> int | None:
    """ABORT (0) or COMMIT (1) from a control batch's first record; None when empty."""
    _, records = read_batch(batch)
    return parse_control_key(records[0].key)[1] if records else None


def aborted_transactions(log: CleanerLog, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
    """The log's aborted transactions with data in [start, upper bound), by first offset."""
    return sorted(log.collect_aborted_transactions(start_offset, upper_bound_offset), key=lambda txn: txn.first_offset)


@dataclass
class _AbortedTxnMetadata:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


@dataclass
class CleanedTransactionMetadata:
    """Transaction state while the cleaner walks a log in offset order."""

    aborted: list[AbortedTxn] = field(default_factory=list)  # sorted by first offset
    #: The cleaned segment being written: retained aborted transactions go to its index.
    cleaned_index: TransactionIndex | None = None
    _next_aborted: int = 0
    _ongoing_committed: set[int] = field(default_factory=set)
    _ongoing_aborted: dict[int, _AbortedTxnMetadata] = field(default_factory=dict)

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._next_aborted < len(self.aborted) and self.aborted[self._next_aborted].first_offset <= offset:
            txn = self.aborted[self._next_aborted]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnMetadata(txn))
            self._next_aborted += 1

    def on_batch_read(self, header: RecordBatchHeader) -> bool:
        """A data batch: True if it belongs to an aborted transaction (discardable)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            aborted.last_observed_batch_offset = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch_read(self, header: RecordBatchHeader, control_type: int | None) -> bool:
        """A marker: True if no data of its transaction remains (it may then go)."""
        self._consume_aborted_up_to(header.last_offset)
        if control_type is None:
            return True  # an empty control batch was cleaned before
        if control_type == CONTROL_TYPE_ABORT:
            aborted = self._ongoing_aborted.pop(header.producer_id, None)
            if aborted is None or aborted.last_observed_batch_offset is None:
                return True
            # The marker stays, and so does the transaction's index entry.
            if self.cleaned_index is not None:
                self.cleaned_index.append(aborted.txn)
            return False
        if control_type == CONTROL_TYPE_COMMIT:
            if header.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(header.producer_id)
                return False
            return True
        return False


# ---------------------------------------------------------------- active producers


def active_producers_from_headers(
    segments: Iterable[LogSegment], now_ms: int, expiration_ms: int
) -> dict[int, tuple[int | None, int]]:
    """(last data offset or None, epoch) per active producer, replayed from batch headers.

    For a log opened without producer state; a log with one answers from it.
    """
    # In memory only: this manager never takes or loads a snapshot.
    producers = ProducerStateManager(os.devnull)
    for segment in segments:
        for _, header in segment.batches():
            if header.producer_id != NO_PRODUCER_ID:
                producers.update(header)
    return last_records_of(producers, now_ms, expiration_ms)


def last_records_of(
    producers: ProducerStateManager, now_ms: int, expiration_ms: int
) -> dict[int, tuple[int | None, int]]:
    """(last data offset or None, epoch) of each producer not idle for ``expiration_ms``.

    The batch holding an expired producer's last sequence need not be kept:
    its producer id is forgotten (``producer.id.expiration.ms``) whether or
    not the broker has pruned its producer state yet.
    """
    return {
        pid: (None if entry.is_empty else entry.last_data_offset, entry.producer_epoch)
        for pid, entry in producers.producers.items()
        if entry.current_txn_first_offset is not None or now_ms - entry.last_timestamp < expiration_ms
    }


# ---------------------------------------------------------------- offset map


def build_offset_map(
    segments: Sequence[LogSegment],
    start: int,
    end: int,
    offset_map: OffsetMap,
    aborted: list[AbortedTxn],
    check_done: Callable[[], None] = lambda: None,
) -> bool:
    """Map keys of [start, end) to their latest offsets; True if the map filled up.

    ``segments`` are those overlapping [start, end) in order. When the map
    fills, ``offset_map.latest_offset`` tells how far this pass got.
    """
    offset_map.clear()
    txns = CleanedTransactionMetadata(list(aborted))
    for i, segment in enumerate(segments):
        next_start = segments[i + 1].base_offset if i + 1 < len(segments) else end
        for position, header in segment.batches(_start_position(segment, start)):
            check_done()
            if header.base_offset >= end:
                break
            if header.is_control:
                txns.on_control_batch_read(header, control_type_of(segment.read_batch(position, header)))
            elif not txns.on_batch_read(header):
                _, records = read_batch(segment.read_batch(position, header))
                for record in records:
                    if record.key is not None and record.offset >= start:
                        if offset_map.is_full:
                            return True
                        offset_map.put(record.key, record.offset)
            if header.last_offset >= start:
                offset_map.update_latest_offset(header.last_offset)
        # An offset gap at the end of the segment is covered too.
        offset_map.update_latest_offset(min(next_start, end) - 1)
    return False


def _start_position(segment: LogSegment, offset: int) -> int:
    if offset <= segment.base_offset:
        return 0
    return segment.offset_index.lookup(offset).position


# ---------------------------------------------------------------- grouping


def group_segments_by_size(
    segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[LogSegment]]:
    """Consecutive segments grouped so each group fits one segment and one index."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.size_in_bytes
        time_index_size = segments[i].time_index.size_in_bytes
        i += 1
        while i < len(segments):
            nxt = segments[i]
            # The next segment's last offset, bounded by what follows it.
            last_offset = (segments[i + 1].base_offset if i + 1 < len(segments) else first_uncleanable_offset) - 1
            if (
                log_size + nxt.size > max_size
                or index_size + nxt.offset_index.size_in_bytes > max_index_size
                or time_index_size + nxt.time_index.size_in_bytes > max_index_size
                or (nxt.size > 0 and last_offset - group[0].base_offset > _INT32_MAX)
            ):
                break
            group.append(nxt)
            log_size += nxt.size
            index_size += nxt.offset_index.size_in_bytes
            time_index_size += nxt.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


# ---------------------------------------------------------------- batch filter


class BatchRetention(enum.Enum):
    DELETE = "delete"  # drop the batch whatever its records
    DELETE_EMPTY = "delete_empty"  # drop it only if no record survives
    RETAIN_EMPTY = "retain_empty"  # keep at least an empty batch


@dataclass
class CleanerStats:
    batches_read: int = 0
    records_read: int = 0
    bytes_read: int = 0
    batches_written: int = 0
    records_written: int = 0
    bytes_written: int = 0
    invalid_records: int = 0


@dataclass
class BatchFilter:
    """Decides, batch by batch, what a cleaning pass keeps (Kafka's RecordFilter)."""

    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    transactions: CleanedTransactionMetadata
    last_records: dict[int, tuple[int | None, int]]
    upper_bound_offset: int
    stats: CleanerStats = field(default_factory=CleanerStats)

    def filter(self, batch: bytes, header: RecordBatchHeader) -> bytes | None:
        """The batch as it should be written to the cleaned segment, or None."""
        self.stats.batches_read += 1
        self.stats.records_read += header.records_count
        self.stats.bytes_read += len(batch)
        out = self._filter(batch, header)
        if out is not None:
            self.stats.batches_written += 1
            self.stats.bytes_written += len(out)
        return out

    def _filter(self, batch: bytes, header: RecordBatchHeader) -> bytes | None:
        if header.is_control:
            can_discard = self.transactions.on_control_batch_read(header, control_type_of(batch))
            discard_records = can_discard and header.has_delete_horizon and header.base_timestamp <= self.now_ms
        else:
            can_discard = self.transactions.on_batch_read(header)
            discard_records = can_discard
        retention = self._batch_retention(header, discard_records)
        if retention is BatchRetention.DELETE:
            return None
        _, records = read_batch(batch)
        retained: list[Record] = []
        contains_tombstones = False
        for record in records:
            if self._retain(header, record, discard_records):
                retained.append(record)
                contains_tombstones |= record.value is None
        self.stats.records_written += len(retained)
        if retained:
            marker_for_empty_txn = can_discard and header.is_control
            need_horizon = (contains_tombstones or marker_for_empty_txn) and not header.has_delete_horizon
            if len(retained) == len(records) and not need_horizon:
                return batch
            if need_horizon:
                horizon: int | None = self.now_ms + self.delete_retention_ms
            else:
                horizon = header.base_timestamp if header.has_delete_horizon else None
            return bytes(rebuild_batch(header, retained, horizon))
        if retention is BatchRetention.RETAIN_EMPTY:
            return bytes(empty_batch(header))
        return None

    def _batch_retention(self, header: RecordBatchHeader, discard_records: bool) -> BatchRetention:
        last = self.last_records.get(header.producer_id) if header.producer_id != NO_PRODUCER_ID else None
        if last is not None:
            last_data_offset, epoch = last
            if last_data_offset is not None:
                is_last_of_producer = header.last_offset == last_data_offset
            else:
                is_last_of_producer = header.is_control and header.producer_epoch == epoch
            if is_last_of_producer:
                return BatchRetention.RETAIN_EMPTY
        if header.next_offset == self.upper_bound_offset:
            return BatchRetention.RETAIN_EMPTY
        return BatchRetention.DELETE if discard_records else BatchRetention.DELETE_EMPTY

    def _retain(self, header: RecordBatchHeader, record: Record, discard_records: bool) -> bool:
        if discard_records:
            return False
        if header.is_control:
            return True
        if record.offset > self.offset_map.latest_offset:
            return True  # beyond this pass's map: nothing newer is known
        if record.key is None:
            self.stats.invalid_records += 1
            return False
        if record.offset < self.offset_map.get(record.key):
            return False
        if record.value is not None:
            return True
        return not header.has_delete_horizon or self.now_ms < header.base_timestamp


def rebuild_batch(header: RecordBatchHeader, records: list[Record], delete_horizon_ms: int | None) -> bytearray:
    """The batch with only ``records``, keeping everything Kafka keeps."""
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    return build_batch(
        records,
        base_offset=header.base_offset,
        compression=header.compression_type,
        timestamp_type=header.timestamp_type,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        partition_leader_epoch=header.partition_leader_epoch,
        log_append_time=header.max_timestamp if log_append_time else None,
        delete_horizon_ms=delete_horizon_ms,
        last_offset_delta=header.last_offset_delta,
    )


def empty_batch(header: RecordBatchHeader) -> bytearray:
    """A batch with no records that keeps the offsets and producer fields (RETAIN_EMPTY)."""
    attributes = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG | CONTROL_FLAG)
    return build_batch_header(
        base_offset=header.base_offset,
        records_size=0,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=0,
        partition_leader_epoch=header.partition_leader_epoch,
    )


# ---------------------------------------------------------------- rewriting


def clean_segments(
    log: CleanerLog,
    group: Sequence[LogSegment],
    batch_filter: BatchFilter,
    check_done: Callable[[], None] = lambda: None,
) -> LogSegment:
    """Rewrite ``group`` into one cleaned segment and swap it into ``log``."""
    config = log.config
    base_offset = group[0].base_offset
    cleaned = LogSegment.open(log.dir, base_offset, config, file_suffix=CLEANED_FILE_SUFFIX, create=True)
    try:
        if cleaned.size or cleaned.txn_index.entries:  # a leftover of an interrupted pass: start over
            cleaned.delete_if_exists()
            cleaned = LogSegment.open(log.dir, base_offset, config, file_suffix=CLEANED_FILE_SUFFIX, create=True)
        batch_filter.transactions.cleaned_index = cleaned.txn_index
        pending = bytearray()
        for segment in group:
            for position, header in segment.batches():
                check_done()
                out = batch_filter.filter(segment.read_batch(position, header), header)
                if out is not None:
                    pending += out
                    if len(pending) >= WRITE_CHUNK_BYTES:
                        cleaned.append_batches(pending)
                        pending = bytearray()
        if pending:
            cleaned.append_batches(pending)
        cleaned.on_become_inactive_segment()
        cleaned.flush()
        # Keep the last modified time of the originals (retention by mtime and
        # the legacy horizon look at it).
        mtime = group[-1].last_modified_ms() / 1000
        for path in (cleaned.log.path, cleaned.offset_index.path, cleaned.time_index.path, cleaned.txn_index.path):
            if path.exists():  # a .txnindex only once it has an entry
                os.utime(path, (mtime, mtime))
    except BaseException:
        cleaned.delete_if_exists()
        raise
    finally:
        batch_filter.transactions.cleaned_index = None
    log.replace_segments([cleaned], list(group))
    return cleaned
